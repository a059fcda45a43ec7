"""The build settings read DATA_DIR once, the same way from any working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.settings import DEFAULT_DATA_DIR, BuildSettings


def test_a_relative_data_dir_is_taken_from_where_the_command_started(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    """The Makefile exports `../shared/data`: links and subprocesses made later in another folder
    must still find it, so the setting is absolute from the moment it is read."""
    monkeypatch.chdir(tmp_path)
    s = BuildSettings.from_env({"DATA_DIR": "../shared/data"})
    assert s.data_dir.is_absolute()
    assert s.data_dir == tmp_path.parent / "shared" / "data"


def test_no_data_dir_means_the_folder_beside_the_checkout():
    assert BuildSettings.from_env({}).data_dir == DEFAULT_DATA_DIR
    assert BuildSettings.from_env({"DATA_DIR": ""}).data_dir == DEFAULT_DATA_DIR


def test_the_public_base_url_is_absolute_and_has_no_trailing_slash():
    from pipeline.errors import OperatorError
    from pipeline.settings import DEFAULT_BASE_URL

    assert BuildSettings.from_env({}).base_url == DEFAULT_BASE_URL
    assert BuildSettings.from_env({"PUBLIC_BASE_URL": "https://api.example.org/"}).base_url == "https://api.example.org"
    for bad in ("api.example.org", "ftp://api.example.org", "https://", "https://a.org/?x=1"):
        with pytest.raises(OperatorError, match="PUBLIC_BASE_URL"):
            BuildSettings.from_env({"PUBLIC_BASE_URL": bad})
