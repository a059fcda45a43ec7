"""The names index from the real geography: every one of the 37 states found by its name, its name
in other cases, with "State", by its variants and by a misspelling; a sample of LGAs by name and by a
misspelling, with every LGA of a shared name listed."""

from __future__ import annotations

import pytest

from edge.names import Names, normalise
from pipeline.datasets.names import names_index
from pipeline.geography import Geography, load_geography
from tests.paths import DATA_DIR, data_marks

pytestmark = data_marks("admin")


@pytest.fixture(scope="module")
def geography() -> Geography:
    return load_geography(DATA_DIR)


@pytest.fixture(scope="module")
def names(geography: Geography) -> Names:
    return Names(names_index(geography))


def misspelt(name: str) -> list[str]:
    """Typing slips: a letter doubled, and for longer names a letter dropped and two swapped."""
    mid = len(name) // 2
    out = [name[:mid] + name[mid] + name[mid:]]
    if len(normalise(name)) >= 6:
        out.append(name[:mid] + name[mid + 1:])
        out.append(name[:mid] + name[mid + 1] + name[mid] + name[mid + 2:])
    return out


def test_every_state_by_name_case_suffix_and_misspelling(geography: Geography, names: Names):
    rows = geography.states.select("state_code", "state").rows()
    assert len(rows) == 37
    for code, name in rows:
        for typed in (name, name.lower(), name.upper(), f"{name} State", name.replace(" ", "-"), code.lower(),
                      f"NG-{code}"):
            assert names.state_codes(typed) == [code], (typed, names.state_codes(typed))
        for typed in misspelt(name):
            assert code in names.state_codes(typed), (typed, names.state_codes(typed))


@pytest.mark.parametrize(("typed", "code"), [
    ("Nassarawa", "NA"), ("Akwa-Ibom", "AK"), ("Akwa ibom", "AK"), ("Abuja", "FC"), ("FCT", "FC"),
    ("fct abuja", "FC"), ("Cross-River", "CR"), ("Federal Capital Territory", "FC"),
])
def test_common_state_variants(names: Names, typed: str, code: str):
    assert names.state_codes(typed) == [code]


def test_a_sample_of_lgas_by_name_and_misspelling(geography: Geography, names: Names):
    lgas = geography.lgas.select("lga_code", "lga", "state_code").sort("lga_code")
    sample = lgas.gather_every(25)  # 31 LGAs across the country
    assert sample.height >= 30
    for code, name, state in sample.rows():
        found = names.lga_suggestions(name)
        assert code in [s["lga_code"] for s in found], (name, found)
        assert {"lga_code": code, "lga": name, "state_code": state} in [
            {k: s[k] for k in ("lga_code", "lga", "state_code")} for s in found]
        for typed in [name.upper(), name.lower(), *misspelt(name)]:
            assert code in names.lga_codes(typed), (typed, names.lga_codes(typed))


def test_shared_lga_names_list_every_lga(geography: Geography, names: Names):
    assert names.lga_codes("Bunkure") == ["NG020006"]
    by_name: dict[str, list[str]] = {}
    for code, name in geography.lgas.select("lga_code", "lga").sort("lga_code").rows():
        by_name.setdefault(normalise(name), []).append(code)
    several = {k: v for k, v in by_name.items() if len(v) > 1}
    assert several  # Obi, Bassa, Nasarawa, Ifelodun, Irepodun, Surulere…
    for key, codes in several.items():
        assert names.lga_codes(key) == codes
    assert len(names.lga_suggestions("Obi")) == 2
