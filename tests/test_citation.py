"""CITATION.cff: valid YAML with the fields the Citation File Format 1.2.0 requires, the licence the
bundles state for the derived data, and the package version."""

from __future__ import annotations

import tomllib

import yaml

from pipeline.attribution import DERIVED_LICENCE
from tests.paths import REPO_ROOT


def test_citation_file_names_the_derived_licence_and_version() -> None:
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for required in ("message", "title", "authors"):
        assert cff[required], required
    assert all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert cff["license"] == DERIVED_LICENCE["name"]
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cff["version"] == version
