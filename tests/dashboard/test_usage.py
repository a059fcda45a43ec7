"""Usage the dashboard shows comes from the gate's own counting: N requests through the real
local server (limits on, SQLite counters) show as N this month and "last used today"."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from dashboard.service import Space
from edge.keys import hash_key
from edge.limits import Limiter
from edge.local.app import App
from tests.conftest import LiveServer

from .conftest import World

ANN = "ann@ngo.example"


def test_requests_show_as_this_months_usage(world: World, release_root: Path, browser_for):
    s = world.service
    s.create_org("staff:test", "ngo", "Health NGO", ANN)
    kid, key = s.create_key(ANN, Space("org", "ngo"), "counted", ["risk_scores"], "test", None, "t1")
    _, idle = s.create_key(ANN, Space("org", "ngo"), "idle", ["risk_scores"], "test", None, "t2")
    n = 7
    with LiveServer(App(release_root, world.keys, Limiter(world.counter, per_minute=1000))) as api, \
            httpx.Client(base_url=api.url) as client:
        answers = [client.get("/v1/periods", headers={"Authorization": f"Bearer {key}"}).status_code
                   for _ in range(n)]
        assert answers == [200] * n
        assert client.get("/v1/periods", headers={"Authorization": "Bearer svc_test_" + "x" * 32}).status_code == 401
    b = browser_for()
    b.sign_in(world, ANN)
    page = b.get(f"/o/ngo/keys/{kid}").text
    month = re.search(r'class="month-count"><span class="n">(\d+)</span>', page)
    assert month and int(month.group(1)) == n
    assert re.search(r'class="last-used">today<', page)
    listing = b.get("/o/ngo/keys").text
    assert listing.count('class="last-used">today<') == 1 and listing.count('class="last-used">never<') == 1


def test_an_org_key_keeps_answering_after_its_creator_is_removed(world: World, release_root: Path):
    s = world.service
    s.create_org("staff:test", "ngo", "Health NGO", ANN)
    s.store.set_role("ngo", "bo@ngo.example", "admin", world.clock().isoformat())
    _, org_key = s.create_key(ANN, Space("org", "ngo"), "org", ["risk_scores"], "test", None, "t1")
    s.store.ensure_account("ada@uni.example", world.clock().isoformat())
    s.set_unlocked("staff:test", "ada@uni.example", True)
    _, own_key = s.create_key("ada@uni.example", Space("me", "ada@uni.example"), "own", ["risk_scores"], "test",
                              None, "t2")
    with LiveServer(App(release_root, world.keys)) as api, httpx.Client(base_url=api.url) as client:
        def status(key: str) -> int:
            return client.get("/v1/risk/states", headers={"Authorization": f"Bearer {key}"}).status_code

        assert (status(org_key), status(own_key)) == (200, 200)
        s.remove_account("staff:test", ANN)
        s.remove_account("staff:test", "ada@uni.example")
        assert (status(org_key), status(own_key)) == (200, 401)
    assert world.keys.lookup(hash_key(org_key)).owner is None
