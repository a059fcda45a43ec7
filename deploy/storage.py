"""The release bucket and the key table, safe by default: versioning, private, create-only releases,
point-in-time recovery, deletion protection, backup and restore (docs/runbook.md)."""

from __future__ import annotations

import json
import time
from typing import Any

from deploy.common import change, error_code, log, subset

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
    """Any PutObject (a CopyObject too) under releases/ or objects/ without `If-None-Match` is refused,
    whoever sends it: release files and stored objects are created, never replaced (the publisher sends
    the header, pipeline/publish/s3/upload.py)."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return {"Sid": CREATE_ONLY_SID, "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
            "Resource": [f"arn:aws:s3:::{bucket}/{base}releases/*", f"arn:aws:s3:::{bucket}/{base}objects/*"],
            "Condition": {"Null": {"s3:if-none-match": "true"}}}


def step_bucket(s3: Any, bucket: str, region: str, prefix: str = "", noncurrent_days: int = NONCURRENT_DAYS,
                dry: bool = False) -> None:
    """The release bucket: created in the home region, versioned, public access blocked, old versions
    expired, release objects create-only. Every setting is read first and written only if it differs."""
    try:
        s3.head_bucket(Bucket=bucket)
        exists = True
    except s3.exceptions.ClientError as e:
        if error_code(e) not in ("404", "NoSuchBucket", "NotFound"):
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
        if error_code(e) != "NoSuchPublicAccessBlockConfiguration":
            raise
        block = {}
    if any(block.get(k) is not True for k in BLOCK_ALL):
        change(dry, f"bucket {bucket}: public access blocked", lambda: s3.put_public_access_block(
            Bucket=bucket, PublicAccessBlockConfiguration=BLOCK_ALL))
    try:
        rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", [])
    except s3.exceptions.ClientError as e:
        if error_code(e) != "NoSuchLifecycleConfiguration":
            raise
        rules = []
    wanted = lifecycle_rule(noncurrent_days)
    ours = [r for r in rules if r.get("ID") == LIFECYCLE_RULE_ID]
    if len(ours) != 1 or not subset(wanted, ours[0]):
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
        if error_code(e) != "NoSuchBucketPolicy":
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
