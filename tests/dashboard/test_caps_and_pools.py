"""Nobody multiplies their limits and nobody jams a pool someone else needs (real SQLite stores).

- An organisation and a researcher hold a bounded number of active keys (each key has its own
  per-minute and monthly limits, so the cap is what bounds them in all), one person creates a
  bounded number of keys an hour, staff can go past a cap, and each refusal leaves an alarm line.
- Invitations spend a pool no stranger can spend; a first sign-in does not make an address
  "known"; the operator sees and resets the pools with `malaria-risk dashboard budgets`.
"""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

import dashboard.service as rules
from dashboard.service import Dashboard, DashboardError, Limited, Space

from .conftest import World
from .test_abuse import orgs as orgs  # noqa: F401  (Ann administers ngo, Bob is a member)

# the sizes first written here, where older code has none, so the tests fail on what they check
KEYS_PER_ORG = getattr(rules, "KEYS_PER_ORG", 10)
KEYS_PER_RESEARCHER = getattr(rules, "KEYS_PER_RESEARCHER", 3)
KEYS_PER_ADMIN_HOUR = getattr(rules, "KEYS_PER_ADMIN_HOUR", 10)
KNOWN_AFTER_DAYS = getattr(rules, "KNOWN_AFTER_DAYS", 14)

ANN, BOB, ADA = "ann@ngo.example", "bob@ngo.example", "ada@uni.example"
NGO = Space("org", "ngo")


def alarm_lines(capfd: pytest.CaptureFixture[str], event: str) -> list[dict[str, object]]:
    lines = [json.loads(x) for x in capfd.readouterr().err.splitlines() if x.startswith("{")]
    return [e for e in lines if e["event"] == event]


def try_keys(s: Dashboard, email: str, space: Space, n: int, prefix: str = "k") -> list[str]:
    made = []
    for i in range(n):
        with contextlib.suppress(DashboardError):
            made.append(s.create_key(email, space, f"{prefix}{i}", ["risk_scores"], "test", None, f"{prefix}-form-{i}")[0])
    return made


# -- keys per holder and per hour ------------------------------------------------------------------------------
def test_an_organisation_holds_at_most_its_cap_of_active_keys_and_the_operator_is_told(orgs: World, capfd):
    """The reported attack: an administrator made 40 test keys in 1.2 s (40 × the per-minute limit)."""
    made = try_keys(orgs.service, ANN, NGO, 40)
    assert len(made) == KEYS_PER_ORG
    active = [r for r in orgs.keys.list_for(org="ngo") if r["status"] == "active"]
    assert len(active) == KEYS_PER_ORG
    alarms = alarm_lines(capfd, "dashboard.key_cap_reached")
    assert alarms and alarms[0]["holder"] == "ngo" and alarms[0]["cap"] == KEYS_PER_ORG
    orgs.service.revoke_key(ANN, NGO, made[0])  # a revoked key frees its place
    orgs.clock.t += timedelta(hours=1)
    assert len(try_keys(orgs.service, ANN, NGO, 3, "again")) == 1


def test_a_researcher_holds_at_most_their_cap(orgs: World):
    s = orgs.service
    s.store.ensure_account(ADA, orgs.clock().isoformat())
    s.set_unlocked("staff:test", ADA, True)
    assert len(try_keys(s, ADA, Space("me", ADA), 10)) == KEYS_PER_RESEARCHER


def test_one_person_creates_a_bounded_number_of_keys_an_hour(orgs: World, capfd):
    """Create, revoke, create again: the cap of active keys alone would never stop this loop."""
    s = orgs.service
    created = 0
    for i in range(3 * KEYS_PER_ADMIN_HOUR):
        try:
            kid, _ = s.create_key(ANN, NGO, f"churn{i}", ["risk_scores"], "test", None, f"churn-{i}")
        except Limited as e:
            assert e.which == "keys"
            break
        created += 1
        s.revoke_key(ANN, NGO, kid)
    assert created == KEYS_PER_ADMIN_HOUR
    assert alarm_lines(capfd, "dashboard.key_creation_limited")
    orgs.clock.t += timedelta(hours=1)
    assert len(try_keys(s, ANN, NGO, 1, "next-hour")) == 1


def test_staff_can_go_past_a_cap_and_it_is_logged(orgs: World, capfd):
    s = orgs.service
    for i in range(KEYS_PER_ORG):
        s.staff_create_key("staff:ops", f"s{i}", ["risk_scores"], "test", None, None, "ngo", None, None)
    with pytest.raises(DashboardError, match="active keys"):
        s.staff_create_key("staff:ops", "one more", ["risk_scores"], "test", None, None, "ngo", None, None)
    kid, _ = s.staff_create_key("staff:ops", "one more", ["risk_scores"], "test", None, None, "ngo", None, None,
                                over_cap=True)
    assert orgs.keys.get(kid)["status"] == "active"  # type: ignore[index]
    assert [a["overridden"] for a in alarm_lines(capfd, "dashboard.key_cap_reached")] == [False, True]


# -- pools ------------------------------------------------------------------------------------------------------------
def small_pool_service(world: World, per_hour: int = 25) -> Dashboard:
    return Dashboard(world.keys, world.store, world.mail, "http://dashboard.test", clock=world.clock,
                     mail_per_hour=per_hour)


def catch_all_flood(s: Dashboard, world: World, addresses: int, per_hour: int) -> None:
    """Sign in once as each of a catch-all domain's addresses, then ask codes for them from many networks."""
    for i in range(addresses):
        email = f"x{i}@catch-all.example"
        s.request_code(email, browser=f"attacker-{i}", client=f"198.51.100.{i}")
        s.sign_in(email, world.code_for(email), browser=f"attacker-{i}", client=f"198.51.100.{i}")
    for n in range(2 * per_hour):
        with contextlib.suppress(Limited):
            s.request_code(f"x{n % addresses}@catch-all.example", browser=f"fresh-{n}", client=f"203.0.{n}.9")


def test_a_catch_all_domain_signed_in_once_cannot_block_invitations_or_members(orgs: World):
    """The reported attack: 15 addresses signed in once, then the known pool spent from 15 networks."""
    s = small_pool_service(orgs)
    catch_all_flood(s, orgs, 15, 25)
    sent = len(orgs.mail.messages())
    s.invite(ANN, NGO, "hire@example.org", "member", orgs.clock().isoformat())  # delivered
    s.request_code(BOB, browser="bobs-new-laptop", client="192.0.2.20")  # a member's new browser: delivered
    assert len(orgs.mail.messages()) == sent + 2


def test_accounts_aged_on_purpose_cannot_block_invitations_or_members_either(orgs: World):
    s = small_pool_service(orgs)
    for i in range(15):
        s.store.ensure_account(f"x{i}@catch-all.example", (orgs.clock() - timedelta(days=KNOWN_AFTER_DAYS + 1)).isoformat())
    catch_all_flood(s, orgs, 15, 25)
    sent = len(orgs.mail.messages())
    s.invite(ANN, NGO, "hire@example.org", "member", orgs.clock().isoformat())
    s.request_code(BOB, browser="bobs-new-laptop", client="192.0.2.20")
    assert len(orgs.mail.messages()) == sent + 2


def test_the_operator_sees_and_resets_a_pool(orgs: World, tmp_path):
    from pipeline.cli import main

    s = small_pool_service(orgs, per_hour=300)
    for n in range(30):
        s.request_code(f"n{n}@example.org", browser=f"b{n}", client=f"203.0.{n}.9")
    args = ["dashboard", "budgets", "--keys", str(orgs.keys_path)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    lines = dict(line.split("\t")[:2] for line in r.stdout.splitlines())
    assert lines["unknown"] == "30/300" and lines["member"] == "0/300" and lines["invitations"] == "0/300"
    r = CliRunner().invoke(main, [*args, "--reset", "unknown"])
    assert r.exit_code == 0 and "unknown\t0/300" in r.stdout
    assert [a["action"] for a in orgs.store.audit()][0] == "mail_budget_reset"
