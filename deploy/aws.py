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
import base64
import hashlib
import json
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LAMBDA_REGION = "us-east-1"  # a Lambda@Edge requirement, not a choice
HANDLERS = {"viewer-request": "edge.cloudfront.handler",
            "viewer-response": "edge.viewer_response.handler"}
MEMORY_MB = 128
TIMEOUT_S = 5  # the viewer-request maximum
# Managed cache policy "CachingOptimized": no cookies, headers or query strings in the key
# (the function's rewrite puts the release id and the encoding in the URI).
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"
RESPONSE_POLICY_NAME = "malaria-risk-api"
EXPOSE = ["ETag", "RateLimit", "RateLimit-Policy", "Retry-After", "X-Release-Id"]
TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Action": "sts:AssumeRole",
    "Principal": {"Service": ["lambda.amazonaws.com", "edgelambda.amazonaws.com"]}}]}
BUCKET_POLICY_SID = "MalariaRiskCloudFrontReadsReleases"


def log(msg: str) -> None:
    print(msg, flush=True)


# --- the function's role --------------------------------------------------------------------


def role_policy(name: str, bucket: str, prefix: str, table_prefix: str, region: str) -> dict[str, Any]:
    """What the function may do: read the pointer and the kept releases' bundle file lists
    (pinned downloads), update key items, write its logs (in every region)."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadPointer", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": [f"arn:aws:s3:::{bucket}/{base}current.json",
                      f"arn:aws:s3:::{bucket}/{base}releases/*/downloads/SHA256SUMS"]},
        {"Sid": "AuthoriseAndCount", "Effect": "Allow", "Action": "dynamodb:UpdateItem",
         "Resource": f"arn:aws:dynamodb:{region}:*:table/{table_prefix}keys"},
        {"Sid": "Logs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": f"arn:aws:logs:*:*:log-group:/aws/lambda/us-east-1.{name}-*"},
    ]}


def step_role(iam: Any, name: str, policy: dict[str, Any]) -> str:
    role = f"{name}-role"
    try:
        arn = str(iam.get_role(RoleName=role)["Role"]["Arn"])
        current = iam.get_role(RoleName=role)["Role"].get("AssumeRolePolicyDocument")
        if isinstance(current, str):
            current = json.loads(current)
        if current != TRUST:
            iam.update_assume_role_policy(RoleName=role, PolicyDocument=json.dumps(TRUST))
            log(f"role {role}: trust policy updated")
    except iam.exceptions.NoSuchEntityException:
        arn = str(iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(TRUST),
                                  Description="malaria-risk Lambda@Edge gate")["Role"]["Arn"])
        log(f"role {role}: created")
    try:
        got = iam.get_role_policy(RoleName=role, PolicyName="edge")["PolicyDocument"]
        same = (json.loads(got) if isinstance(got, str) else got) == policy
    except iam.exceptions.NoSuchEntityException:
        same = False
    if not same:
        iam.put_role_policy(RoleName=role, PolicyName="edge", PolicyDocument=json.dumps(policy))
        log(f"role {role}: permissions set")
    return arn


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
    sha = base64.b64encode(hashlib.sha256(code).digest()).decode()
    runtime = bundle_runtime(bundle)
    arns: dict[str, str] = {}
    for event, handler in HANDLERS.items():
        fname = f"{name}-{event}"
        wanted = {"Handler": handler, "Runtime": runtime, "MemorySize": MEMORY_MB, "Timeout": TIMEOUT_S,
                  "Role": role_arn}
        try:
            config = lam.get_function(FunctionName=fname)["Configuration"]
        except lam.exceptions.ResourceNotFoundException:
            lam.create_function(FunctionName=fname, Code={"ZipFile": code}, Publish=False,
                                Description=f"malaria-risk edge gate ({event})", **wanted)
            _wait(lam, "function_active_v2", fname)
            log(f"{fname}: created")
        else:
            if config.get("CodeSha256") != sha:
                lam.update_function_code(FunctionName=fname, ZipFile=code)
                _wait(lam, "function_updated_v2", fname)
                log(f"{fname}: code updated")
            if any(config.get(k) != v for k, v in wanted.items()):
                lam.update_function_configuration(FunctionName=fname, **wanted)
                _wait(lam, "function_updated_v2", fname)
                log(f"{fname}: configuration updated")
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


def _wait(lam: Any, waiter: str, fname: str) -> None:
    lam.get_waiter(waiter).wait(FunctionName=fname, WaiterConfig={"Delay": 2, "MaxAttempts": 150})


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
            "AccessControlAllowHeaders": {"Quantity": 4, "Items": ["Authorization", "x-api-key", "If-None-Match",
                                                                   "Accept-Encoding"]},
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
            if _subset(config, got["ResponseHeadersPolicyConfig"]):
                return str(policy["Id"])
            cf.update_response_headers_policy(Id=policy["Id"], IfMatch=got["ETag"],
                                              ResponseHeadersPolicyConfig=config)
            log("response headers policy: updated")
            return str(policy["Id"])
    created = cf.create_response_headers_policy(ResponseHeadersPolicyConfig=config)
    log("response headers policy: created")
    return str(created["ResponseHeadersPolicy"]["Id"])


def _subset(wanted: Any, got: Any) -> bool:
    """Whether every value we set is already so (AWS adds defaults we did not ask for)."""
    if isinstance(wanted, dict):
        return isinstance(got, dict) and all(_subset(v, got.get(k)) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(got, list) and len(wanted) == len(got) and all(_subset(a, b) for a, b in zip(wanted, got, strict=True))
    return bool(wanted == got)


def behaviour(origin_id: str, arns: dict[str, str], policy_id: str | None) -> dict[str, Any]:
    b: dict[str, Any] = {
        "TargetOriginId": origin_id,
        "ViewerProtocolPolicy": "https-only",
        "AllowedMethods": {"Quantity": 3, "Items": ["GET", "HEAD", "OPTIONS"],
                           "CachedMethods": {"Quantity": 2, "Items": ["GET", "HEAD"]}},
        "CachePolicyId": CACHING_OPTIMIZED,
        "Compress": False,  # the function picks the precompressed .gz object itself
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
    """The distribution (found by its Comment), created or brought to the wanted shape: (id, ARN, domain)."""
    comment = f"{name}: malaria-risk API"
    origin_id = f"{name}-releases"
    origin = {"Id": origin_id, "DomainName": f"{bucket}.s3.{bucket_region}.amazonaws.com", "OriginPath": "",
              "S3OriginConfig": {"OriginAccessIdentity": ""}, "OriginAccessControlId": oac_id,
              "CustomHeaders": {"Quantity": 0}}
    status_id = f"{name}-status"
    status_origin = {**origin, "Id": status_id,
                     "OriginPath": "/" + "/".join(p for p in (prefix.strip("/"), "status") if p)}
    wanted_behaviour = behaviour(origin_id, arns, policy_id)
    wanted_status = {"Quantity": 1, "Items": [status_behaviour(status_id, policy_id)]}
    found = None
    for item in cf.list_distributions().get("DistributionList", {}).get("Items", []) or []:
        if item.get("Comment") == comment:
            found = item
    if found is None:
        created = cf.create_distribution(DistributionConfig={
            "CallerReference": f"{name}-{int(time.time())}", "Comment": comment, "Enabled": True,
            "Origins": {"Quantity": 2, "Items": [origin, status_origin]}, "DefaultCacheBehavior": wanted_behaviour,
            "CacheBehaviors": wanted_status,
            "PriceClass": "PriceClass_All", "HttpVersion": "http2and3", "IsIPV6Enabled": True,
        })["Distribution"]
        log(f"distribution {created['Id']}: created ({created['DomainName']})")
        return str(created["Id"]), str(created["ARN"]), str(created["DomainName"])
    got = cf.get_distribution_config(Id=found["Id"])
    config, etag = got["DistributionConfig"], got["ETag"]
    current_origins = {o["Id"]: o for o in config["Origins"].get("Items", [])}
    changed = not _subset(wanted_behaviour, config["DefaultCacheBehavior"]) or any(not _subset(
        {k: v for k, v in o.items() if k != "CustomHeaders"}, current_origins.get(o["Id"]))
        for o in (origin, status_origin)) or not _subset(wanted_status, config.get("CacheBehaviors"))
    if changed:
        for o in (origin, status_origin):
            current_origins[o["Id"]] = {**current_origins.get(o["Id"], {}), **o}
        config["CacheBehaviors"] = wanted_status
        config["Origins"] = {"Quantity": len(current_origins), "Items": list(current_origins.values())}
        b = config["DefaultCacheBehavior"]
        for legacy in ("ForwardedValues", "MinTTL", "DefaultTTL", "MaxTTL"):
            b.pop(legacy, None)  # incompatible with a cache policy
        b.update(wanted_behaviour)
        cf.update_distribution(Id=found["Id"], IfMatch=etag, DistributionConfig=config)
        log(f"distribution {found['Id']}: updated")
    return str(found["Id"]), str(found["ARN"]), str(found["DomainName"])


def bucket_policy_statement(bucket: str, prefix: str, distribution_arn: str) -> dict[str, Any]:
    """CloudFront (through the origin access control) may read release objects and the canary's
    status.json, for this distribution only."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return {"Sid": BUCKET_POLICY_SID, "Effect": "Allow", "Principal": {"Service": "cloudfront.amazonaws.com"},
            "Action": "s3:GetObject", "Resource": [f"arn:aws:s3:::{bucket}/{base}releases/*",
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


# --- dry run -------------------------------------------------------------------------------------


def change(dry: bool, what: str, fn: Callable[[], Any]) -> Any:
    """Make one change and say so, or with `dry` only say it would be made (every read still happens,
    so a dry run lists exactly what a real run would change, and a dry run after a real one lists nothing)."""
    if dry:
        log(f"would: {what}")
        return None
    result = fn()
    log(what)
    return result


def _code(e: Exception) -> str:
    return str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))


# --- the release bucket ---------------------------------------------------------------------------

LIFECYCLE_RULE_ID = "malaria-risk-old-versions"
NONCURRENT_DAYS = 90  # a deleted or replaced object stays recoverable this long (docs/runbook.md)
CREATE_ONLY_SID = "MalariaRiskReleaseObjectsCreateOnly"
BLOCK_ALL = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
             "RestrictPublicBuckets": True}


def lifecycle_rule(noncurrent_days: int = NONCURRENT_DAYS) -> dict[str, Any]:
    """Old versions (a pruned release, a replaced pointer or status) kept `noncurrent_days`, then
    removed; abandoned multipart uploads after a week; delete markers with nothing behind them dropped."""
    return {"ID": LIFECYCLE_RULE_ID, "Status": "Enabled", "Filter": {"Prefix": ""},
            "NoncurrentVersionExpiration": {"NoncurrentDays": noncurrent_days},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}}


def create_only_statement(bucket: str, prefix: str) -> dict[str, Any]:
    """Any PutObject under releases/ without `If-None-Match` is refused, whoever sends it: release objects
    are created, never replaced (the publisher sends the header, pipeline/publish/s3/upload.py)."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return {"Sid": CREATE_ONLY_SID, "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
            "Resource": f"arn:aws:s3:::{bucket}/{base}releases/*",
            "Condition": {"Null": {"s3:if-none-match": "true"}}}


def step_bucket(s3: Any, bucket: str, region: str, prefix: str = "", noncurrent_days: int = NONCURRENT_DAYS,
                dry: bool = False) -> None:
    """The release bucket: created in the home region, versioned, public access blocked, old versions
    expired, release objects create-only. Every setting is read first and written only if it differs."""
    try:
        s3.head_bucket(Bucket=bucket)
        exists = True
    except s3.exceptions.ClientError as e:
        if _code(e) not in ("404", "NoSuchBucket", "NotFound"):
            raise
        exists = False
    if not exists:
        where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        change(dry, f"bucket {bucket}: created in {region}", lambda: s3.create_bucket(Bucket=bucket, **where))
    if not exists and dry:
        for what in ("versioning enabled", "public access blocked",
                     f"old versions expire after {noncurrent_days} days", "release objects create-only"):
            log(f"would: bucket {bucket}: {what}")
        return
    if s3.get_bucket_versioning(Bucket=bucket).get("Status") != "Enabled":
        change(dry, f"bucket {bucket}: versioning enabled", lambda: s3.put_bucket_versioning(
            Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}))
    try:
        block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    except s3.exceptions.ClientError as e:
        if _code(e) != "NoSuchPublicAccessBlockConfiguration":
            raise
        block = {}
    if any(block.get(k) is not True for k in BLOCK_ALL):
        change(dry, f"bucket {bucket}: public access blocked", lambda: s3.put_public_access_block(
            Bucket=bucket, PublicAccessBlockConfiguration=BLOCK_ALL))
    try:
        rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", [])
    except s3.exceptions.ClientError as e:
        if _code(e) != "NoSuchLifecycleConfiguration":
            raise
        rules = []
    wanted = lifecycle_rule(noncurrent_days)
    ours = [r for r in rules if r.get("ID") == LIFECYCLE_RULE_ID]
    if len(ours) != 1 or not _subset(wanted, ours[0]):
        others = [r for r in rules if r.get("ID") != LIFECYCLE_RULE_ID]
        change(dry, f"bucket {bucket}: old versions expire after {noncurrent_days} days",
               lambda: s3.put_bucket_lifecycle_configuration(
                   Bucket=bucket, LifecycleConfiguration={"Rules": [*others, wanted]}))
    upsert_bucket_statement(s3, bucket, create_only_statement(bucket, prefix), "release objects create-only", dry)


def upsert_bucket_statement(s3: Any, bucket: str, statement: dict[str, Any], what: str, dry: bool = False) -> None:
    """One statement of the bucket policy (found by its Sid) added or replaced; others kept."""
    try:
        policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
    except s3.exceptions.ClientError as e:
        if _code(e) != "NoSuchBucketPolicy":
            raise
        policy = {"Version": "2012-10-17", "Statement": []}
    sid = statement["Sid"]
    if [s for s in policy.get("Statement", []) if s.get("Sid") == sid] == [statement]:
        return
    policy["Statement"] = [*[s for s in policy.get("Statement", []) if s.get("Sid") != sid], statement]
    change(dry, f"bucket {bucket}: {what}", lambda: s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy)))


# --- tables: recovery and protection ---------------------------------------------------------------


def step_table_protection(ddb: Any, table_prefix: str, dry: bool = False) -> None:
    """Point-in-time recovery on the key table (keys exist only as hashes: a lost table means re-issuing
    every key) and deletion protection on both tables. The counters table needs no recovery: it holds
    nothing but minute and month windows of the local server's DynamoDB mode."""
    keys, counters = f"{table_prefix}keys", f"{table_prefix}counters"
    missing = {keys, counters} - set(ddb.list_tables().get("TableNames", []))
    if missing and dry:
        log(f"would: tables {', '.join(sorted(missing))} created, with deletion protection; {keys} with "
            "point-in-time recovery")
        return
    for table in (keys, counters):
        if not ddb.describe_table(TableName=table)["Table"].get("DeletionProtectionEnabled"):
            change(dry, f"table {table}: deletion protection on", lambda t=table: ddb.update_table(
                TableName=t, DeletionProtectionEnabled=True))
    pitr = ddb.describe_continuous_backups(TableName=keys)["ContinuousBackupsDescription"]
    if pitr.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus") != "ENABLED":
        change(dry, f"table {keys}: point-in-time recovery on (35 days)", lambda: ddb.update_continuous_backups(
            TableName=keys, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}))


def step_backup(ddb: Any, table_prefix: str, stamp: str | None = None) -> str:
    """An on-demand backup of the key table (kept until deleted, unlike the 35 days of PITR); its ARN."""
    table = f"{table_prefix}keys"
    name = f"{table}-{stamp or time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    arn = str(ddb.create_backup(TableName=table, BackupName=name)["BackupDetails"]["BackupArn"])
    log(f"table {table}: backup {name} ({arn})")
    return arn


def step_restore(ddb: Any, table_prefix: str, backup_arn: str | None = None) -> str:
    """The key table restored from a backup into its own name, after it was lost; then protected again.

    DynamoDB restores only into a table that does not exist, so a table still there is refused
    (restore into another prefix instead and point the bundle at it: docs/runbook.md). Without an ARN
    the newest backup of the table is used: an on-demand one, or the system backup DynamoDB makes of a
    table with point-in-time recovery when it is deleted. Restored tables carry neither point-in-time
    recovery nor deletion protection: both are set again here.
    """
    table = f"{table_prefix}keys"
    if table in ddb.list_tables().get("TableNames", []):
        raise SystemExit(f"table {table} exists: DynamoDB restores only into a missing table; restore into "
                         "another prefix (--table-prefix) and rebuild the bundle with it (docs/runbook.md)")
    if backup_arn is None:
        backups = ddb.list_backups(TableName=table, BackupType="ALL").get("BackupSummaries", [])
        usable = [b for b in backups if b.get("BackupStatus") == "AVAILABLE"]
        if not usable:
            raise SystemExit(f"no backup of {table} to restore from (list_backups found none)")
        backup_arn = str(max(usable, key=lambda b: b["BackupCreationDateTime"])["BackupArn"])
    ddb.restore_table_from_backup(TargetTableName=table, BackupArn=backup_arn)
    ddb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 2, "MaxAttempts": 300})
    log(f"table {table}: restored from {backup_arn}")
    ddb.update_table(TableName=table, DeletionProtectionEnabled=True)
    ddb.update_continuous_backups(TableName=table,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    log(f"table {table}: deletion protection and point-in-time recovery on again")
    return backup_arn


# --- logs, metric filters, alarms -------------------------------------------------------------------

NAMESPACE = "MalariaRisk"
LOG_RETENTION_DAYS = 30
FIVE_XX_PERCENT = 5.0  # of the edge's decisions, over 5 minutes, two periods of three


def edge_log_groups(name: str) -> list[str]:
    """Lambda@Edge writes in each region that runs a replica, to a group named after us-east-1."""
    return [f"/aws/lambda/us-east-1.{name}-{event}" for event in HANDLERS]


def metric_filters(name: str) -> list[dict[str, Any]]:
    """Metrics from the edge's JSON lines (edge/accesslog.py): decisions weighted by their sample
    factor (so sampled successes still count fully), 5xx answers, and the function's own problems."""
    def mt(metric: str, value: str) -> list[dict[str, Any]]:
        return [{"metricName": metric, "metricNamespace": NAMESPACE, "metricValue": value, "defaultValue": 0.0}]

    return [
        {"filterName": f"{name}-decisions", "filterPattern": '{ $.event = "edge_decision" }',
         "metricTransformations": mt("EdgeDecisions", "$.sample")},
        {"filterName": f"{name}-5xx", "filterPattern": '{ $.event = "edge_decision" && $.status >= 500 }',
         "metricTransformations": mt("Edge5xx", "1")},
        {"filterName": f"{name}-problems", "filterPattern": '{ $.event = "edge_problem" }',
         "metricTransformations": mt("EdgeProblems", "1")},
    ]


def regional_alarms(name: str, topic_arn: str | None) -> list[dict[str, Any]]:
    """Alarms in each region that runs the function: its 5xx rate (from the log lines), its errors and
    throttles (Lambda's own metrics of the replica, named after us-east-1)."""
    actions = {"AlarmActions": [topic_arn], "OKActions": [topic_arn]} if topic_arn else {}
    common = {"EvaluationPeriods": 3, "DatapointsToAlarm": 2, "TreatMissingData": "notBreaching", **actions}
    fn = f"us-east-1.{name}-viewer-request"
    return [
        {"AlarmName": f"{name}-edge-5xx-rate", "AlarmDescription": f"over {FIVE_XX_PERCENT:g}% of the edge's answers "
         "are 5xx (docs/runbook.md#alarms)", "ComparisonOperator": "GreaterThanThreshold",
         "Threshold": FIVE_XX_PERCENT, "Metrics": [
             {"Id": "errors", "ReturnData": False, "MetricStat": {"Metric": {"Namespace": NAMESPACE,
              "MetricName": "Edge5xx"}, "Period": 300, "Stat": "Sum"}},
             {"Id": "all", "ReturnData": False, "MetricStat": {"Metric": {"Namespace": NAMESPACE,
              "MetricName": "EdgeDecisions"}, "Period": 300, "Stat": "Sum"}},
             {"Id": "rate", "ReturnData": True, "Label": "5xx %", "Expression": "100 * errors / MAX([all, 1])"}],
         **common},
        {"AlarmName": f"{name}-edge-function-errors", "AlarmDescription": "the viewer-request function failed "
         "(uncaught error or timeout)", "Namespace": "AWS/Lambda", "MetricName": "Errors",
         "Dimensions": [{"Name": "FunctionName", "Value": fn}], "Statistic": "Sum", "Period": 300,
         "ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 1.0, **common},
        {"AlarmName": f"{name}-edge-function-throttles", "AlarmDescription": "the viewer-request function was "
         "throttled (concurrency quota of the region)", "Namespace": "AWS/Lambda", "MetricName": "Throttles",
         "Dimensions": [{"Name": "FunctionName", "Value": fn}], "Statistic": "Sum", "Period": 300,
         "ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 1.0, **common},
    ]


def global_alarms(name: str, distribution_id: str, topic_arn: str | None) -> list[dict[str, Any]]:
    """CloudFront's own view, in us-east-1: 5xx rate of the distribution and Lambda@Edge errors and
    throttles as CloudFront counts them (every edge region in one metric)."""
    actions = {"AlarmActions": [topic_arn], "OKActions": [topic_arn]} if topic_arn else {}
    dims = [{"Name": "DistributionId", "Value": distribution_id}, {"Name": "Region", "Value": "Global"}]
    common = {"Namespace": "AWS/CloudFront", "Dimensions": dims, "Period": 300, "EvaluationPeriods": 3,
              "DatapointsToAlarm": 2, "TreatMissingData": "notBreaching", **actions}
    return [
        {"AlarmName": f"{name}-cdn-5xx-rate", "AlarmDescription": "CloudFront answers over "
         f"{FIVE_XX_PERCENT:g}% 5xx", "MetricName": "5xxErrorRate", "Statistic": "Average",
         "ComparisonOperator": "GreaterThanThreshold", "Threshold": FIVE_XX_PERCENT, **common},
        {"AlarmName": f"{name}-cdn-function-errors", "AlarmDescription": "Lambda@Edge execution errors",
         "MetricName": "LambdaExecutionError", "Statistic": "Sum",
         "ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 1.0, **common},
        {"AlarmName": f"{name}-cdn-function-throttles", "AlarmDescription": "Lambda@Edge throttled",
         "MetricName": "LambdaLimitExceededErrors", "Statistic": "Sum",
         "ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 1.0, **common},
    ]


def jobs_alarm(name: str, topic_arn: str | None) -> dict[str, Any]:
    """A scheduled job (refresh, canary, usage export) failed: CodeBuild's count of failed builds."""
    actions = {"AlarmActions": [topic_arn], "OKActions": [topic_arn]} if topic_arn else {}
    return {"AlarmName": f"{name}-jobs-failed", "AlarmDescription": "a scheduled job failed: its build log "
            "says which and why (docs/runbook.md#alarms)", "Namespace": "AWS/CodeBuild",
            "MetricName": "FailedBuilds", "Dimensions": [{"Name": "ProjectName", "Value": f"{name}-jobs"}],
            "Statistic": "Sum", "Period": 3600, "EvaluationPeriods": 1, "Threshold": 1.0,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching", **actions}


def step_topic(sns: Any, name: str, email: str | None, dry: bool = False) -> str | None:
    """The alarms' SNS topic in this region (creating it is idempotent), with an e-mail subscription."""
    topic = f"{name}-alarms"
    found = [t["TopicArn"] for t in sns.list_topics().get("Topics", []) if t["TopicArn"].endswith(f":{topic}")]
    arn = found[0] if found else change(dry, f"topic {topic}: created", lambda: sns.create_topic(Name=topic)["TopicArn"])
    if email and arn:
        subs = sns.list_subscriptions_by_topic(TopicArn=arn).get("Subscriptions", [])
        if not any(s.get("Endpoint") == email for s in subs):
            change(dry, f"topic {topic}: {email} subscribed (confirm by e-mail)", lambda: sns.subscribe(
                TopicArn=arn, Protocol="email", Endpoint=email))
    return str(arn) if arn else None


def step_log_group(logs: Any, group: str, retention_days: int, dry: bool = False) -> None:
    found = [g for g in logs.describe_log_groups(logGroupNamePrefix=group).get("logGroups", [])
             if g["logGroupName"] == group]
    if not found:
        change(dry, f"log group {group}: created", lambda: logs.create_log_group(logGroupName=group))
    if not found or found[0].get("retentionInDays") != retention_days:
        change(dry, f"log group {group}: kept {retention_days} days", lambda: logs.put_retention_policy(
            logGroupName=group, retentionInDays=retention_days))


def step_edge_logs(logs: Any, name: str, retention_days: int = LOG_RETENTION_DAYS, dry: bool = False) -> None:
    """In one region: the function's log groups made ahead of its first run there (so retention applies
    from the first line; Lambda would create them without one, kept forever) and the metric filters."""
    for group in edge_log_groups(name):
        step_log_group(logs, group, retention_days, dry)
    group = edge_log_groups(name)[0]  # decisions are logged by the viewer-request function only
    have = {f["filterName"]: f for f in logs.describe_metric_filters(logGroupName=group).get("metricFilters", [])}
    for f in metric_filters(name):
        got = have.get(f["filterName"])
        if got is None or not _subset(f, got):
            change(dry, f"log group {group}: metric filter {f['filterName']}", lambda f=f: logs.put_metric_filter(
                logGroupName=group, **f))


def step_alarms(cw: Any, alarms: list[dict[str, Any]], dry: bool = False) -> None:
    names = [a["AlarmName"] for a in alarms]
    have = {a["AlarmName"]: a for a in cw.describe_alarms(AlarmNames=names).get("MetricAlarms", [])}
    for alarm in alarms:
        got = have.get(alarm["AlarmName"])
        if got is None or not _subset(alarm, got):
            change(dry, f"alarm {alarm['AlarmName']}: {'updated' if got else 'created'}",
                   lambda a=alarm: cw.put_metric_alarm(**a))


# --- the schedule: refresh, usage export and canary as CodeBuild builds started by EventBridge ---------

JOBS_IMAGE = "aws/codebuild/standard:7.0"  # Ubuntu 22.04 with Python 3.11 and the AWS CLI
JOBS_TIMEOUT_MIN = 30
CANARY_KEY_PARAMETER = "/{name}/canary-key"  # SecureString: an API key with every scope (docs/monitoring.md)
SCHEDULES = {
    # job: (schedule expression, why this time)
    "refresh": ("cron(0 5 * * ? *)", "daily 05:00 UTC: a new month is picked up within a day of its "
                "publication; an unchanged source builds and publishes nothing"),
    "usage-export": ("cron(30 0 1-7 * ? *)", "00:30 UTC on days 1–7: last month's totals, long before "
                     "its counters are removed (at the key's first request two months on)"),
    "canary": ("rate(1 hour)", "hourly: staleness and a sample of routes, status.json"),
}
BUILDSPEC = """version: 0.2
env:
  shell: bash
phases:
  install:
    runtime-versions:
      python: 3.11
    commands:
      - python -m venv /tmp/venv && /tmp/venv/bin/pip install -q .
  build:
    commands:
      - PATH=/tmp/venv/bin:$PATH bash deploy/job.sh "$JOB"
cache:
  paths:
    - /root/.cache/pip/**/*
    - build/**/*
"""


def ops_prefix(prefix: str) -> str:
    base = prefix.strip("/")
    return f"{base}/ops" if base else "ops"


def jobs_trust() -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                   "Principal": {"Service": "codebuild.amazonaws.com"}}]}


def events_trust() -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                   "Principal": {"Service": "events.amazonaws.com"}}]}


def jobs_policy(name: str, bucket: str, prefix: str, table_prefix: str, region: str) -> dict[str, Any]:
    """What the scheduled jobs may do, and nothing else: publish releases and the pointer under the
    prefix (create-only objects: no s3:DeleteObject on releases except through `release prune`, which is
    not scheduled), read and write the data directory, the build cache and the usage exports under
    ops/, write status.json, read the key table (usage export: Scan), read the canary's key, log."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    ops = ops_prefix(prefix)
    b = f"arn:aws:s3:::{bucket}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": b,
         "Condition": {"StringLike": {"s3:prefix": [f"{base}*"] if base else ["*"]}}},
        {"Sid": "SourceAndCacheBucket", "Effect": "Allow",  # CodeBuild checks the bucket of its source and cache
         "Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"], "Resource": b},
        {"Sid": "PublishReleases", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": [f"{b}/{base}releases/*", f"{b}/{base}current.json"]},
        {"Sid": "RepairDamagedReleaseObjects", "Effect": "Allow", "Action": "s3:DeleteObject",
         "Resource": f"{b}/{base}releases/*"},
        {"Sid": "OpsFiles", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": [f"{b}/{ops}/*", f"{b}/{base}status/status.json"]},
        {"Sid": "UsageExport", "Effect": "Allow", "Action": "dynamodb:Scan",
         "Resource": f"arn:aws:dynamodb:{region}:*:table/{table_prefix}keys"},
        {"Sid": "CanaryKey", "Effect": "Allow", "Action": "ssm:GetParameters",
         "Resource": f"arn:aws:ssm:{region}:*:parameter{CANARY_KEY_PARAMETER.format(name=name)}"},
        {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": f"arn:aws:logs:{region}:*:log-group:/aws/codebuild/{name}-jobs:*"},
    ]}


def ensure_role(iam: Any, role: str, trust: dict[str, Any], policy: dict[str, Any], description: str,
                dry: bool = False) -> str:
    """A role with exactly this trust and this one inline policy; its ARN (a placeholder in a dry run
    of a role that does not exist yet)."""
    try:
        got = iam.get_role(RoleName=role)["Role"]
    except iam.exceptions.NoSuchEntityException:
        made = change(dry, f"role {role}: created", lambda: iam.create_role(
            RoleName=role, AssumeRolePolicyDocument=json.dumps(trust), Description=description))
        if made is None:
            log(f"would: role {role}: permissions set")
            return f"arn:aws:iam::000000000000:role/{role}"
        got = made["Role"]
    current = got.get("AssumeRolePolicyDocument")
    if (json.loads(current) if isinstance(current, str) else current) != trust:
        change(dry, f"role {role}: trust policy updated", lambda: iam.update_assume_role_policy(
            RoleName=role, PolicyDocument=json.dumps(trust)))
    try:
        doc = iam.get_role_policy(RoleName=role, PolicyName="jobs")["PolicyDocument"]
        same = (json.loads(doc) if isinstance(doc, str) else doc) == policy
    except iam.exceptions.NoSuchEntityException:
        same = False
    if not same:
        change(dry, f"role {role}: permissions set", lambda: iam.put_role_policy(
            RoleName=role, PolicyName="jobs", PolicyDocument=json.dumps(policy)))
    return str(got["Arn"])


def project_config(name: str, role_arn: str, bucket: str, prefix: str, table_prefix: str, region: str,
                   base_url: str, max_lag_days: int) -> dict[str, Any]:
    """The CodeBuild project running every job: source is the code zip `deploy/aws.py source` put in the
    bucket; the job's name comes from each schedule's JOB override. The build root is carried from run to
    run in CodeBuild's S3 cache, so an unchanged refresh recognises the current release and builds nothing."""
    ops = ops_prefix(prefix)

    def env(k: str, v: str, kind: str = "PLAINTEXT") -> dict[str, str]:
        return {"name": k, "value": v, "type": kind}

    return {
        "name": f"{name}-jobs",
        "description": "malaria-risk scheduled jobs: refresh, usage-export, canary (deploy/job.sh)",
        "source": {"type": "S3", "location": f"{bucket}/{ops}/source.zip", "buildspec": BUILDSPEC},
        "artifacts": {"type": "NO_ARTIFACTS"},
        "cache": {"type": "S3", "location": f"{bucket}/{ops}/cache"},
        "environment": {"type": "LINUX_CONTAINER", "image": JOBS_IMAGE, "computeType": "BUILD_GENERAL1_SMALL",
                        "environmentVariables": [
                            env("JOB", "refresh"), env("BUCKET", bucket), env("PREFIX", prefix.strip("/")),
                            env("TABLE_PREFIX", table_prefix), env("MALARIA_RISK_REGION", region),
                            env("BASE_URL", base_url), env("MAX_LAG_DAYS", str(max_lag_days)),
                            env("CANARY_KEY", CANARY_KEY_PARAMETER.format(name=name), "PARAMETER_STORE")]},
        "serviceRole": role_arn,
        "timeoutInMinutes": JOBS_TIMEOUT_MIN,
        "logsConfig": {"cloudWatchLogs": {"status": "ENABLED", "groupName": f"/aws/codebuild/{name}-jobs"}},
    }


def step_project(cb: Any, config: dict[str, Any], dry: bool = False) -> str:
    """Created, or updated only where it differs from `config`; its ARN."""
    found = cb.batch_get_projects(names=[config["name"]]).get("projects", [])
    if not found:
        made = change(dry, f"project {config['name']}: created", lambda: cb.create_project(**config))
        return str(made["project"]["arn"]) if made else f"arn:aws:codebuild:::project/{config['name']}"
    if not _subset(config, found[0]):
        change(dry, f"project {config['name']}: updated", lambda: cb.update_project(**config))
    return str(found[0]["arn"])


def step_rules(events: Any, name: str, project_arn: str, role_arn: str, dry: bool = False) -> None:
    """One EventBridge rule per job, each starting the project with its JOB."""
    for job, (expression, why) in SCHEDULES.items():
        rule = f"{name}-{job}"
        try:
            got = events.describe_rule(Name=rule)
        except events.exceptions.ResourceNotFoundException:
            got = None
        description = f"malaria-risk {job}: {why}"
        if got is None or (got.get("ScheduleExpression"), got.get("State"), got.get("Description")) != (
                expression, "ENABLED", description):
            change(dry, f"rule {rule}: {expression}", lambda r=rule, e=expression, d=description: events.put_rule(
                Name=r, ScheduleExpression=e, State="ENABLED", Description=d))
        target = {"Id": "jobs", "Arn": project_arn, "RoleArn": role_arn, "Input": json.dumps(
            {"environmentVariablesOverride": [{"name": "JOB", "value": job, "type": "PLAINTEXT"}]})}
        targets = [] if got is None else events.list_targets_by_rule(Rule=rule).get("Targets", [])
        if targets != [target]:
            change(dry, f"rule {rule}: starts {project_arn.rsplit('/', 1)[-1]} with JOB={job}",
                   lambda r=rule, t=target: events.put_targets(Rule=r, Targets=[t]))


def step_schedule(iam: Any, cb: Any, events: Any, logs: Any, name: str, bucket: str, prefix: str,
                  table_prefix: str, region: str, base_url: str, max_lag_days: int = 60,
                  retention_days: int = LOG_RETENTION_DAYS, dry: bool = False) -> str:
    """Roles, log group, project and rules of the scheduled jobs; the project's ARN."""
    role_arn = ensure_role(iam, f"{name}-jobs", jobs_trust(),
                           jobs_policy(name, bucket, prefix, table_prefix, region),
                           "malaria-risk scheduled jobs (CodeBuild)", dry)
    step_log_group(logs, f"/aws/codebuild/{name}-jobs", retention_days, dry)
    project_arn = step_project(cb, project_config(name, role_arn, bucket, prefix, table_prefix, region, base_url,
                                                  max_lag_days), dry)
    start = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "codebuild:StartBuild",
                                                     "Resource": project_arn}]}
    events_role = ensure_role(iam, f"{name}-schedule", events_trust(), start,
                              "malaria-risk: EventBridge starts the scheduled jobs", dry)
    step_rules(events, name, project_arn, events_role, dry)
    return project_arn


def step_source(s3: Any, bucket: str, prefix: str, ref: str = "HEAD", dry: bool = False) -> str:
    """The committed tree at `ref` as the jobs' source zip (`git archive`: nothing uncommitted, nothing
    ignored, no data files), uploaded only when it differs."""
    import subprocess

    body = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=zip", ref], check=True,
                          capture_output=True).stdout
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], check=True, capture_output=True,
                            text=True).stdout.strip()
    key = f"{ops_prefix(prefix)}/source.zip"
    try:
        same = s3.head_object(Bucket=bucket, Key=key).get("Metadata", {}).get("commit") == commit
    except s3.exceptions.ClientError:
        same = False
    if not same:
        change(dry, f"s3://{bucket}/{key}: source at {commit[:12]}", lambda: s3.put_object(
            Bucket=bucket, Key=key, Body=body, Metadata={"commit": commit}))
    return commit


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
