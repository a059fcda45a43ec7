"""deploy/dashboard.py against moto's server (every step twice, the second changing nothing),
and the Lambda adapter (dashboard/lambda_handler.py) on function-URL events."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from dashboard.app import create_app
from dashboard.lambda_handler import handle
from dashboard.settings import DashboardSettings
from deploy import dashboard as deploy
from tests.edge.conftest import boto_client
from tests.edge.conftest import endpoint as endpoint  # noqa: F401  (moto's server)

from .conftest import World


def test_every_step_twice_changes_nothing_the_second_time(endpoint: str, tmp_path: Path,  # noqa: F811
                                                          capsys: pytest.CaptureFixture[str]):
    iam, ddb, lam, cf = (boto_client(endpoint, s) for s in ("iam", "dynamodb", "lambda", "cloudfront"))
    package = deploy.build_package(tmp_path / "dashboard.zip")
    with zipfile.ZipFile(package) as z:
        names = set(z.namelist())
    assert {"dashboard/lambda_handler.py", "dashboard/templates/keys.html", "edge/keys.py", "edge/errors.py",
            "starlette/applications.py", "jinja2/environment.py"} <= names
    assert not any(n.startswith(("edge/local/", "pipeline/")) for n in names)  # the bundle needs nothing of pipeline/
    assert "dashboard/serve.py" not in names  # uvicorn's front, local only
    assert deploy.build_package(tmp_path / "again.zip").read_bytes() == package.read_bytes()  # reproducible

    env = {"DASHBOARD_KEY_STORE": "dynamodb:dd-", "DASHBOARD_MAILER": "ses:keys@example.org",
           "DASHBOARD_BASE_URL": "https://account.example.org", "DASHBOARD_API_URL": "https://api.example.org"}

    def run() -> tuple[list[str], str, tuple[str, str], str]:
        tables = deploy.step_tables(ddb, "dd-")
        role = deploy.step_role(iam, "dash", deploy.role_policy("dash", "dd-", "eu-west-1", "keys@example.org"))
        url, secret = deploy.step_function(lam, "dash", role, package, env)
        return tables, url, deploy.step_distribution(cf, "dash", url, secret), secret

    first = run()
    first_log = capsys.readouterr().out
    assert "created" in first_log
    second = run()
    second_log = capsys.readouterr().out
    assert second == first  # same tables, URL, distribution and secret
    assert "created" not in second_log and "updated" not in second_log and "on" not in second_log.split()

    tables, url, (dist_id, _), secret = first
    assert tables == ["dd-keys", "dd-dashboard", "dd-audit"]
    for table in tables:
        assert ddb.describe_table(TableName=table)["Table"]["DeletionProtectionEnabled"] is True
        pitr = ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
        assert pitr["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    fn = lam.get_function(FunctionName="dash")["Configuration"]
    assert fn["Handler"] == "dashboard.lambda_handler.handler"
    assert fn["Environment"]["Variables"] == {**env, "DASHBOARD_ORIGIN_SECRET": secret} and len(secret) >= 40
    origin = cf.get_distribution_config(Id=dist_id)["DistributionConfig"]["Origins"]["Items"][0]
    assert origin["DomainName"] == url.split("://")[1].strip("/")
    assert origin["CustomHeaders"]["Items"] == [{"HeaderName": "X-Origin-Verify", "HeaderValue": secret}]
    behaviour = cf.get_distribution_config(Id=dist_id)["DistributionConfig"]["DefaultCacheBehavior"]
    assert behaviour["CachePolicyId"] == deploy.CACHING_DISABLED and "POST" in behaviour["AllowedMethods"]["Items"]
    policy = iam.get_role_policy(RoleName="dash-role", PolicyName="dashboard")["PolicyDocument"]
    policy = json.loads(policy) if isinstance(policy, str) else policy
    audit = next(s for s in policy["Statement"] if s["Sid"] == "AuditAppendOnly")
    assert audit["Action"] == ["dynamodb:PutItem", "dynamodb:Query"] and audit["Resource"].endswith("table/dd-audit")
    assert not any("dd-audit" in json.dumps(s["Resource"]) and ("DeleteItem" in s["Action"] or "UpdateItem" in s["Action"])
                   for s in policy["Statement"])


def event(method: str, path: str, body: str = "", cookies: list[str] | None = None, **headers: str) -> dict:
    path, _, query = path.partition("?")
    return {"version": "2.0", "rawPath": path, "rawQueryString": query, "cookies": cookies or [],
            "headers": {"host": "abc.lambda-url.eu-west-1.on.aws", **headers}, "body": body, "isBase64Encoded": False,
            "requestContext": {"http": {"method": method, "path": path, "sourceIp": "192.0.2.1"}}}


def test_the_lambda_adapter_signs_in_through_function_url_events(world: World):
    app = create_app(world.service, DashboardSettings(origin_secret="s3cret", base_url="https://account.example.org"))
    assert handle(app, event("GET", "/sign-in"))["statusCode"] == 403  # straight to the function URL
    via_cf = {"x-origin-verify": "s3cret"}
    page = handle(app, event("GET", "/sign-in", **via_cf))
    assert page["statusCode"] == 200 and page["headers"]["content-security-policy"].startswith("default-src 'none'")
    cookie = page["cookies"][0].split(";")[0]
    csrf = re.search(r'name="csrf" value="([^"]+)"', page["body"]).group(1)
    form = {"content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin", **via_cf}
    world.service.create_org("staff:test", "ngo", "NGO", "ann@ngo.example")
    sent = handle(app, event("POST", "/sign-in", f"email=ann%40ngo.example&csrf={csrf}", [cookie], **form))
    assert sent["statusCode"] == 200
    code = world.code_for("ann@ngo.example")
    done = handle(app, event("POST", "/sign-in/code", f"email=ann%40ngo.example&code={code}&csrf={csrf}", [cookie],
                             **form))
    assert done["statusCode"] == 303 and done["cookies"][0].startswith("__Host-session=")
    signed = done["cookies"][0].split(";")[0]
    assert signed != cookie
    keys = handle(app, event("GET", "/o/ngo/keys", cookies=[signed], **via_cf))
    assert keys["statusCode"] == 200 and "API access" in keys["body"]
