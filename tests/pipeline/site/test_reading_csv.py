"""The reader options the API reference gives in "Reading the CSV", run as written on a CSV of the
service's own shape: Nasarawa's `NA` stays a string, empty cells are missing, codes stay text."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

SAMPLE = ("lga_code,lga,state_code,state,score,itn_use\r\n"
          "NG026001,Akwanga,NA,Nasarawa,0.31,\r\n"
          "NG020001,Ajingi,KN,Kano,0.32,0.5\r\n")


def snippet(lang: str) -> str:
    text = (REPO_ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Reading the CSV", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{lang}\n(.*?)^```$", section, re.S | re.M)[0]


def test_the_pandas_options_keep_na_a_string(tmp_path: Path) -> None:
    path = tmp_path / "lgas.csv"
    path.write_text(SAMPLE)
    code = f"url_or_file = {str(path)!r}\n" + snippet("python") + (
        "\nprint(repr(list(df['state_code'])), repr(df['itn_use'].isna().tolist()), df['lga_code'].dtype)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    codes, _, dtype = out.stdout.rsplit(" ", 1)[0].split("] "), None, out.stdout.split()[-1]
    assert codes[0] == "['NA', 'KN'" and codes[1] == "[True, False]"
    assert dtype in ("object", "str", "string")  # text: pandas 2 says object, pandas 3 str


def test_the_r_options_keep_na_a_string(tmp_path: Path) -> None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("Rscript is not installed")
    path = tmp_path / "lgas.csv"
    path.write_text(SAMPLE)
    code = f'url_or_file <- "{path}"\n' + snippet("r") + (
        '\ncat(df$state_code, is.na(df$state_code), is.na(df$itn_use), class(df$lga_code), "\\n")')
    out = subprocess.run([rscript, "-e", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # `cat` prints a missing value as NA too: is.na tells the string from the missing value
    assert out.stdout.split() == ["NA", "KN", "FALSE", "FALSE", "TRUE", "FALSE", "character"]
