"""Every data source the service republishes figures from, with licence and citation.

One structured list so that every place that credits sources reads the same facts:
the site's sources page, the `source` fields of the responses and the README of the
downloadable bundles. The facts come from the SOURCES.md files next to the data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One credited data source; the facts come from the SOURCES.md files next to the data."""

    key: str  # stable identifier, for `source` fields and tests
    name: str
    provider: str
    used_for: str
    licence: str
    via: str
    note: str = ""
    citation: str = ""  # how to cite the source, where it asks for or has a citable publication

    def to_json(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in FIELDS}


FIELDS = ("key", "name", "provider", "used_for", "licence", "via", "note", "citation")

SOURCES: tuple[Source, ...] = (
    Source("boundaries", "LGA and state boundaries", "eHealth Africa / GRID3 Nigeria (eHA GeoServer layers, 2018–2019)",
           "LGA outlines, areas, representative points (/v1/boundaries/lgas, area_km2)",
           "CC BY 4.0 upstream (usual GRID3/eHA licence; not verified for this copy)",
           "repository Godskid89/nigeriadata, data/lga_admin_boundaries.rda and "
           "state_admin_boundaries.rda (commit 12c4a101)",
           "The copying repository states no licence. Credit eHealth Africa / GRID3."),
    Source("ocha_codab", "Common Operational Dataset, administrative boundaries (COD-AB) gazetteer",
           "OCHA, from OSGOF (Office of the Surveyor General of the Federation), edition 2019-04-17",
           "LGA codes (OCHA p-codes) and LGA names", "CC BY-IGO (as published on HDX, cod-ab-nga)",
           "repository haasinikellampalli-wq/DATASCI-112-Final---HC (commit 35cc5f91)"),
    Source("population", "Bottom-up gridded population estimates for Nigeria, version 2.0",
           "WorldPop and the National Population Commission of Nigeria (aggregated to LGA by Geopode)",
           "population per LGA and state; population density behind the derived is_urban flag",
           "CC BY 4.0 (WorldPop)", "repository Oluwatobi-abu/nigeria-lga-population-density (commit a18938c7)",
           "Modelled estimates, not census counts; the reference year is not stated in the file."),
    Source("state_names", "State names, ISO codes and geopolitical zones", "ropensci/naijR package data",
           "state names and zones", "GPL-3 package; the values are public facts",
           "repository ropensci/naijR, data/states_nigeria.rda (commit 7fed3840)"),
    Source("chirps", "CHIRPS v2.0 rainfall, state means (dekadal)",
           "UCSB Climate Hazards Center, aggregated by WFP (HDX: Rainfall Indicators at Subnational Level)",
           "recorded monthly rainfall per state and its climatology",
           "CHIRPS: public domain; WFP/HDX indicators: CC BY-IGO. Credit WFP / CHIRPS (UCSB Climate Hazards "
           "Center)", "repository DavidWinrich101/virawatch, backend/data/chirps_weekly_nigeria.csv",
           "Months from about 2026-05 may be CHIRPS-preliminary."),
    Source("lga_rainfall", "LGA rainfall climatology 2001–2016 (EMOD climate inputs from GSOD stations)",
           "Institute for Disease Modeling via the Nigeria HBHI modelling group (numalariamodeling)",
           "within-state shape of LGA rainfall (rescaled to state CHIRPS)", "Apache-2.0",
           "repository numalariamodeling/hbhi-nigeria-publication-2021 (commit dcc2f01e)"),
    Source("hbhi_inputs", "HBHI LGA model inputs: ITN use, case management, archetypes, routine-data seasonality",
           "numalariamodeling / Ozodiegwu et al., Malaria Journal 2023 (derived from DHS/MIS microdata and "
           "NMEP routine data)", "coverage context per LGA; independent seasonality check",
           "Apache-2.0", "repository numalariamodeling/hbhi-nigeria-publication-2021",
           "Model inputs assigned to all LGAs; LGAs without survey clusters inherit state or archetype values."),
    Source("dhs_sepmein", "DHS/MIS survey indicators (2010, 2015 MIS; 2018 DHS; 2021 MIS) and MAP-style incidence",
           "The DHS Program / NMIS tabulations and Malaria Atlas Project-style admin-1 incidence, as used in "
           "the WHO Nigeria Malaria Report 2022 (sepmein)",
           "survey positivity trends, net use and access; incidence for the external agreement check only",
           "Apache-2.0 (repository sepmein/nigeria_malaria_report_2022)",
           "repository sepmein/nigeria_malaria_report_2022 (commit 0982fb23)",
           "Incidence figures are modelled (MAP/WHO), not observations."),
    Source("nmis2021_soehtutaung", "2021 NMIS tabulations and ward walking time to primary health care",
           "Soe H Aung, MCDA Spatial DHS project (NMIS 2021 microdata; WorldPop v2.1; GRID3 facilities; MAP "
           "walking friction surface)", "2021 state survey figures; travel time to care", "MIT",
           "repository SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria",
           "Travel time is walking time; the state mean uses band midpoints (an approximation)."),
    Source("malariariskxai", "Four 2018 state survey values", "AyeshaCamran/MalariaRiskXAI",
           "fills four 2018 state gaps (Lagos, Anambra, Imo)", "MIT (stated in the README)",
           "repository AyeshaCamran/MalariaRiskXAI, data/data_cleaned_merged.csv (commit 193cac51)",
           "Not verified against the NDHS report."),
    Source("map_irs_2022", "Malaria Atlas Project: Africa IRS coverage, 2022 (release 2024-06)",
           "Malaria Atlas Project (MAP), Telethon Kids Institute / Curtin University",
           "irs_coverage per LGA and state (0 everywhere)",
           "CC BY 4.0 (MAP surfaces); MIT (copying repository)",
           "repository SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria, outputs/plots/mal_irs_final.tif "
           "(commit 8b9859f5), averaged inside each eHA/GRID3 LGA outline",
           "Modelled surface; every pixel of Nigeria is 0. PMI AIRS sprayed only two Nasarawa LGAs (Doma, "
           "Nasarawa Eggon) around 2011–2013, which a 2022 surface does not show.",
           "Malaria Atlas Project, Africa IRS coverage, 2022 (MAP data release 2024-06), CC BY 4.0."),
    Source("uw_sae_itn", "Small-area estimates of ITN use by children under 5 (ML_NETC_C_ITN), NDHS 2018 and 2024",
           "University of Washington, Multi-Indicator SAE website (model-based small-area estimates from DHS "
           "microdata, SUMMER/surveyPrev family)",
           "itn_use per LGA and state (2018), itn_use_2024, 90% intervals per LGA",
           "none stated in the repository; credit the University of Washington SAE project and The DHS Program",
           "repository richardli/gatesweb, docs/estimates/NGA_combined_estimates.csv (commit 00168347, "
           "indicator ML_NETC_C_ITN only)",
           "Model-based estimates for children under 5, not whole-population net use; the interval is 90%.",
           "University of Washington Multi-Indicator Small Area Estimation, Nigeria estimates "
           "(richardli/gatesweb); underlying data: NPC and ICF, Nigeria DHS 2018 and 2024."),
    Source("hbhi_pfpr_lga_2018", "NDHS 2018 microscopy positivity per LGA with children tested",
           "numalariamodeling / Ozodiegwu et al., Malaria Journal 2023 (aggregated from NDHS 2018 microdata)",
           "lower bound of children tested by microscopy per state, 2018 (survey-trend `sample`)",
           "Apache-2.0",
           "repository numalariamodeling/hbhi-nigeria-publication-2021, IPTi_scaling/IPTi_input_files/"
           "nigeria_dhs/data_analysis/bin/ds_para_prevalence_2018.csv (commit baf3ebdc)",
           "Covers the 8,118 children in clusters matched to an LGA, an undercount of the survey's sample; "
           "LGA values are never published.",
           "Ozodiegwu ID et al., Application of mathematical modelling to inform national malaria intervention "
           "planning in Nigeria, Malaria Journal 2023 (doi:10.1186/s12936-023-04563-w); data: NPC and ICF, "
           "Nigeria DHS 2018."),
    Source("ndhs2018_clusters", "NDHS 2018 clusters per state",
           "Fuglstad, Li and Wakefield, 'The two cultures of prevalence mapping' case study (NDHS 2018 microdata)",
           "lower bound of survey clusters per state, 2018 (survey-trend `sample`)",
           "none stated (README: DHS aggregated data may be shared); only per-state counts are used",
           "repository gafuglstad/prevalence-mapping, Nigeria-Vac/Data/Nigeria_AGG_DHS/preparedDHSdata.RData "
           "(commit 65dae291), counted per state",
           "Counts clusters holding a child aged 12–23 months: 1,324 of the survey's 1,389.",
           "Fuglstad, Li and Wakefield, 'The two cultures of prevalence mapping', case-study repository "
           "gafuglstad/prevalence-mapping; data: NPC and ICF, Nigeria DHS 2018."),
    Source("numalaria_urban_clusters", "Urban survey clusters of NMIS 2010, NMIS 2015 and NDHS 2018",
           "numalariamodeling, urban malaria DHS analysis (aggregated from NMIS/NDHS microdata)",
           "lower bounds of clusters and children tested by microscopy per state, 2010/2015/2018 "
           "(survey-trend `sample`)",
           "Apache-2.0",
           "repository numalariamodeling/urban-malaria-dhs-publication-2021, data/multivariate_analysis_dataset.csv "
           "(commit 903c43f6)",
           "Urban clusters only, so every count is a lower bound for the state.",
           "numalariamodeling/urban-malaria-dhs-publication-2021 (Northwestern University malaria modelling "
           "group); data: NMCP, NPC and ICF, Nigeria MIS 2010 and 2015, Nigeria DHS 2018."),
)


# The licence of what the service itself makes (scores, ranges, forecasts, seasons, aggregates and
# the tables that hold them). Why this one: docs/releases.md#licence. Every input is public domain or
# under an attribution-only licence (CC BY 4.0, CC BY-IGO, Apache-2.0, MIT); none is ShareAlike or
# NonCommercial, so an attribution licence keeps every input's duty and adds none that conflicts.
DERIVED_LICENCE = {
    "name": "CC-BY-4.0",
    "title": "Creative Commons Attribution 4.0 International",
    "path": "https://creativecommons.org/licenses/by/4.0/",
}
DERIVED_LICENCE_TERMS = (
    "The figures this service makes (risk scores and their ranges, forecasts, transmission seasons, "
    "population-weighted state values) and the tables holding them are licensed CC BY 4.0: credit the "
    "service with the citation above and the sources below. Figures passed on unchanged from a source "
    "(coverage context, survey values, outlines, population) keep that source's licence and credit; where a "
    "source states no licence (the University of Washington net-use estimates, the NDHS 2018 cluster counts) "
    "this licence does not extend to its figures."
)


def service_citation(release_id: str, model_version: str | None, updated_at: str, base_url: str,
                     bundle_name: str) -> str:
    """The one citation line of a release, with the absolute address of its pinned bundle."""
    return (f"Malaria risk data service for Nigeria, release {release_id} (model {model_version}), data loaded "
            f"{updated_at[:10]}. {base_url}/v1/downloads/{release_id}/{bundle_name}. Licence: CC BY 4.0 "
            "(derived figures; sources keep their own).")


def source(key: str) -> Source:
    """The credited source with this key; KeyError names the unknown key."""
    for s in SOURCES:
        if s.key == key:
            return s
    raise KeyError(f"no attribution entry {key!r}")


def credit(key: str) -> str:
    """One line for a `source` field: name, provider and licence."""
    s = source(key)
    return f"{s.name}. {s.provider}. Licence: {s.licence}."


def markdown_table(sources: tuple[Source, ...] = SOURCES) -> str:
    """The list as a Markdown table (for a README): source, provider, licence, citation."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| Source | Provider | Used for | Licence | Cite as |", "|---|---|---|---|---|"]
    lines += [f"| {cell(s.name)} | {cell(s.provider)} | {cell(s.used_for)} | {cell(s.licence)} | {cell(s.citation)} |"
              for s in sources]
    return "\n".join(lines) + "\n"
