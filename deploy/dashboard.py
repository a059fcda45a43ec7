"""Scripted boto3 procedure for the key dashboard: tables, role, package, function URL, WAF rate
rules, distribution, log group and alarm.

The dashboard runs as one Lambda function (dashboard/lambda_handler.py) whose function URL
is reached only through its own CloudFront distribution: CloudFront adds a secret header
(`X-Origin-Verify`) that the app checks on every request, so a request sent to the function
URL directly gets 403. (CloudFront's origin access control for Lambda URLs would need the
browser to send a hash of every POST body, which an HTML form cannot.) Caching is off;
every page is `no-store`.

Like deploy/aws.py, every step describes what exists first and changes only what differs:
running it twice changes nothing. The origin secret is made once and then read back from
the function's configuration, so a re-run keeps CloudFront and the function in step.

    python deploy/dashboard.py tables  --table-prefix mr- --region eu-west-1
    python deploy/dashboard.py package --out build-dashboard/dashboard.zip
    python deploy/dashboard.py all --name malaria-risk-dashboard --table-prefix mr- --region eu-west-1 \\
        --sender keys@example.org --base-url https://account.example.org --api-url https://api.example.org \\
        --package build-dashboard/dashboard.zip
    python deploy/dashboard.py waf --region eu-west-1 [--dry-run]       # rate rules (deploy/waf.py)
    python deploy/dashboard.py monitoring --region eu-west-1 --edge-name malaria-risk-edge [--dry-run]

The distribution sits behind a WAF web ACL of rate-based rules (deploy/waf.py) that caps how
often a client may ask for mail or check codes, and counts (never blocks) all clients together. The function's log
group gets a retention and a metric filter for the mail budget's event, with an alarm to the
API's alarm topic; a second alarm, in us-east-1, says when the all-clients rule counts a flood (docs/monitoring.md).

The tables get point-in-time recovery and deletion protection (the keys table too: losing
it would stop every key). See docs/dashboard.md for SES (production access, DKIM, SPF, DMARC).
"""

from __future__ import annotations

import argparse
import importlib.util
import secrets
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy import cloudfront, functions, monitoring  # noqa: E402
from deploy.common import log  # noqa: E402
from deploy.waf import WAF_REGION, step_web_acl, waf_alarms  # noqa: E402

RUNTIME = "python3.12"
HANDLER = "dashboard.lambda_handler.handler"
MEMORY_MB = 512
TIMEOUT_S = 15
# Managed policies: no caching, and every viewer header, cookie and query string but Host
# (the function URL needs its own Host) forwarded to the origin.
CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
ALL_VIEWER_EXCEPT_HOST = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
ORIGIN_HEADER = "X-Origin-Verify"
# The client address the app counts budgets by: a header CloudFront adds from the viewer's own
# connection (`IP:port`), in the all-viewer policy above; the app reads nothing else (docs/deploy.md).
CLIENT_ADDRESS_HEADER = "CloudFront-Viewer-Address"
TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "lambda.amazonaws.com"}}]}
# pure-Python libraries the function needs beyond the runtime's boto3 (and, where the installed
# versions still use them, their helpers)
LIBRARIES = ("starlette", "jinja2", "markupsafe", "anyio", "idna")
IF_INSTALLED = ("sniffio", "typing_extensions", "exceptiongroup")
LOCAL_ONLY = ("dashboard/serve.py",)  # uvicorn's front for `malaria-risk dashboard`: the function never runs it


# --- tables -------------------------------------------------------------------------------------


def protect(ddb: Any, table: str) -> None:
    """Point-in-time recovery and deletion protection on one table (described first, changed only if off)."""
    if not ddb.describe_table(TableName=table)["Table"].get("DeletionProtectionEnabled"):
        ddb.update_table(TableName=table, DeletionProtectionEnabled=True)
        log(f"{table}: deletion protection on")
    backups = ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
    if backups.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus") != "ENABLED":
        ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
        log(f"{table}: point-in-time recovery on")


def step_tables(ddb: Any, table_prefix: str) -> list[str]:
    from dashboard.dynamodb import DynamoDBDashboardStore
    from edge.stores.dynamodb import DynamoDBKeyStore

    keys = DynamoDBKeyStore(ddb, table_prefix)
    keys.create_tables()  # adds the holder indexes to an existing keys table
    state = DynamoDBDashboardStore(ddb, table_prefix)
    state.create_tables()
    tables = [keys.keys_table, state.table, state.audit_table]
    for table in tables:
        protect(ddb, table)
    log(f"tables ready: {', '.join(tables)}")
    return tables


# --- role -----------------------------------------------------------------------------------------


def role_policy(name: str, table_prefix: str, region: str, sender: str) -> dict[str, Any]:
    """What the dashboard may do. The audit table: PutItem and Query only, so no code can rewrite it."""
    table = f"arn:aws:dynamodb:{region}:*:table/{table_prefix}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Keys", "Effect": "Allow",
         "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
         "Resource": [f"{table}keys", f"{table}keys/index/*"]},
        {"Sid": "State", "Effect": "Allow",
         "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                    "dynamodb:Query", "dynamodb:ConditionCheckItem"],
         "Resource": f"{table}dashboard"},
        {"Sid": "AuditAppendOnly", "Effect": "Allow", "Action": ["dynamodb:PutItem", "dynamodb:Query"],
         "Resource": f"{table}audit"},
        {"Sid": "Mail", "Effect": "Allow", "Action": "ses:SendEmail", "Resource": "*",
         "Condition": {"StringEquals": {"ses:FromAddress": sender}}},
        {"Sid": "Logs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": f"arn:aws:logs:*:*:log-group:/aws/lambda/{name}*"},
    ]}


def step_role(iam: Any, name: str, policy: dict[str, Any]) -> str:
    return functions.step_role(iam, name, TRUST, "dashboard", policy, "malaria-risk key dashboard")


# --- package --------------------------------------------------------------------------------------------


def build_package(out: Path) -> Path:
    """A zip of the dashboard, the edge modules it uses (its shared exceptions among them, `edge/errors.py`:
    nothing of `pipeline/`) and the pure-Python libraries, with fixed timestamps so the same sources give the same bytes (and no new version)."""
    files: dict[str, bytes] = {}
    for folder in ("dashboard", "edge"):
        for f in sorted((ROOT / folder).rglob("*")):
            rel = f.relative_to(ROOT)
            if f.is_file() and "__pycache__" not in rel.parts and rel.parts[:2] != ("edge", "local") \
                    and rel.as_posix() not in LOCAL_ONLY:
                files[str(rel)] = f.read_bytes()
    for lib in (*LIBRARIES, *IF_INSTALLED):
        spec = importlib.util.find_spec(lib)
        if spec is None or spec.origin is None:
            if lib in IF_INSTALLED:
                continue
            raise SystemExit(f"{lib} is not installed here (make install)")
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            base = origin.parent
            for f in sorted(base.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".so":
                    files[str(Path(lib) / f.relative_to(base))] = f.read_bytes()
        else:
            files[origin.name] = origin.read_bytes()
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, files[name])
    return out


# --- function and its URL ----------------------------------------------------------------------------------


def step_function(lam: Any, name: str, role_arn: str, package: Path, env: dict[str, str]) -> tuple[str, str]:
    """The function (created, or its code and configuration brought up to date) and its URL:
    (function URL, origin secret). The secret is the one already configured, or a new one."""
    config = functions.function_config(lam, name)
    current_env = (config or {}).get("Environment", {}).get("Variables", {})
    secret = current_env.get("DASHBOARD_ORIGIN_SECRET") or secrets.token_urlsafe(32)
    wanted = {"Handler": HANDLER, "Runtime": RUNTIME, "MemorySize": MEMORY_MB, "Timeout": TIMEOUT_S, "Role": role_arn}
    functions.step_function_code(lam, name, package.read_bytes(), wanted, "malaria-risk key dashboard",
                                 {**env, "DASHBOARD_ORIGIN_SECRET": secret}, config)
    try:
        url = str(lam.get_function_url_config(FunctionName=name)["FunctionUrl"])
    except lam.exceptions.ResourceNotFoundException:
        url = str(lam.create_function_url_config(FunctionName=name, AuthType="NONE")["FunctionUrl"])
        lam.add_permission(FunctionName=name, StatementId="FunctionUrlPublic", Action="lambda:InvokeFunctionUrl",
                           Principal="*", FunctionUrlAuthType="NONE")
        log(f"{name}: function URL {url} (answers 403 without CloudFront's secret header)")
    return url, secret


# --- distribution ------------------------------------------------------------------------------------------


def distribution_parts(name: str, function_url: str, secret: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(origin, default behaviour) of the dashboard's distribution."""
    domain = function_url.split("://", 1)[-1].strip("/")
    origin = {"Id": f"{name}-function", "DomainName": domain, "OriginPath": "",
              "CustomOriginConfig": {"HTTPPort": 80, "HTTPSPort": 443, "OriginProtocolPolicy": "https-only",
                                     "OriginSslProtocols": {"Quantity": 1, "Items": ["TLSv1.2"]}},
              "CustomHeaders": {"Quantity": 1, "Items": [{"HeaderName": ORIGIN_HEADER, "HeaderValue": secret}]}}
    behaviour = {"TargetOriginId": origin["Id"], "ViewerProtocolPolicy": "redirect-to-https",
                 "AllowedMethods": {"Quantity": 7, "Items": ["GET", "HEAD", "OPTIONS", "PUT", "POST", "PATCH", "DELETE"],
                                    "CachedMethods": {"Quantity": 2, "Items": ["GET", "HEAD"]}},
                 "CachePolicyId": CACHING_DISABLED, "OriginRequestPolicyId": ALL_VIEWER_EXCEPT_HOST, "Compress": True}
    return origin, behaviour


def step_distribution(cf: Any, name: str, function_url: str, secret: str,
                      web_acl: str | None = None) -> tuple[str, str]:
    """The dashboard's distribution, behind the web ACL `web_acl` when given: (id, domain)."""
    origin, behaviour = distribution_parts(name, function_url, secret)
    dist_id, _, domain = cloudfront.step_distribution(cf, name, f"{name}: malaria-risk key dashboard", [origin],
                                                      behaviour, web_acl=web_acl)
    return dist_id, domain


# --- command line -------------------------------------------------------------------------------------------


STEPS = ["tables", "package", "waf", "monitoring", "all"]
DRY_STEPS = ("waf", "monitoring", "all")


def main(argv: list[str] | None = None) -> int:
    import boto3  # type: ignore[import-untyped]

    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("step", choices=STEPS, help="`all`: tables, role, function, waf, distribution, monitoring")
    p.add_argument("--name", default="malaria-risk-dashboard")
    p.add_argument("--table-prefix")
    p.add_argument("--region", default=None, help="default: $MALARIA_RISK_REGION (no silent default)")
    p.add_argument("--sender", help="the SES-verified address codes and invitations come from")
    p.add_argument("--base-url", help="the dashboard's public origin, e.g. https://account.example.org")
    p.add_argument("--api-url", help="the API's origin, for the ready curl / Python / R lines")
    p.add_argument("--package", type=Path, default=ROOT / "build-dashboard" / "dashboard.zip")
    p.add_argument("--out", type=Path, default=ROOT / "build-dashboard" / "dashboard.zip")
    p.add_argument("--edge-name", default="malaria-risk-edge", help="the API deploy's --name: the dashboard's "
                   "alarm goes to its `<name>-alarms` topic in the home region, the one operators already read")
    p.add_argument("--alarm-email", help="subscribe this address to that topic")
    p.add_argument("--retention-days", type=int, default=monitoring.LOG_RETENTION_DAYS)
    p.add_argument("--dry-run", action="store_true", help="read everything, change nothing, say what would "
                   "change (waf, monitoring; `all` then runs only those)")
    a = p.parse_args(argv)
    if a.step == "package":
        log(f"package: {build_package(a.out)}")
        return 0
    if a.dry_run and a.step not in DRY_STEPS:
        p.error(f"--dry-run covers {', '.join(DRY_STEPS)}, not {a.step}")
    from edge.settings import SettingsError, home_region

    try:
        a.region = home_region(a.region)  # the one region setting shared with the CLI and the edge bundle
    except SettingsError as e:
        p.error(str(e))
    dry, every = a.dry_run, a.step == "all"
    if a.step == "tables" or (every and not dry):
        if not a.table_prefix:
            p.error("--table-prefix is required")
        step_tables(boto3.client("dynamodb", region_name=a.region), a.table_prefix)
    web_acl = None
    if a.step == "waf" or every:
        web_acl = step_web_acl(boto3.client("wafv2", region_name=WAF_REGION), a.name, dry)
    if every and not dry:
        if not (a.sender and a.base_url and a.api_url):
            p.error("--sender, --base-url and --api-url are required")
        role = step_role(boto3.client("iam"), a.name, role_policy(a.name, a.table_prefix, a.region, a.sender))
        env = {"DASHBOARD_KEY_STORE": f"dynamodb:{a.table_prefix}", "DASHBOARD_MAILER": f"ses:{a.sender}",
               "DASHBOARD_BASE_URL": a.base_url, "DASHBOARD_API_URL": a.api_url}
        url, secret = step_function(boto3.client("lambda", region_name=a.region), a.name, role, a.package, env)
        dist_id, domain = step_distribution(boto3.client("cloudfront"), a.name, url, secret, web_acl)
        log(f"distribution {dist_id}: https://{domain}/ behind web ACL {web_acl} (point {a.base_url} at it)")
    if a.step == "monitoring" or every:
        monitoring.step_dashboard_logs(boto3.client("logs", region_name=a.region), a.name, a.retention_days, dry)
        # the mail budget's alarm where the function logs; the WAF's where WAF counts for CloudFront
        for region, alarms in ((a.region, monitoring.dashboard_alarms), (WAF_REGION, waf_alarms)):
            topic = monitoring.step_topic(boto3.client("sns", region_name=region), a.edge_name, a.alarm_email, dry)
            monitoring.step_alarms(boto3.client("cloudwatch", region_name=region), alarms(a.name, topic), dry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
