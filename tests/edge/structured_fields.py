"""Reading back the RateLimit fields the gate writes (tests only)."""

from __future__ import annotations


def parse_sf_list(value: str) -> dict[str, dict[str, int]]:
    """A Structured Fields List as edge/limits.py writes it: name → integer params.

    Deliberately narrow: quoted names, integer parameters — the subset we emit.
    """
    out: dict[str, dict[str, int]] = {}
    for member in value.split(","):
        name, *params = (p.strip() for p in member.strip().split(";"))
        if not (len(name) >= 2 and name[0] == name[-1] == '"'):
            raise ValueError(f"not a quoted policy name: {name!r}")
        out[name[1:-1]] = {k: int(v) for k, v in (p.split("=", 1) for p in params)}
    return out
