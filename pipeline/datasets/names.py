"""The names index the edge suggests codes from (`state=Kano` → KN, `lga=Bunkure` → NG020006).

Written into every release at `edge.files.NAMES_KEY` by the geography producer, from the same
geography the API's codes come from; the edge reads it only when a state or LGA is unknown
(edge/names.py says how it matches). Names are OCHA COD-AB's; the variants are the spellings
the sources themselves use (pipeline/sources/names.py) and a few more that people type.
"""

from __future__ import annotations

from typing import Any

import orjson

from edge.names import normalise
from pipeline.geography import Geography
from pipeline.sources.names import STATE_NAME_VARIANTS

# Spellings people type for a state that neither the OCHA name nor a close spelling finds.
TYPED_VARIANTS: dict[str, str] = {
    "fct": "FC",
    "abuja": "FC",
    "abujafct": "FC",
    "fctabuja": "FC",
    "federalcapital": "FC",
    "nassarawa": "NA",
    "nasarawastate": "NA",
    "akwaibom": "AK",
    "akwa": "AK",
    "crossriver": "CR",
    "calabar": "CR",
}


def names_index(geography: Geography) -> dict[str, Any]:
    states = geography.states.select("state_code", "state").sort("state_code")
    codes = set(states["state_code"].to_list())
    variants = {normalise(k): v for k, v in {**STATE_NAME_VARIANTS, **TYPED_VARIANTS}.items() if v in codes}
    lgas = geography.lgas.select("lga_code", "lga", "state_code").sort("lga_code")
    return {"states": [list(r) for r in states.iter_rows()], "variants": dict(sorted(variants.items())),
            "lgas": [list(r) for r in lgas.iter_rows()]}


def names_file(geography: Geography) -> tuple[str, bytes]:
    return "application/json", orjson.dumps(names_index(geography))
