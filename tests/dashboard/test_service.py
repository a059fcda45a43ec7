"""The dashboard's service layer on real SQLite stores: who may do what, what each change
writes to the audit log, and the key model's rules (organisation keys outlive their creator)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from datetime import timedelta

import pytest

from dashboard.service import (
    CODE_TRIES,
    CODES_PER_BROWSER,
    AlreadySubmitted,
    DashboardError,
    Forbidden,
    Limited,
    NeedsFreshCode,
    NotFound,
    Space,
)
from edge.keys import hash_key
from tests.edge.conftest import boto_client
from tests.edge.conftest import endpoint as endpoint  # noqa: F401  (moto's server, for the DynamoDB stores)

from .conftest import World

_n = iter(range(10_000))


@pytest.fixture(params=["sqlite", "dynamodb"])
def world(request: pytest.FixtureRequest, tmp_path) -> World:
    """Every rule holds on both pairs of stores: SQLite (local) and DynamoDB (production, on moto)."""
    if request.param == "sqlite":
        return World(tmp_path)
    from dashboard.dynamodb import DynamoDBDashboardStore
    from edge.stores.dynamodb import DynamoDBKeyStore

    c = boto_client(request.getfixturevalue("endpoint"))
    prefix = f"d{next(_n)}-"
    keys = DynamoDBKeyStore(c, prefix)
    keys.create_tables()
    store = DynamoDBDashboardStore(c, prefix)
    store.create_tables()
    return World(tmp_path, keys=keys, store=store)

ANN, BOB, CY, ADA = "ann@ngo.example", "bob@ngo.example", "cy@other.example", "ada@uni.example"
NGO, OTHER = Space("org", "ngo"), Space("org", "other")


def signed_in(world: World, email: str) -> str:
    world.service.request_code(email)
    return world.service.sign_in(email, world.code_for(email))


def fresh(world: World) -> str:
    return world.clock().isoformat()


@pytest.fixture
def orgs(world: World) -> World:
    s = world.service
    s.create_org("staff:test", "ngo", "Health NGO", ANN)
    s.create_org("staff:test", "other", "Other", CY)
    s.store.set_role("ngo", BOB, "member", fresh(world))
    s.store.ensure_account(BOB, fresh(world))
    return world


def status(world: World, key: str) -> str:
    record = world.keys.lookup(hash_key(key))
    assert record is not None
    return record.status(world.clock())


def test_org_key_belongs_to_the_org_and_outlives_its_creator(orgs: World):
    s = orgs.service
    s.store.set_role("ngo", "dee@ngo.example", "admin", fresh(orgs))
    s.store.ensure_account("dee@ngo.example", fresh(orgs))
    kid, key = s.create_key(ANN, NGO, "reporting", ["risk_scores"], "test", None, "t1")
    row = s.get_key(ANN, NGO, kid)
    assert row["owner"] is None and row["org"] == "ngo" and row["created_by"] == ANN
    s.remove_account("staff:test", ANN)
    assert status(orgs, key) == "active"
    assert s.get_key("dee@ngo.example", NGO, kid)["created_by"] == ANN  # another admin still sees it


def test_removed_researchers_keys_stop(world: World):
    s = world.service
    signed_in(world, ADA)
    s.set_unlocked("staff:test", ADA, True)
    _, key = s.create_key(ADA, Space("me", ADA), "thesis", ["forecasts"], "test", None, "t1")
    assert status(world, key) == "active"
    s.remove_account("staff:test", ADA)
    assert status(world, key) == "owner_removed"
    with pytest.raises(DashboardError):  # a removed account cannot sign in again
        world.service.request_code(ADA)
        world.service.sign_in(ADA, "AAAA-AAAA")


def test_the_last_administrator_stays(orgs: World):
    s = orgs.service
    with pytest.raises(DashboardError, match="at least one administrator"):
        s.set_role(ANN, NGO, ANN, "member", fresh(orgs))
    with pytest.raises(DashboardError, match="last administrator"):
        s.remove_account("staff:test", ANN)
    assert s.store.role("ngo", ANN) == "admin"


def test_members_cannot_change_keys_or_members(orgs: World):
    s = orgs.service
    kid, _ = s.create_key(ANN, NGO, "k", ["risk_scores"], "test", None, "t1")
    with pytest.raises(Forbidden):
        s.create_key(BOB, NGO, "mine", ["risk_scores"], "test", None, "t2")
    with pytest.raises(Forbidden):
        s.revoke_key(BOB, NGO, kid)
    with pytest.raises(Forbidden):
        s.invite(BOB, NGO, "eve@x.example", "admin", fresh(orgs))
    assert [k["id"] for k in s.list_keys(BOB, NGO)] == [kid]  # members may look
    assert s.get_key(ANN, NGO, kid)["status"] == "active"


def test_another_organisations_key_is_not_found(orgs: World):
    s = orgs.service
    kid, key = s.create_key(CY, OTHER, "theirs", ["risk_scores"], "test", None, "t1")
    for attempt in (lambda: s.get_key(ANN, NGO, kid), lambda: s.revoke_key(ANN, NGO, kid),
                    lambda: s.roll_key(ANN, NGO, kid, "2099-01-01", "t2", fresh(orgs)),
                    lambda: s.list_keys(ANN, OTHER), lambda: s.revoke_key(ANN, OTHER, kid)):
        with pytest.raises(NotFound):
            attempt()
    # and the store's own conditional write refuses it too, even if a check above were missed
    from edge.keys import AdminError

    with pytest.raises(AdminError):
        orgs.keys.revoke(kid, org="ngo")
    with pytest.raises(AdminError):
        orgs.keys.revoke(kid, owner=ANN)
    assert status(orgs, key) == "active"


def test_a_repeated_form_makes_one_key(orgs: World):
    s = orgs.service
    kid, _ = s.create_key(ANN, NGO, "once", ["risk_scores"], "test", None, "same-token")
    with pytest.raises(AlreadySubmitted) as e:
        s.create_key(ANN, NGO, "once", ["risk_scores"], "test", None, "same-token")
    assert e.value.key_id == kid
    assert [k["name"] for k in s.list_keys(ANN, NGO)] == ["once"]


def test_live_keys_and_role_changes_need_a_fresh_code(orgs: World):
    s = orgs.service
    stale = (orgs.clock() - timedelta(minutes=11)).isoformat()
    with pytest.raises(NeedsFreshCode):
        s.create_key(ANN, NGO, "live", ["risk_scores"], "live", None, "t1", stale)
    with pytest.raises(NeedsFreshCode):
        s.set_role(ANN, NGO, BOB, "admin", stale)
    assert s.list_keys(ANN, NGO) == [] and s.store.role("ngo", BOB) == "member"
    s.create_key(ANN, NGO, "live", ["risk_scores"], "live", None, "t1", fresh(orgs))
    s.set_role(ANN, NGO, BOB, "admin", fresh(orgs))
    assert s.store.role("ngo", BOB) == "admin"


def test_researchers_need_unlocking(world: World):
    s = world.service
    signed_in(world, ADA)
    me = Space("me", ADA)
    with pytest.raises(Forbidden, match="not unlocked"):
        s.create_key(ADA, me, "k", ["risk_scores"], "test", None, "t1")
    s.request_access(ADA, "Thesis on malaria seasonality in Kano")
    assert [r["email"] for r in s.store.access_requests()] == [ADA]
    s.set_unlocked("staff:test", ADA, True)
    assert s.store.access_requests() == []
    kid, _ = s.create_key(ADA, me, "k", ["risk_scores"], "test", None, "t1")
    row = s.get_key(ADA, me, kid)
    assert row["owner"] == ADA and row["org"] is None
    s.set_unlocked("staff:test", ADA, False)
    with pytest.raises(Forbidden):
        s.create_key(ADA, me, "k2", ["risk_scores"], "test", None, "t2")


def test_roll_keeps_the_old_key_until_the_chosen_day(orgs: World):
    s = orgs.service
    kid, old = s.create_key(ANN, NGO, "feed", ["risk_scores", "forecasts"], "test", "2099-06-01", "t1")
    with pytest.raises(DashboardError, match="expires on 2099-06-01"):
        s.roll_key(ANN, NGO, kid, "2099-07-01", "t2", fresh(orgs))
    until = (orgs.clock().date() + timedelta(days=3)).isoformat()
    new_id, new = s.roll_key(ANN, NGO, kid, until, "t3", fresh(orgs))
    assert s.get_key(ANN, NGO, kid)["expires_on"] == until and status(orgs, old) == "active"
    fresh_row = s.get_key(ANN, NGO, new_id)
    assert fresh_row["scopes"] == "forecasts risk_scores" and fresh_row["expires_on"] == "2099-06-01"
    assert status(orgs, new) == "active"
    orgs.clock.t += timedelta(days=3)
    assert status(orgs, old) == "expired" and status(orgs, new) == "active"


def test_invitations_are_single_use_and_expire(orgs: World):
    s = orgs.service
    s.invite(ANN, NGO, "eve@ngo.example", "member", fresh(orgs))
    token = orgs.link_for("eve@ngo.example", "/invitations/").rsplit("/", 1)[1]
    signed_in(orgs, "eve@ngo.example")
    with pytest.raises(NotFound):  # for the address it was sent to only
        s.invitation(CY, token)
    assert s.accept_invitation("eve@ngo.example", token) == "ngo"
    with pytest.raises(NotFound):
        s.accept_invitation("eve@ngo.example", token)
    s.invite(ANN, NGO, "fay@ngo.example", "member", fresh(orgs))
    late = orgs.link_for("fay@ngo.example", "/invitations/").rsplit("/", 1)[1]
    orgs.clock.t += timedelta(days=7, seconds=1)
    with pytest.raises(NotFound):
        s.accept_invitation("fay@ngo.example", late)
    assert s.store.role("ngo", "fay@ngo.example") is None


def test_code_guessing_locks_the_code_out(world: World):
    s = world.service
    s.request_code(ADA)
    right = world.code_for(ADA)
    for _ in range(CODE_TRIES):
        with pytest.raises(DashboardError):
            s.sign_in(ADA, "2222-2222")
    with pytest.raises(DashboardError):
        s.sign_in(ADA, right)


def test_codes_are_single_use_and_expire(world: World):
    s = world.service
    s.request_code(ADA)
    code = world.code_for(ADA)
    assert s.sign_in(ADA, code.lower().replace("-", " ")) == ADA  # typed loosely, still the code
    with pytest.raises(DashboardError):
        s.sign_in(ADA, code)
    s.request_code(ADA)
    late = world.code_for(ADA)
    world.clock.t += timedelta(minutes=15, seconds=1)
    with pytest.raises(DashboardError):
        s.sign_in(ADA, late)


def test_a_used_up_budget_says_which_and_until_when(world: World):
    s = world.service
    sent = len(world.mail.messages())
    for _ in range(CODES_PER_BROWSER):
        s.request_code(ADA, browser="b1", client="10.0.0.1")
    with pytest.raises(Limited) as e:
        s.request_code(ADA, browser="b1", client="10.0.0.1")
    assert e.value.which == "browser"
    hour = int(world.clock().timestamp()) // 3600
    assert e.value.until.timestamp() == (hour + 1) * 3600
    assert len(world.mail.messages()) - sent == CODES_PER_BROWSER  # the refused one sent nothing
    world.clock.t = e.value.until
    s.request_code(ADA, browser="b1", client="10.0.0.1")  # the next hour: a new budget
    assert len(world.mail.messages()) - sent == CODES_PER_BROWSER + 1


def test_one_audit_row_per_change_and_none_for_no_change(orgs: World):
    s = orgs.service
    signed_in(orgs, ANN)
    kid, _ = s.create_key(ANN, NGO, "k", ["risk_scores"], "test", None, "t1")
    s.revoke_key(ANN, NGO, kid)
    s.revoke_key(ANN, NGO, kid)  # already revoked: no change, no row
    s.invite(ANN, NGO, "eve@ngo.example", "member", fresh(orgs))
    s.set_role(ANN, NGO, BOB, "admin", fresh(orgs))
    s.set_role(ANN, NGO, BOB, "admin", fresh(orgs))  # no change
    s.set_role(ANN, NGO, BOB, None, fresh(orgs))
    rows = s.store.audit(org="ngo")[:5] + s.store.audit(account=ANN)[:1]
    assert Counter(r["action"] for r in rows) == Counter(
        {"sign_in": 1, "key_created": 1, "key_revoked": 1, "member_invited": 1, "role_changed": 1,
         "member_removed": 1})
    assert all(r["org"] == "ngo" for r in rows if r["action"] != "sign_in")
    assert [r["action"] for r in s.audit(ANN, NGO)][0] == "member_removed"


def test_the_audit_log_cannot_be_rewritten(orgs: World):
    if not hasattr(orgs.store, "path"):
        pytest.skip("DynamoDB: the dashboard's role may only PutItem and Query the audit table (tests/dashboard/test_deploy.py checks the role)")
    conn = sqlite3.connect(orgs.store.path)
    for statement in ("UPDATE audit SET action = 'nothing'", "DELETE FROM audit"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(statement)
    assert len(orgs.service.store.audit()) == 2  # the two organisations' creation


def test_the_local_organisation_is_made_once(world: World):
    s = world.service
    assert s.ensure_local_org("admin@example.org") is True
    assert s.ensure_local_org("admin@example.org") is False  # a restart changes nothing
    assert s.store.role("local", "admin@example.org") == "admin"
    assert [r["action"] for r in s.store.audit(org="local")] == ["org_created"]
    assert s.ensure_local_org("other@example.org") is True  # `make run DASH_ADMIN=…` adds that administrator
    assert {m["email"] for m in s.store.members("local")} == {"admin@example.org", "other@example.org"}


def test_known_addresses_and_invitation_links_have_their_own_budgets_on_both_stores(orgs: World):
    """Issue 34 on SQLite and DynamoDB alike: a pending invitee is a known address; the invitation's token
    authorises its own codes; a demotion ends the sender's invitations for good (re-promotion or not)."""
    from dashboard.service import CODES_PER_INVITATION

    s = orgs.service
    s.store.set_role("ngo", BOB, "admin", fresh(orgs))
    for i in range(CODES_PER_BROWSER):  # the unknown address's budget, used up by a stranger
        s.request_code("eve@ngo.example", browser=f"x{i}", client="198.51.100.66")
    with pytest.raises(Limited):
        s.request_code("eve@ngo.example", browser="x9", client="198.51.100.67")
    s.invite(ANN, NGO, "eve@ngo.example", "member", fresh(orgs))  # arrives all the same
    token = orgs.link_for("eve@ngo.example", "/invitations/").rsplit("/", 1)[1]
    assert [i["email"] for i in s.store.invitations_to("eve@ngo.example", fresh(orgs))] == ["eve@ngo.example"]
    s.request_code("eve@ngo.example", browser="e1", client="203.0.113.5")  # now a known address: her own share
    for i in range(CODES_PER_INVITATION):
        s.request_code("eve@ngo.example", browser=f"l{i}", client=f"203.0.113.{10 + i}", invitation=token)
    with pytest.raises(Limited) as e:
        s.request_code("eve@ngo.example", browser="l9", client="203.0.113.99", invitation=token)
    assert e.value.which == "invitation"
    s.set_role(BOB, NGO, ANN, "member", fresh(orgs))
    s.set_role(BOB, NGO, ANN, "admin", fresh(orgs))
    assert s.store.invitations_to("eve@ngo.example", fresh(orgs)) == []
    with pytest.raises(NotFound, match="no longer valid"):
        s.accept_invitation("eve@ngo.example", token)


def test_the_signing_secret_rotates_keeping_the_previous_one_on_both_stores(world: World):
    store = world.store
    first, none = store.signing_secrets()
    assert none is None and first == store.signing_secret()
    store.rotate_signing_secret()
    second, previous = store.signing_secrets()
    assert previous == first and second != first
    store.rotate_signing_secret()
    assert store.signing_secrets()[1] == second  # the oldest is forgotten
    assert store.secret("log_key") == store.secret("log_key") != second  # a separate, stable key for log hashes
