"""Every input of a build in one typed object, each file read once.

The build makes one `Inputs` for its data directory and geography and passes it to every
producer through the build context, so the risk producer, the transmission producer and
the validation report read the survey table, the rainfall and the case records once
between them instead of once each. Each field is read on first use by the same reader
function a single producer would call (`pipeline/sources/*.py`), so an absent optional
input costs nothing and a malformed one fails with the same one-line InputError, at the
same point of the build, as before. Optional inputs are `None` when their file is absent.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from pipeline.sources import (
    cases,
    dated_cases,
    hbhi_microscopy,
    incidence,
    interventions,
    rainfall,
    survey,
    temperature,
)
from pipeline.sources.names import state_name_codes

if TYPE_CHECKING:
    from pipeline.geography import Geography


class Inputs:
    """The build's inputs (see the module docstring); attributes are read lazily, once."""

    def __init__(self, data_dir: Path, geography: Geography | None) -> None:
        self.data_dir = Path(data_dir)
        self.geography = geography

    def _states(self) -> pl.DataFrame:
        if self.geography is None:
            raise ValueError("this input needs the build's geography")
        return self.geography.states

    def has(self, relative: str) -> bool:
        return (self.data_dir / relative).exists()

    @cached_property
    def survey(self) -> pl.DataFrame:
        """Survey positivity rows (pipeline.sources.survey schema)."""
        states = self._states()
        return survey.read_survey_positivity(self.data_dir, state_name_codes(states), states["state_code"].to_list())

    @cached_property
    def recorded_rainfall(self) -> rainfall.RecordedRainfall:
        return rainfall.read_recorded_rainfall(self.data_dir)

    @cached_property
    def state_climatology(self) -> pl.DataFrame | None:
        """The CHIRPS 1991-2020 state climatology file; None when absent."""
        if not self.has(rainfall.CHIRPS_CLIMATOLOGY):
            return None
        return rainfall.read_state_chirps_climatology(self.data_dir)

    @cached_property
    def state_dekadal(self) -> pl.DataFrame | None:
        """The dekadal CHIRPS state series (read once: the season fit's onset and SMC planning both read it);
        None when absent."""
        if not self.has(rainfall.CHIRPS_DEKADAL):
            return None
        return rainfall.read_state_chirps_dekadal(self.data_dir)

    @cached_property
    def lga_climatology(self) -> pl.DataFrame:
        return rainfall.read_lga_climatology(self.data_dir)

    @cached_property
    def lga_temperature(self) -> pl.DataFrame | None:
        """LGA monthly air temperature climatology (model 6's thermal suitability); None when absent."""
        return temperature.read_lga_temperature(self.data_dir)

    @cached_property
    def archetype_profiles(self) -> pl.DataFrame | None:
        """The 22 routine-data archetype profiles; None unless both case-record files are present."""
        if not (self.has(cases.ARCHETYPE_PROFILES) and self.has(cases.LGA_ARCHETYPES)):
            return None
        return cases.read_archetype_profiles(self.data_dir)

    @cached_property
    def lga_archetypes(self) -> pl.DataFrame | None:
        if not (self.has(cases.ARCHETYPE_PROFILES) and self.has(cases.LGA_ARCHETYPES)):
            return None
        return cases.read_lga_archetypes(self.data_dir)

    @cached_property
    def dated_cases(self) -> pl.DataFrame | None:
        """Dated monthly LGA cases (fitting and validation only, never published), keyed to the
        geography's lga_code (the file uses the eHA code); None when absent."""
        raw = dated_cases.read_dated_lga_cases(self.data_dir)
        if raw is None or self.geography is None:
            return raw
        return dated_cases.with_geography_codes(raw, self.geography.lgas)

    @cached_property
    def lga_positivity(self) -> pl.DataFrame | None:
        return hbhi_microscopy.read_lga_positivity(self.data_dir)

    @cached_property
    def incidence(self) -> pl.DataFrame | None:
        """MAP-style incidence: read by the validation report only, never by the model."""
        return incidence.read_incidence(self.data_dir, self._states())

    @cached_property
    def smc_states(self) -> pl.DataFrame | None:
        return interventions.read_smc_states(self.data_dir, self._states())

    @cached_property
    def llin_campaigns(self) -> pl.DataFrame | None:
        return interventions.read_llin_campaigns(self.data_dir, self._states())
