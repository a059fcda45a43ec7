"""One region setting ($MALARIA_RISK_REGION) for the CLI, the bundle and the deploy; no silent us-east-1."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from deploy import build_bundle
from edge.settings import REGION_ENV, EdgeSettings, SettingsError, home_region
from pipeline.errors import PublishError
from pipeline.publish.s3.client import publish_region


def test_unset_is_a_clear_error_never_a_default():
    with pytest.raises(SettingsError, match=REGION_ENV):
        home_region(None, {"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"})
    assert home_region(None, {REGION_ENV: "eu-west-1"}) == "eu-west-1"
    assert home_region("eu-west-2", {REGION_ENV: "eu-west-1"}) == "eu-west-2"  # --region wins
    with pytest.raises(SettingsError, match="not an AWS region"):
        home_region(None, {REGION_ENV: "Europe"})


def test_the_bundle_needs_the_region_and_the_bucket_shares_it():
    with pytest.raises(SettingsError, match="needs region"):
        EdgeSettings.from_mapping({"bucket": "bucket-b", "table_prefix": "t-"})
    s = EdgeSettings.from_mapping({"bucket": "bucket-b", "table_prefix": "t-", "region": "eu-west-1"})
    assert (s.region, s.bucket_region) == ("eu-west-1", "eu-west-1")
    with pytest.raises(SettingsError, match="log_ok_every"):
        EdgeSettings.from_mapping({"bucket": "bucket-b", "table_prefix": "t-", "region": "eu-west-1",
                                   "log_ok_every": -1})


def test_build_bundle_reads_the_one_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv(REGION_ENV, raising=False)
    out = tmp_path / "edge.zip"
    with pytest.raises(SystemExit) as e:
        build_bundle.main(["--bucket", "bucket-b", "--table-prefix", "t-", "--out", str(out)])
    assert e.value.code == 2 and REGION_ENV in capsys.readouterr().err and not out.exists()
    monkeypatch.setenv(REGION_ENV, "eu-west-1")
    assert build_bundle.main(["--bucket", "bucket-b", "--table-prefix", "t-", "--out", str(out),
                              "--log-ok-every", "10"]) == 0
    config = json.loads(zipfile.ZipFile(out).read("edge_config.json"))
    assert (config["region"], config["bucket_region"], config["log_ok_every"]) == ("eu-west-1", "eu-west-1", 10)


def test_publishing_to_aws_needs_the_region_a_local_server_does_not():
    with pytest.raises(PublishError, match=REGION_ENV):
        publish_region(None, {"AWS_DEFAULT_REGION": "us-east-1"})
    assert publish_region(None, {REGION_ENV: "eu-west-1"}) == "eu-west-1"
    assert publish_region("http://127.0.0.1:1", {}) == "us-east-1"  # not AWS: the name only signs
    assert publish_region("http://127.0.0.1:1", {REGION_ENV: "eu-west-1"}) == "eu-west-1"
