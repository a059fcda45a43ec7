"""The dashboard's production rate rules and mail-budget alarm (deploy/waf.py, deploy/monitoring.py,
deploy/dashboard.py) against moto's server on 127.0.0.1: a dry run lists every change and makes none,
a run makes them, a second run and a dry run after it change nothing. What moto cannot show: WAF
counting requests and blocking (the rules are stored, never evaluated; the scope-down statement is
checked below against the dashboard's own routes instead), CloudFront enforcing the web ACL, metric
filters turning log lines into metrics, alarms firing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dashboard.app import create_app
from dashboard.settings import DashboardSettings
from deploy import dashboard as deploy
from deploy import monitoring, waf
from tests.edge.conftest import boto_client
from tests.edge.conftest import endpoint as endpoint  # noqa: F401  (moto's server)

from .conftest import World


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_the_web_acl_dry_run_then_twice_and_drift_is_put_back(endpoint: str,  # noqa: F811
                                                                 capsys: pytest.CaptureFixture[str]):
    wafv2 = boto_client(endpoint, "wafv2")

    planned = deploy.step_web_acl(wafv2, "dash-acl", dry=True)
    assert planned is None and lines(capsys) == ["would: web ACL dash-acl-rate-rules: created"]
    assert wafv2.list_web_acls(Scope="CLOUDFRONT")["WebACLs"] == []
    arn = deploy.step_web_acl(wafv2, "dash-acl")
    assert lines(capsys) == ["web ACL dash-acl-rate-rules: created"] and arn and ":global/webacl/" in arn
    assert deploy.step_web_acl(wafv2, "dash-acl") == arn and lines(capsys) == []
    assert deploy.step_web_acl(wafv2, "dash-acl", dry=True) == arn and lines(capsys) == []

    summary = wafv2.list_web_acls(Scope="CLOUDFRONT")["WebACLs"][0]
    acl = wafv2.get_web_acl(Name=summary["Name"], Scope="CLOUDFRONT", Id=summary["Id"])
    rules = {r["Name"]: r for r in acl["WebACL"]["Rules"]}
    rate = {name: r["Statement"]["RateBasedStatement"] for name, r in rules.items()}
    assert {n: (s["Limit"], s["AggregateKeyType"], s["EvaluationWindowSec"]) for n, s in rate.items()} == {
        "mail-posts-per-client": (waf.MAIL_POSTS_PER_CLIENT, "IP", 300),
        "mail-posts-all-clients": (waf.MAIL_POSTS_ALL_CLIENTS, "CONSTANT", 300),
        "requests-per-client": (waf.REQUESTS_PER_CLIENT, "IP", 300)}
    assert min(s["Limit"] for s in rate.values()) >= 10  # WAF refuses a lower limit
    assert all(r["Action"]["Block"]["CustomResponse"]["ResponseCode"] == 429 for n, r in rules.items()
               if n != "mail-posts-all-clients")
    assert rules["mail-posts-all-clients"]["Action"] == {"Count": {}}  # a flood counts; it cannot refuse everyone
    assert acl["WebACL"]["DefaultAction"] == {"Allow": {}}
    assert "try again in five minutes" in acl["WebACL"]["CustomResponseBodies"]["rate-limited"]["Content"]

    # someone raises a limit by hand in the console: the next run says so and puts it back
    loose = json.loads(json.dumps(acl["WebACL"]["Rules"], default=lambda b: b.decode()))
    loose[0]["Statement"]["RateBasedStatement"]["Limit"] = 10_000
    wafv2.update_web_acl(Name=summary["Name"], Scope="CLOUDFRONT", Id=summary["Id"], LockToken=acl["LockToken"],
                         DefaultAction={"Allow": {}}, Rules=_blobs(loose),
                         VisibilityConfig=acl["WebACL"]["VisibilityConfig"])
    assert deploy.step_web_acl(wafv2, "dash-acl", dry=True) == arn
    assert lines(capsys) == ["would: web ACL dash-acl-rate-rules: rules updated"]
    deploy.step_web_acl(wafv2, "dash-acl")
    assert lines(capsys) == ["web ACL dash-acl-rate-rules: rules updated"]
    again = wafv2.get_web_acl(Name=summary["Name"], Scope="CLOUDFRONT", Id=summary["Id"])["WebACL"]
    assert again["Rules"][0]["Statement"]["RateBasedStatement"]["Limit"] == waf.MAIL_POSTS_PER_CLIENT
    deploy.step_web_acl(wafv2, "dash-acl")
    assert lines(capsys) == []


def _blobs(rules: Any) -> Any:
    """Rules read back as JSON text, with each match's SearchString bytes again (as the API takes it)."""
    if isinstance(rules, dict):
        return {k: v.encode() if k == "SearchString" else _blobs(v) for k, v in rules.items()}
    if isinstance(rules, list):
        return [_blobs(v) for v in rules]
    return rules


def test_the_distribution_is_put_behind_the_web_acl(endpoint: str,  # noqa: F811
                                                    capsys: pytest.CaptureFixture[str]):
    wafv2, cf = boto_client(endpoint, "wafv2"), boto_client(endpoint, "cloudfront")
    url, secret = "https://abc.lambda-url.eu-west-1.on.aws/", "s" * 43
    dist_id, _ = deploy.step_distribution(cf, "dash-old", url, secret)  # as deployed before the rules existed
    assert cf.get_distribution_config(Id=dist_id)["DistributionConfig"]["WebACLId"] == ""
    lines(capsys)
    arn = deploy.step_web_acl(wafv2, "dash-old")
    assert deploy.step_distribution(cf, "dash-old", url, secret, arn)[0] == dist_id
    assert lines(capsys) == ["web ACL dash-old-rate-rules: created", f"distribution {dist_id}: updated"]
    config = cf.get_distribution_config(Id=dist_id)["DistributionConfig"]
    assert config["WebACLId"] == arn
    assert config["Origins"]["Items"][0]["CustomHeaders"]["Items"][0]["HeaderValue"] == secret  # origin kept
    assert deploy.step_distribution(cf, "dash-old", url, secret, arn)[0] == dist_id and lines(capsys) == []


def _matches(statement: dict[str, Any], method: str, path: str) -> bool:
    """The scope-down statement's meaning for one request: WAF's byte matches, And and Or, on the
    method and the URL-decoded path (the only fields and transformations the rules use)."""
    if "AndStatement" in statement:
        return all(_matches(s, method, path) for s in statement["AndStatement"]["Statements"])
    if "OrStatement" in statement:
        return any(_matches(s, method, path) for s in statement["OrStatement"]["Statements"])
    m = statement["ByteMatchStatement"]
    field = {"Method": method, "UriPath": path}[next(iter(m["FieldToMatch"]))]
    want = m["SearchString"].decode()
    return {"EXACTLY": field == want, "STARTS_WITH": field.startswith(want), "ENDS_WITH": field.endswith(want),
            "CONTAINS": want in field}[m["PositionalConstraint"]]


def _routes(routes: list[Any], prefix: str) -> list[tuple[str, set[str]]]:
    """(path, methods) of every route, mounted ones with their prefix."""
    out: list[tuple[str, set[str]]] = []
    for route in routes:
        if getattr(route, "routes", None):
            out += _routes(route.routes, prefix + route.path)
        else:
            out.append((prefix + route.path, set(getattr(route, "methods", None) or ())))
    return out


def test_the_mail_rules_cover_every_post_that_sends_mail_or_checks_a_code(world: World):
    """Every POST route of the dashboard, with its path parameters filled in: the rate rules' scope
    covers exactly those that send a mail (a code, an invitation, an access request) or check a code."""
    app: Any = create_app(world.service, DashboardSettings())
    while not hasattr(app, "routes"):  # under the middleware
        app = app.app
    posts = {re.sub(r"\{[^}]+\}", "x1", path) for path, methods in _routes(app.routes, "") if "POST" in methods}
    mail_or_code = {p for p in posts if p.startswith(("/sign-in", "/me/request-access"))
                    or p.endswith("/members/invite")}
    assert {"/sign-in", "/sign-in/code", "/me/request-access", "/o/x1/members/invite"} <= mail_or_code
    assert any("/keys/" in p for p in posts - mail_or_code)  # key work is not held to the mail limit
    scope = waf.mail_posts()
    assert {p for p in posts if _matches(scope, "POST", p)} == mail_or_code
    assert not any(_matches(scope, "GET", p) for p in posts)
    assert _matches(scope, "POST", "/o/x1/members/invite") and not _matches(scope, "POST", "/o/x1/members/role")


def test_the_mail_budget_alarm_dry_run_then_twice(endpoint: str,  # noqa: F811
                                                  capsys: pytest.CaptureFixture[str]):
    logs, cw, sns = (boto_client(endpoint, s) for s in ("logs", "cloudwatch", "sns"))
    edge_topic = monitoring.step_topic(sns, "edge-m", None)  # the API deploy's topic, already there
    lines(capsys)

    def run(dry: bool = False) -> list[str]:
        topic = monitoring.step_topic(sns, "edge-m", None, dry)
        monitoring.step_dashboard_logs(logs, "dash-m", 30, dry)
        monitoring.step_alarms(cw, monitoring.dashboard_alarms("dash-m", topic), dry)
        return lines(capsys)

    planned = run(dry=True)
    assert planned and all(line.startswith("would: ") for line in planned) and len(planned) == 4
    assert cw.describe_alarms(AlarmNamePrefix="dash-m")["MetricAlarms"] == []
    assert len(run()) == 4
    assert run() == [] and run(dry=True) == []

    (group,) = logs.describe_log_groups(logGroupNamePrefix="/aws/lambda/dash-m")["logGroups"]
    assert (group["logGroupName"], group["retentionInDays"]) == ("/aws/lambda/dash-m", 30)
    (f,) = logs.describe_metric_filters(logGroupName="/aws/lambda/dash-m")["metricFilters"]
    (alarm,) = cw.describe_alarms(AlarmNamePrefix="dash-m")["MetricAlarms"]
    assert alarm["AlarmActions"] == [edge_topic] and [t["TopicArn"] for t in sns.list_topics()["Topics"]].count(
        edge_topic) == 1  # no topic of its own: the one operators already read
    assert (alarm["MetricName"], alarm["Namespace"]) == (f["metricTransformations"][0]["metricName"],
                                                          f["metricTransformations"][0]["metricNamespace"])
    assert alarm["Threshold"] == 1.0 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_the_all_clients_rule_has_an_alarm_on_its_own_metric():
    """The alarm reads the metric WAF writes for the rule: the web ACL's and the rule's metric names."""
    (alarm,) = waf.waf_alarms("d", "arn:aws:sns:us-east-1:1:t")
    config = waf.web_acl_config("d")
    dims = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
    rule = next(r for r in config["Rules"] if r["Name"] == dims["Rule"])
    assert rule["Statement"]["RateBasedStatement"]["AggregateKeyType"] == "CONSTANT"
    assert rule["VisibilityConfig"]["MetricName"] == dims["Rule"]
    assert config["VisibilityConfig"]["MetricName"] == dims["WebACL"] and alarm["AlarmActions"]


def test_the_mail_budget_filter_matches_the_dashboards_log_line():
    """The filter's JSON pattern against the line the shared formatter writes (edge/accesslog.py)."""
    from edge.accesslog import event_line

    (f,) = monitoring.dashboard_metric_filters("d")
    m = re.fullmatch(r'\{ \$\.(\w+) = "([^"]+)" \}', f["filterPattern"])
    assert m is not None
    line = json.loads(event_line("dashboard.mail_budget_exhausted", budget="global"))
    assert line[m.group(1)] == m.group(2) == "dashboard.mail_budget_exhausted"
    other = json.loads(event_line("dashboard.code_sent"))
    assert other[m.group(1)] != m.group(2)


def test_the_command_line_dry_run_lists_the_rules_and_the_alarms_then_nothing(endpoint: str,  # noqa: F811
                                                                               monkeypatch: pytest.MonkeyPatch,
                                                                               capsys: pytest.CaptureFixture[str]):
    from tests.edge.conftest import CREDS

    for k, v in {**CREDS, "AWS_ENDPOINT_URL": endpoint}.items():  # every boto3 client of main() goes to moto
        monkeypatch.setenv(k, v)
    args = ["--name", "dash-cli", "--edge-name", "edge-cli", "--region", "eu-west-1"]
    with pytest.raises(SystemExit) as e:
        deploy.main(["tables", "--dry-run", *args])
    assert e.value.code == 2 and "--dry-run covers" in capsys.readouterr().err
    deploy.main(["all", "--dry-run", "--table-prefix", "cli-", *args])
    planned = lines(capsys)
    assert planned and all(line.startswith("would: ") for line in planned)
    assert any("web ACL dash-cli-rate-rules" in line for line in planned)
    assert any("alarm dash-cli-mail-budget-exhausted" in line for line in planned)
    assert any("alarm dash-cli-waf-mail-posts-all-clients" in line for line in planned)
    acls = boto_client(endpoint, "wafv2").list_web_acls(Scope="CLOUDFRONT")["WebACLs"]
    assert "dash-cli-rate-rules" not in [a["Name"] for a in acls]  # the dry run made nothing
    deploy.main(["waf", *args])
    deploy.main(["monitoring", *args])
    made = lines(capsys)
    assert len(made) == len(planned) and not any(line.startswith("would: ") for line in made)
    deploy.main(["all", "--dry-run", "--table-prefix", "cli-", *args])
    assert lines(capsys) == []
