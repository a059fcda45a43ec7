"""`data fetch` against a loopback HTTP server serving files in WFP's real format: every
failure leaves the data directory exactly as it was; success installs atomically and
keeps the previous copy."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.errors import FetchError, InputError
from pipeline.settings import BuildSettings
from pipeline.sources.fetch import FETCH_DIR, fetch_rainfall
from pipeline.sources.rainfall import WFP_SUBNATIONAL
from tests.rainfall_files import wfp_lines
from tests.rainfall_server import Behaviour, serving

FAST = replace(BuildSettings(), fetch_timeout=0.5, fetch_retries=1, fetch_backoff=0.01, fetch_deadline=30)


def body(**kw: object) -> bytes:
    return ("\n".join(wfp_lines(**kw)) + "\n").encode()  # type: ignore[arg-type]


def snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    """Every file (hidden ones too) with its bytes and modification time."""
    return {str(p.relative_to(d)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding last month's file (to 2020-05)."""
    d = tmp_path / "data"
    (d / "rainfall").mkdir(parents=True)
    (d / WFP_SUBNATIONAL).write_bytes(body(last="2020-05"))
    return d


def test_fetch_installs_atomically_keeps_previous_and_records_sha256(data_dir: Path):
    old = (data_dir / WFP_SUBNATIONAL).read_bytes()
    new = body(last="2020-06")
    b = Behaviour(new)
    with serving(b) as url:
        got = fetch_rainfall(data_dir, FAST, url=url)
        assert got.status == "updated" and got.report is not None and got.report.last == "2020-06"
        assert (data_dir / WFP_SUBNATIONAL).read_bytes() == new
        assert (data_dir / FETCH_DIR / "previous" / "nga-rainfall-subnat-full.csv").read_bytes() == old
        record = orjson.loads((data_dir / FETCH_DIR / "rainfall.json").read_bytes())
        assert record["sha256"] == hashlib.sha256(new).hexdigest() == got.sha256
        assert record["previous_sha256"] == hashlib.sha256(old).hexdigest() and record["url"] == url
        # the second fetch asks conditionally and the server's 304 changes nothing
        before = snapshot(data_dir)
        again = fetch_rainfall(data_dir, FAST, url=url)
        assert again.status == "unchanged" and b.requests[-1].get("If-None-Match") == b.etag
        assert snapshot(data_dir) == before
    assert not [p for p in (data_dir / "rainfall").iterdir() if p.name.startswith(".")]  # no temporary left


def test_same_bytes_without_validators_are_unchanged(data_dir: Path):
    same = (data_dir / WFP_SUBNATIONAL).read_bytes()
    before = (data_dir / WFP_SUBNATIONAL).stat().st_mtime_ns
    with serving(Behaviour(same)) as url:
        got = fetch_rainfall(data_dir, FAST, url=url)
    assert got.status == "unchanged" and (data_dir / WFP_SUBNATIONAL).stat().st_mtime_ns == before


def test_the_install_time_holds_while_the_bytes_do(data_dir: Path):
    """The data load time a release states (pipeline.buildkey.data_loaded_at) is when these bytes
    were installed: a later fetch of the same bytes keeps it, new bytes move it."""
    from pipeline.buildkey import data_loaded_at

    new = body(last="2020-06")
    with serving(Behaviour(new)) as url:
        fetch_rainfall(data_dir, FAST, url=url)
        first = orjson.loads((data_dir / FETCH_DIR / "rainfall.json").read_bytes())
        # as if installed a while ago, and asked again without validators (the bytes come back)
        record = {**first, "installed_at": "2020-07-02T05:00:00Z", "etag": None, "last_modified": None}
        (data_dir / FETCH_DIR / "rainfall.json").write_bytes(orjson.dumps(record))
        fetch_rainfall(data_dir, FAST, url=url)  # the same bytes again
    again = orjson.loads((data_dir / FETCH_DIR / "rainfall.json").read_bytes())
    assert again["installed_at"] == "2020-07-02T05:00:00Z" == data_loaded_at(data_dir)
    assert again["fetched_at"] >= first["fetched_at"]
    with serving(Behaviour(body(last="2020-07"))) as url:
        fetch_rainfall(data_dir, FAST, url=url)
    moved = orjson.loads((data_dir / FETCH_DIR / "rainfall.json").read_bytes())
    assert moved["installed_at"] != "2020-07-02T05:00:00Z" and moved["installed_at"] == data_loaded_at(data_dir)


@pytest.mark.parametrize(("modes", "words"), [
    (["truncate"], "truncated"),
    (["500"], "HTTP 500"),
    (["stall"], "stalled"),
    (["html"], "HTML page"),
    (["html-no-type"], "HTML/XML page"),
    (["404"], "HTTP 404"),
])
def test_every_failure_leaves_the_data_directory_unchanged(data_dir: Path, modes: list[str], words: str):
    before = snapshot(data_dir)
    b = Behaviour(body(last="2020-06"), modes=modes, stall_seconds=3)
    with serving(b) as url, pytest.raises(FetchError) as e:
        fetch_rainfall(data_dir, FAST, url=url)
    assert words in str(e.value) and url in str(e.value)
    # retried once, except a 404 (an error a retry cannot fix)
    assert len(b.requests) == (1 if modes == ["404"] else 2)
    assert snapshot(data_dir) == before


def test_a_failed_attempt_is_retried_with_backoff(data_dir: Path):
    waits: list[float] = []
    b = Behaviour(body(last="2020-06"), modes=["500", "truncate", "ok"])
    settings = replace(FAST, fetch_retries=3, fetch_backoff=0.5)
    with serving(b) as url:
        got = fetch_rainfall(data_dir, settings, url=url, sleep=waits.append)
    assert got.status == "updated" and got.attempts == 3 and waits == [0.5, 1.0]


def test_size_cap_checksum_and_input_rules_refuse_before_installing(data_dir: Path):
    before = snapshot(data_dir)
    new = body(last="2020-06")
    with serving(Behaviour(new)) as url:
        with pytest.raises(FetchError, match="size cap"):
            fetch_rainfall(data_dir, replace(FAST, fetch_max_bytes=1000), url=url)
        with pytest.raises(FetchError, match="differs from the published"):
            fetch_rainfall(data_dir, FAST, url=url, sha256="0" * 64)
    lines = wfp_lines(last="2020-06")
    lines.append(lines[40])  # a duplicated dekad
    with serving(Behaviour(("\n".join(lines) + "\n").encode())) as url, pytest.raises(InputError) as e:
        fetch_rainfall(data_dir, FAST, url=url)
    assert e.value.file == f"{url} (downloaded)" and e.value.row == len(lines) and "duplicate" in e.value.reason
    assert snapshot(data_dir) == before
    with serving(Behaviour(new)) as url:
        assert fetch_rainfall(data_dir, FAST, url=url, sha256=hashlib.sha256(new).hexdigest()).status == "updated"


def test_an_older_download_is_not_installed_unless_allowed(data_dir: Path):
    before = snapshot(data_dir)
    with serving(Behaviour(body(last="2020-04"))) as url:
        with pytest.raises(FetchError, match="older than the installed file"):
            fetch_rainfall(data_dir, FAST, url=url)
        assert snapshot(data_dir) == before
        assert fetch_rainfall(data_dir, FAST, url=url, allow_shrink=True).report.last == "2020-04"  # type: ignore[union-attr]


def test_cli_fetch_one_line_each_way(data_dir: Path, monkeypatch: pytest.MonkeyPatch):
    runner = CliRunner()
    with serving(Behaviour(body(last="2020-06"))) as url:
        ok = runner.invoke(main, ["data", "fetch", "--data-dir", str(data_dir), "--url", url])
        assert ok.exit_code == 0, ok.output
        assert ok.output.startswith("updated: ") and "months 2014-01..2020-06, provisional 2020-06" in ok.output
    with serving(Behaviour(b"", modes=["404"])) as url:
        bad = runner.invoke(main, ["data", "fetch", "--data-dir", str(data_dir), "--url", url])
    assert bad.exit_code == 1 and "HTTP 404" in bad.output and "Traceback" not in bad.output


def test_a_file_replaced_by_hand_is_not_taken_for_the_recorded_one(data_dir: Path):
    new = body(last="2020-06")
    b = Behaviour(new)
    with serving(b) as url:
        assert fetch_rainfall(data_dir, FAST, url=url).status == "updated"
        (data_dir / WFP_SUBNATIONAL).write_bytes(body(last="2020-06", prelim=0))  # edited by hand
        got = fetch_rainfall(data_dir, FAST, url=url)
    assert "If-None-Match" not in b.requests[-1]  # no 304 for a file we did not fetch
    assert got.status == "updated" and (data_dir / WFP_SUBNATIONAL).read_bytes() == new
