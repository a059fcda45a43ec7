"""Suggestions for a state or LGA given by name: `state=Kano` → KN, `lga=Bunkure` → NG020006.

The gate asks only after a value failed validation, so nothing here is on the path of a good
request or the CDN function's cold start: this module and `difflib` are imported on the first
unknown state or LGA, and the names come from the release (the file `NAMES_KEY`, which the
pipeline writes beside the route files), read once per release.

The index (JSON, written by pipeline/datasets/boundaries.py):

    {"states": [[code, name], ...],
     "variants": {normalised variant: code, ...},   # "fct", "abuja", "nassarawa"...
     "lgas": [[lga_code, name, state_code], ...]}

Matching, in order, the first that finds anything: the value as a code in another case (or
ISO 3166-2 `NG-KN`); the name, ignoring case, accents, spaces and punctuation ("Akwa-Ibom",
"akwa ibom") and a trailing "State"/"LGA"; a known variant; for a state, three or four letters
that begin its name ("BAU" → BA, Bauchi); then close spellings (difflib).
Every LGA of a matched name is suggested: several LGAs share a name (Obi, Bassa, Nasarawa…).
"""

# Annotations are evaluated, not postponed, like the rest of the edge.

import json
import re
import unicodedata
from typing import Any

from .files import (
    NAMES_KEY as NAMES_KEY,  # the names index inside a release (not a route: never served)
)

MAX_SUGGESTIONS = 8  # an answer stays small (CloudFront: 40 KB for a generated response)
ABBREVIATION_LENGTHS = (3, 4)  # "BAU", "ADAM": the start of a state's name (two letters are a code)
MAX_NAME = 60  # longer than any state or LGA name with room: a longer value is no name, and costs no matching
_SUFFIX = re.compile(r"(state|lga|localgovernmentarea|localgovernment)$")


def normalise(text: str) -> str:
    """Case, accents, spaces and punctuation removed: "Akwa-Ibom" = "akwa ibom" = "AKWA IBOM"."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "", ascii_text.lower())


def _stem(text: str) -> str:
    key = normalise(text)
    stripped = _SUFFIX.sub("", key)
    return stripped or key


class Names:
    """The parsed index, with lookup tables built once."""

    def __init__(self, doc: Any):
        self.states: dict[str, str] = {str(c): str(n) for c, n in doc.get("states", ())}
        self.state_keys: dict[str, set[str]] = {}
        for code, name in self.states.items():
            self.state_keys.setdefault(normalise(name), set()).add(code)
        for variant, code in dict(doc.get("variants", {})).items():
            if code in self.states:
                self.state_keys.setdefault(normalise(variant), set()).add(str(code))
        self.state_lists: dict[str, list[str]] = {k: sorted(v) for k, v in self.state_keys.items()}
        self.lgas: dict[str, tuple[str, str]] = {str(c): (str(n), str(s)) for c, n, s in doc.get("lgas", ())}
        self.lga_keys: dict[str, list[str]] = {}
        for code, (name, _) in sorted(self.lgas.items()):
            self.lga_keys.setdefault(normalise(name), []).append(code)

    @classmethod
    def from_bytes(cls, body: bytes) -> "Names":
        return cls(json.loads(body))

    # -- states -----------------------------------------------------------------------------------
    def state_codes(self, raw: str) -> list[str]:
        """State codes `raw` most likely means, best first; empty when nothing is close."""
        upper = raw.strip().upper()
        return _codes(raw, upper[3:] if upper.startswith("NG-") else upper, self.states,
                      self.state_lists, n=3, cutoff=0.75, abbreviations=True)

    def state_suggestions(self, raw: str) -> list[dict[str, str]]:
        return [{"state_code": c, "state": self.states[c]} for c in self.state_codes(raw)]

    # -- LGAs -------------------------------------------------------------------------------------
    def lga_codes(self, raw: str) -> list[str]:
        return _codes(raw, raw.strip().upper(), self.lgas, self.lga_keys, n=4, cutoff=0.8)

    def lga_suggestions(self, raw: str) -> list[dict[str, str]]:
        out = []
        for code in self.lga_codes(raw):
            name, state = self.lgas[code]
            out.append({"lga_code": code, "lga": name, "state_code": state, "state": self.states.get(state, state)})
        return out


def _codes(raw: str, upper: str, known: Any, keys: dict[str, list[str]], n: int, cutoff: float,
           abbreviations: bool = False) -> list[str]:
    """The matching order of the module's docstring, for states and LGAs alike: `upper` as a code, the
    name's key, (states) an abbreviation the name begins with, then close spellings."""
    if len(raw) > MAX_NAME:
        return []
    if upper in known:
        return [upper]
    key = _stem(raw)
    if not key:
        return []
    if key in keys:
        return keys[key][:MAX_SUGGESTIONS]
    if abbreviations and len(key) in ABBREVIATION_LENGTHS:
        # an abbreviation of the name ("BAU" Bauchi, "KAN" Kano, "AKW" Akwa Ibom): the states it begins
        short = sorted({c for k, codes in keys.items() if k.startswith(key) for c in codes})
        if short:
            return short[:MAX_SUGGESTIONS]
    import difflib

    out: list[str] = []
    for k in difflib.get_close_matches(key, list(keys), n=n, cutoff=cutoff):
        out.extend(c for c in keys[k] if c not in out)
    return out[:MAX_SUGGESTIONS]


def sentence(code: str, suggestions: list[dict[str, str]]) -> str:
    """"Did you mean …?" for a problem's detail (empty without suggestions)."""
    if not suggestions:
        return ""
    if code == "UNKNOWN_STATE":
        parts = [f"`{s['state_code']}` ({s['state']})" for s in suggestions]
    else:
        parts = [f"`{s['lga_code']}` ({s['lga']}, {s['state']} `{s['state_code']}`)" for s in suggestions]
    if len(parts) == 1:
        return f"Did you mean {parts[0]}?"
    return f"Did you mean {', '.join(parts[:-1])} or {parts[-1]}?"


def suggest(code: str, raw: str, names: "Names | None") -> list[dict[str, str]]:
    if names is None:
        return []
    if code == "UNKNOWN_STATE":
        return names.state_suggestions(raw)
    if code == "UNKNOWN_LGA":
        return names.lga_suggestions(raw)
    return []
