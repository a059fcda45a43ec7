"""Scripted boto3 procedure for the service on AWS: bucket, role, tables, functions, distribution, monitoring, schedule.

Every step describes what exists first and changes only what differs, so running a step
(or `all`) twice is harmless and a second run changes nothing. Steps take boto3 clients
as arguments so tests drive them against moto's server (see docs/deploy.md for what
that emulator can and cannot show); `main` makes the real clients.

    python deploy/aws.py role    --name malaria-risk-edge --bucket B --prefix api --table-prefix mr-
    python deploy/aws.py tables  --table-prefix mr-            # + deletion protection, point-in-time recovery
    python deploy/aws.py function --name malaria-risk-edge --role-arn ARN --bundle build-edge/edge.zip
    python deploy/aws.py distribution --name malaria-risk-edge --bucket B --bucket-region eu-west-1 \
        --request-arn ARN:N --response-arn ARN:N
    python deploy/aws.py bucket --bucket B --prefix api                    # versioned, private, create-only releases
    python deploy/aws.py monitoring --name malaria-risk-edge --log-regions eu-west-2 --distribution-id E… \
        --alarm-email ops@example.org                                      # log retention, metric filters, alarms
    python deploy/aws.py source --bucket B --prefix api                    # the jobs' code: git archive of HEAD
    python deploy/aws.py schedule --bucket B --prefix api --table-prefix mr- --base-url https://… [--dry-run]
    python deploy/aws.py backup|restore --table-prefix mr- [--backup-arn ARN]
    python deploy/aws.py all ... (every option above; role and function ARNs are passed along)

The region of every step but the functions' is the one setting MALARIA_RISK_REGION (or --region);
there is no default. `--dry-run` (bucket, monitoring, source, schedule, all) reads everything and
prints each change it would make as `would: …`, making none.

Lambda@Edge functions must live in us-east-1 and be referenced by a *numbered version*;
CloudFront replicates them to its edge locations. The operator's own permissions are
listed in docs/deploy.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy import cloudfront, functions  # noqa: E402
from deploy.common import EDGE_EVENTS, log, subset  # noqa: E402
from deploy.monitoring import (  # noqa: E402
    LOG_RETENTION_DAYS,
    global_alarms,
    jobs_alarm,
    regional_alarms,
    step_alarms,
    step_edge_logs,
    step_topic,
)
from deploy.schedule import step_schedule, step_source  # noqa: E402
from deploy.storage import (  # noqa: E402
    NONCURRENT_DAYS,
    step_backup,
    step_bucket,
    step_restore,
    step_table_protection,
)

LAMBDA_REGION = "us-east-1"  # a Lambda@Edge requirement, not a choice
HANDLERS = dict(zip(EDGE_EVENTS, ("edge.cloudfront.handler", "edge.viewer_response.handler"), strict=True))
MEMORY_MB = 128
TIMEOUT_S = 5  # the viewer-request maximum
# Managed cache policy "CachingOptimized": no cookies, headers or query strings in the key
# (the function's rewrite puts the release id and the encoding in the URI).
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"
RESPONSE_POLICY_NAME = "malaria-risk-api"
# the gate's CORS lists (edge/gate.py), so the CDN and the local server allow and expose the same headers
from edge.gate import ALLOW_HEADERS, EXPOSE_HEADERS  # noqa: E402

EXPOSE = [h.strip() for h in EXPOSE_HEADERS.split(",")]
ALLOW = [h.strip() for h in ALLOW_HEADERS.split(",")]
TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Action": "sts:AssumeRole",
    "Principal": {"Service": ["lambda.amazonaws.com", "edgelambda.amazonaws.com"]}}]}
BUCKET_POLICY_SID = "MalariaRiskCloudFrontReadsReleases"


# --- the function's role --------------------------------------------------------------------


def role_policy(name: str, bucket: str, prefix: str, table_prefix: str, region: str) -> dict[str, Any]:
    """What the function may do: read the pointer, the list of kept releases beside it, the releases'
    indexes (index layout) and the objects they name (a pinned release's bundle list, the names index),
    the kept copy-layout releases' bundle file lists and their scopes (pinned downloads), update key items,
    write its logs (in every region)."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadPointer", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": [f"arn:aws:s3:::{bucket}/{base}current.json",
                      f"arn:aws:s3:::{bucket}/{base}releases.json",
                      f"arn:aws:s3:::{bucket}/{base}releases/*/downloads/SHA256SUMS",
                      # a kept release's /v1/downloads document: its files and the scopes each needs
                      f"arn:aws:s3:::{bucket}/{base}releases/*/v1/downloads.json",
                      # the index layout: each release's index, and the objects it names
                      f"arn:aws:s3:::{bucket}/{base}releases/*/index.json",
                      f"arn:aws:s3:::{bucket}/{base}releases/*/index/*",
                      f"arn:aws:s3:::{bucket}/{base}objects/*"]},
        {"Sid": "AuthoriseAndCount", "Effect": "Allow", "Action": "dynamodb:UpdateItem",
         "Resource": f"arn:aws:dynamodb:{region}:*:table/{table_prefix}keys"},
        {"Sid": "Logs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": f"arn:aws:logs:*:*:log-group:/aws/lambda/us-east-1.{name}-*"},
    ]}


def step_role(iam: Any, name: str, policy: dict[str, Any]) -> str:
    return functions.step_role(iam, name, TRUST, "edge", policy, "malaria-risk Lambda@Edge gate")


# --- tables -----------------------------------------------------------------------------------


def step_tables(ddb: Any, table_prefix: str) -> None:
    from edge.stores.dynamodb import DynamoDBKeyStore

    store = DynamoDBKeyStore(ddb, table_prefix)
    store.create_tables()
    log(f"tables ready: {store.keys_table}, {store.counters_table_name} (TTL on expires_at)")


# --- the two functions --------------------------------------------------------------------------


def bundle_runtime(bundle: Path) -> str:
    """The runtime the bundle's .pyc files were compiled for (deploy/build_bundle.py records it)."""
    with zipfile.ZipFile(bundle) as z:
        runtime = json.loads(z.read("edge_config.json")).get("runtime")
    if not runtime:
        raise SystemExit(f"{bundle} records no runtime: rebuild it with deploy/build_bundle.py")
    return str(runtime)


def step_function(lam: Any, name: str, role_arn: str, bundle: Path) -> dict[str, str]:
    """Create or update both functions from one zip; publish a numbered version only when something changed."""
    code = bundle.read_bytes()
    sha = functions.code_sha256(code)
    runtime = bundle_runtime(bundle)
    arns: dict[str, str] = {}
    for event, handler in HANDLERS.items():
        fname = f"{name}-{event}"
        wanted = {"Handler": handler, "Runtime": runtime, "MemorySize": MEMORY_MB, "Timeout": TIMEOUT_S,
                  "Role": role_arn}
        functions.step_function_code(lam, fname, code, wanted, f"malaria-risk edge gate ({event})")
        versions = [v for v in _versions(lam, fname) if v["Version"] != "$LATEST"]
        latest = max(versions, key=lambda v: int(v["Version"]), default=None)
        if latest is not None and latest.get("CodeSha256") == sha and all(
                latest.get(k) == v for k, v in wanted.items()):
            arns[event] = str(latest["FunctionArn"])
        else:
            arns[event] = str(lam.publish_version(FunctionName=fname, CodeSha256=sha)["FunctionArn"])
            log(f"{fname}: published {arns[event]}")
    return arns


def _versions(lam: Any, fname: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"FunctionName": fname}
    while True:
        page = lam.list_versions_by_function(**kwargs)
        out.extend(page.get("Versions", []))
        if not page.get("NextMarker"):
            return out
        kwargs["Marker"] = page["NextMarker"]


# --- CloudFront: origin access control, response headers, distribution, bucket policy -----------


def step_oac(cf: Any, name: str) -> str:
    for item in cf.list_origin_access_controls().get("OriginAccessControlList", {}).get("Items", []) or []:
        if item["Name"] == name:
            return str(item["Id"])
    created = cf.create_origin_access_control(OriginAccessControlConfig={
        "Name": name, "Description": "malaria-risk: CloudFront signs its requests to the release bucket",
        "SigningProtocol": "sigv4", "SigningBehavior": "always", "OriginAccessControlOriginType": "s3"})
    log(f"origin access control {name}: created")
    return str(created["OriginAccessControl"]["Id"])


def response_headers_policy_config() -> dict[str, Any]:
    """CORS for every answer. No Cache-Control here: the functions set it (a policy override
    would also reach 401/429/503 answers and make them cacheable)."""
    return {
        "Name": RESPONSE_POLICY_NAME,
        "Comment": "malaria-risk API: CORS and exposed headers",
        "CorsConfig": {
            "AccessControlAllowOrigins": {"Quantity": 1, "Items": ["*"]},
            "AccessControlAllowHeaders": {"Quantity": len(ALLOW), "Items": ALLOW},
            "AccessControlAllowMethods": {"Quantity": 3, "Items": ["GET", "HEAD", "OPTIONS"]},
            "AccessControlAllowCredentials": False,
            "AccessControlExposeHeaders": {"Quantity": len(EXPOSE), "Items": EXPOSE},
            "AccessControlMaxAgeSec": 86400,
            "OriginOverride": True,
        },
    }


def step_response_headers_policy(cf: Any) -> str:
    config = response_headers_policy_config()
    items = cf.list_response_headers_policies(Type="custom").get("ResponseHeadersPolicyList", {}).get("Items", [])
    for item in items or []:
        policy = item["ResponseHeadersPolicy"]
        if policy["ResponseHeadersPolicyConfig"]["Name"] == RESPONSE_POLICY_NAME:
            got = cf.get_response_headers_policy_config(Id=policy["Id"])
            if subset(config, got["ResponseHeadersPolicyConfig"]):
                return str(policy["Id"])
            cf.update_response_headers_policy(Id=policy["Id"], IfMatch=got["ETag"],
                                              ResponseHeadersPolicyConfig=config)
            log("response headers policy: updated")
            return str(policy["Id"])
    created = cf.create_response_headers_policy(ResponseHeadersPolicyConfig=config)
    log("response headers policy: created")
    return str(created["ResponseHeadersPolicy"]["Id"])


def behaviour(origin_id: str, arns: dict[str, str], policy_id: str | None) -> dict[str, Any]:
    b: dict[str, Any] = {
        "TargetOriginId": origin_id,
        "ViewerProtocolPolicy": "https-only",
        "AllowedMethods": {"Quantity": 3, "Items": ["GET", "HEAD", "OPTIONS"],
                           "CachedMethods": {"Quantity": 2, "Items": ["GET", "HEAD"]}},
        "CachePolicyId": CACHING_OPTIMIZED,
        # CloudFront compresses what it serves (a release of the index layout stores no .gz twins); an
        # object with its own Content-Encoding (a copy-layout release's .gz key) is passed as it is
        "Compress": True,
        "LambdaFunctionAssociations": {"Quantity": 2, "Items": [
            {"LambdaFunctionARN": arns["viewer-request"], "EventType": "viewer-request", "IncludeBody": False},
            {"LambdaFunctionARN": arns["viewer-response"], "EventType": "viewer-response", "IncludeBody": False},
        ]},
    }
    if policy_id:
        b["ResponseHeadersPolicyId"] = policy_id
    return b


STATUS_PATH = "/status.json"  # the canary's status.json, served keyless beside the API (docs/monitoring.md)


def status_behaviour(origin_id: str, policy_id: str | None) -> dict[str, Any]:
    """`/status.json` straight from the bucket: no function (it needs no key), cached for the object's
    own max-age (60 s, set by the canary)."""
    b: dict[str, Any] = {
        "PathPattern": STATUS_PATH, "TargetOriginId": origin_id, "ViewerProtocolPolicy": "https-only",
        "AllowedMethods": {"Quantity": 2, "Items": ["GET", "HEAD"],
                           "CachedMethods": {"Quantity": 2, "Items": ["GET", "HEAD"]}},
        "CachePolicyId": CACHING_OPTIMIZED, "Compress": True,
        "LambdaFunctionAssociations": {"Quantity": 0},
    }
    if policy_id:
        b["ResponseHeadersPolicyId"] = policy_id
    return b


def step_distribution(cf: Any, name: str, bucket: str, bucket_region: str, arns: dict[str, str], oac_id: str,
                      policy_id: str | None, prefix: str = "") -> tuple[str, str, str]:
    """The API's distribution: the release bucket behind the functions, and `/status.json` straight
    from the bucket's status folder: (id, ARN, domain)."""
    origin_id, status_id = f"{name}-releases", f"{name}-status"
    origin = {"Id": origin_id, "DomainName": f"{bucket}.s3.{bucket_region}.amazonaws.com", "OriginPath": "",
              "S3OriginConfig": {"OriginAccessIdentity": ""}, "OriginAccessControlId": oac_id}
    status_origin = {**origin, "Id": status_id,
                     "OriginPath": "/" + "/".join(p for p in (prefix.strip("/"), "status") if p)}
    return cloudfront.step_distribution(cf, name, f"{name}: malaria-risk API", [origin, status_origin],
                                        behaviour(origin_id, arns, policy_id),
                                        [status_behaviour(status_id, policy_id)])


def bucket_policy_statement(bucket: str, prefix: str, distribution_arn: str) -> dict[str, Any]:
    """CloudFront (through the origin access control) may read release objects (the stored objects the
    function rewrites to in the index layout, a release's keys in the copy layout) and the canary's
    status.json, for this distribution only."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return {"Sid": BUCKET_POLICY_SID, "Effect": "Allow", "Principal": {"Service": "cloudfront.amazonaws.com"},
            "Action": "s3:GetObject", "Resource": [f"arn:aws:s3:::{bucket}/{base}releases/*",
                                                   f"arn:aws:s3:::{bucket}/{base}objects/*",
                                                   f"arn:aws:s3:::{bucket}/{base}status/status.json"],
            "Condition": {"StringEquals": {"AWS:SourceArn": distribution_arn}}}


def step_bucket_policy(s3: Any, bucket: str, prefix: str, distribution_arn: str) -> None:
    """Our statement (by Sid) added or replaced; statements of others are kept."""
    statement = bucket_policy_statement(bucket, prefix, distribution_arn)
    try:
        policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
    except s3.exceptions.ClientError as e:
        if e.response.get("Error", {}).get("Code") != "NoSuchBucketPolicy":
            raise
        policy = {"Version": "2012-10-17", "Statement": []}
    others = [s for s in policy.get("Statement", []) if s.get("Sid") != BUCKET_POLICY_SID]
    if [s for s in policy.get("Statement", []) if s.get("Sid") == BUCKET_POLICY_SID] == [statement]:
        return
    policy["Statement"] = [*others, statement]
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    log(f"bucket {bucket}: policy lets the distribution read {statement['Resource']}")


def wait_deployed(cf: Any, distribution_id: str, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while cf.get_distribution(Id=distribution_id)["Distribution"]["Status"] != "Deployed":
        if time.monotonic() > deadline:
            log("still deploying after 30 min; check the console")
            return
        time.sleep(20)
    log("deployed")


# --- command line -------------------------------------------------------------------------------


STEPS = ["bucket", "role", "tables", "function", "distribution", "monitoring", "source", "schedule", "all",
         "backup", "restore"]


def bundle_region(bundle: Path) -> str:
    with zipfile.ZipFile(bundle) as z:
        return str(json.loads(z.read("edge_config.json")).get("region", ""))


def main(argv: list[str] | None = None) -> int:
    import boto3  # type: ignore[import-untyped]

    from edge.settings import REGION_ENV, SettingsError, home_region

    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("step", choices=STEPS, help="`all` runs every step from bucket to schedule, in that order")
    p.add_argument("--name", default="malaria-risk-edge")
    p.add_argument("--table-prefix")
    p.add_argument("--region", help=f"home region of the table and the bucket (default ${REGION_ENV}; no "
                   "fallback; docs/deploy.md#home-region). The functions go to us-east-1 whatever it is")
    p.add_argument("--bucket")
    p.add_argument("--bucket-region", help="default: the home region")
    p.add_argument("--prefix", default="")
    p.add_argument("--role-arn")
    p.add_argument("--bundle", type=Path, default=ROOT / "build-edge" / "edge.zip")
    p.add_argument("--request-arn", help="for `distribution` alone: the viewer-request version ARN")
    p.add_argument("--response-arn", help="for `distribution` alone: the viewer-response version ARN")
    p.add_argument("--distribution-id", help="for `monitoring` alone: the distribution's CloudFront alarms")
    p.add_argument("--no-wait", action="store_true", help="do not wait for CloudFront to deploy")
    p.add_argument("--log-regions", default="", help="comma-separated regions whose edge caches run the "
                   "function (its logs, metric filters and alarms go there); the home region is always one")
    p.add_argument("--retention-days", type=int, default=LOG_RETENTION_DAYS)
    p.add_argument("--noncurrent-days", type=int, default=NONCURRENT_DAYS)
    p.add_argument("--alarm-email", help="subscribe this address to the alarms' topics")
    p.add_argument("--base-url", help="the served API, for the canary and refresh's served check")
    p.add_argument("--max-lag-days", type=int, default=60, help="canary: how old /v1/periods may get")
    p.add_argument("--source-ref", default="HEAD", help="`source`: the commit the jobs run")
    p.add_argument("--backup-arn", help="`restore`: the backup (default: the newest of the key table)")
    p.add_argument("--dry-run", action="store_true", help="read everything, change nothing, say what would change "
                   "(bucket, tables' protection, monitoring, source, schedule)")
    a = p.parse_args(argv)
    try:
        region = home_region(a.region)
    except SettingsError as e:
        p.error(str(e))
    bucket_region = a.bucket_region or region
    dry = a.dry_run
    if dry and a.step in ("role", "function", "distribution", "tables", "backup", "restore"):
        p.error(f"--dry-run covers bucket, monitoring, source, schedule and all, not {a.step}")
    every = a.step == "all"
    if a.step in ("bucket", "all"):
        if not a.bucket:
            p.error("--bucket is required")
        step_bucket(boto3.client("s3", region_name=bucket_region), a.bucket, bucket_region, a.prefix,
                    a.noncurrent_days, dry)
    role_arn = a.role_arn
    if a.step == "role" or (every and not dry):
        if not (a.bucket and a.table_prefix):
            p.error("--bucket and --table-prefix are required")
        role_arn = step_role(boto3.client("iam"), a.name,
                             role_policy(a.name, a.bucket, a.prefix, a.table_prefix, region))
        log(f"role: {role_arn}")
    if a.step in ("tables", "all"):
        if not a.table_prefix:
            p.error("--table-prefix is required")
        ddb = boto3.client("dynamodb", region_name=region)
        if not dry:
            step_tables(ddb, a.table_prefix)
        step_table_protection(ddb, a.table_prefix, dry)
    if a.step == "backup":
        step_backup(boto3.client("dynamodb", region_name=region), a.table_prefix)
    if a.step == "restore":
        step_restore(boto3.client("dynamodb", region_name=region), a.table_prefix, a.backup_arn)
    arns = {"viewer-request": a.request_arn, "viewer-response": a.response_arn}
    dist_id = a.distribution_id
    base_url = a.base_url
    if a.step == "function" or (every and not dry):
        if not role_arn:
            p.error("--role-arn is required")
        if bundle_region(a.bundle) != region:
            p.error(f"{a.bundle} was built for region {bundle_region(a.bundle)!r}, this deploy is for {region!r}: "
                    f"rebuild it with the same {REGION_ENV}")
        arns = step_function(boto3.client("lambda", region_name=LAMBDA_REGION), a.name, role_arn, a.bundle)
    if a.step == "distribution" or (every and not dry):
        if not a.bucket or not all(arns.values()):
            p.error("--bucket and both function version ARNs are required")
        cf = boto3.client("cloudfront")
        oac = step_oac(cf, a.name)
        policy = step_response_headers_policy(cf)
        dist_id, dist_arn, domain = step_distribution(cf, a.name, a.bucket, bucket_region, arns, oac, policy,
                                                      a.prefix)
        step_bucket_policy(boto3.client("s3", region_name=bucket_region), a.bucket, a.prefix, dist_arn)
        log(f"distribution {dist_id}: https://{domain}/")
        base_url = base_url or f"https://{domain}"  # the canary's target until a domain of its own
        if not a.no_wait:
            wait_deployed(cf, dist_id)
    if a.step in ("monitoring", "all"):
        regions = list(dict.fromkeys([region, *(r.strip() for r in a.log_regions.split(",") if r.strip())]))
        for r in regions:
            topic = step_topic(boto3.client("sns", region_name=r), a.name, a.alarm_email, dry)
            step_edge_logs(boto3.client("logs", region_name=r), a.name, a.retention_days, dry)
            alarms = regional_alarms(a.name, topic) + ([jobs_alarm(a.name, topic)] if r == region else [])
            step_alarms(boto3.client("cloudwatch", region_name=r), alarms, dry)
        if dist_id:
            topic = step_topic(boto3.client("sns", region_name=LAMBDA_REGION), a.name, a.alarm_email, dry)
            step_alarms(boto3.client("cloudwatch", region_name=LAMBDA_REGION),
                        global_alarms(a.name, dist_id, topic), dry)
        else:
            log("no --distribution-id: CloudFront's own alarms (us-east-1) skipped")
    if a.step in ("source", "all"):
        if not a.bucket:
            p.error("--bucket is required")
        step_source(boto3.client("s3", region_name=bucket_region), a.bucket, a.prefix, a.source_ref, dry)
    if a.step in ("schedule", "all"):
        if not (a.bucket and a.table_prefix and base_url):
            p.error("--bucket, --table-prefix and --base-url are required")
        step_schedule(boto3.client("iam"), boto3.client("codebuild", region_name=region),
                      boto3.client("events", region_name=region), boto3.client("logs", region_name=region),
                      a.name, a.bucket, a.prefix, a.table_prefix, region, base_url, a.max_lag_days,
                      a.retention_days, dry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
