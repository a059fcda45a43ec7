"""`release publish` refuses a release whose estimated months end before the live one's
(pipeline/window.py), against the real S3 server, unless --allow-shrink."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.errors import WindowShrinks
from pipeline.publish import s3
from pipeline.release.manifest import MANIFEST_NAME
from pipeline.window import check_window, shrink_problem
from tests import s3server
from tests.pipeline.publish.test_publish import client, make_release, pointer_doc, publish, target  # noqa: F401
from tests.s3server import S3Server

s3_server = s3server.s3_server
s3_prefix = s3server.s3_prefix


def with_window(root: Path, rid: str, last: str) -> None:
    """A tiny release whose facts say the estimated months run 2026-01..`last`."""
    rdir = make_release(root, rid, seed=rid)
    doc = orjson.loads((rdir / MANIFEST_NAME).read_bytes())
    doc["facts"] = {"states": ["KN"], "estimated": [f"2026-{m:02d}" for m in range(1, int(last[5:]) + 1)],
                    "forecast": [], "available": []}
    (rdir / MANIFEST_NAME).write_bytes(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))


def test_shrink_rules():
    assert shrink_problem([], ["2026-01"]) is None
    assert shrink_problem(["2026-01", "2026-06"], ["2026-01", "2026-07"]) is None
    assert "2026-05 is older than 2026-06" in str(shrink_problem(["2026-01", "2026-06"], ["2026-01", "2026-05"]))
    assert "starts at 2026-02" in str(shrink_problem(["2026-01", "2026-06"], ["2026-02", "2026-06"]))
    with pytest.raises(WindowShrinks, match="--allow-shrink"):
        check_window(["2026-06"], ["2026-05"], "x", allow_shrink=False)
    check_window(["2026-06"], ["2026-05"], "x", allow_shrink=True)


def test_publish_refuses_a_shrinking_window_before_uploading(
        client: Any, target: s3.Target, s3_server: S3Server, tmp_path: Path) -> None:  # noqa: F811
    with_window(tmp_path, "20260701T000000Z-aaaaaaaa", "2026-06")
    publish(client, target, tmp_path, "20260701T000000Z-aaaaaaaa")
    with_window(tmp_path, "20260702T000000Z-bbbbbbbb", "2026-05")
    with pytest.raises(WindowShrinks):
        publish(client, target, tmp_path, "20260702T000000Z-bbbbbbbb")
    assert pointer_doc(s3_server, target)["release_id"] == "20260701T000000Z-aaaaaaaa"
    listed = client.list_objects_v2(Bucket=target.bucket, Prefix=target.release_prefix("20260702T000000Z-bbbbbbbb"))
    assert listed.get("KeyCount", 0) == 0  # nothing uploaded
    args = ["release", "publish", "--bucket", target.bucket, "--prefix", target.prefix,
            "--endpoint-url", s3_server.endpoint_url, "--root", str(tmp_path)]
    runner = CliRunner(env=s3_server.env())
    refused = runner.invoke(main, args)
    assert refused.exit_code == 1 and "2026-05 is older than 2026-06" in refused.output
    assert "Traceback" not in refused.output
    allowed = runner.invoke(main, [*args, "--allow-shrink"])
    assert allowed.exit_code == 0, allowed.output
    assert pointer_doc(s3_server, target)["release_id"] == "20260702T000000Z-bbbbbbbb"
