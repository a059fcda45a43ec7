"""deploy/'s production defaults, monitoring and schedule against moto's server on 127.0.0.1.

Every step runs twice (the second run changes nothing) and a dry run before and after (the one
before lists every change and makes none; the one after lists nothing). What moto cannot show
is listed in docs/monitoring.md: IAM and bucket policies are stored, never evaluated; alarms
never fire; EventBridge never starts CodeBuild; CodeBuild never runs a build.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from deploy import aws, monitoring, schedule, storage
from edge.keys import hash_key
from edge.stores.dynamodb import DynamoDBKeyStore

from .conftest import CREDS

REGION = "eu-west-1"
_n = itertools.count()


def client(endpoint: str, service: str, region: str = REGION) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=endpoint, region_name=region,
                        aws_access_key_id=CREDS["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=CREDS["AWS_SECRET_ACCESS_KEY"])


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_bucket_and_tables_are_safe_by_default_and_a_second_run_changes_nothing(
        endpoint: str, capsys: pytest.CaptureFixture[str]):
    n = next(_n)
    bucket, prefix = f"safe-{n}", f"s{n}-"
    s3, ddb = client(endpoint, "s3"), client(endpoint, "dynamodb")

    storage.step_bucket(s3, bucket, REGION, "api", dry=True)
    storage.step_table_protection(ddb, prefix, dry=True)
    planned = lines(capsys)
    assert planned and all(line.startswith("would: ") for line in planned)
    assert any("created" in line for line in planned) and any("create-only" in line for line in planned)
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]  # the dry run changed nothing

    def run() -> list[str]:
        storage.step_bucket(s3, bucket, REGION, "api")
        aws.step_tables(ddb, prefix)
        storage.step_table_protection(ddb, prefix)
        return [line for line in lines(capsys) if not line.startswith("tables ready")]

    first = run()
    assert any("versioning" in line for line in first) and any("point-in-time" in line for line in first)
    assert run() == []  # describe before update: nothing left to change
    storage.step_bucket(s3, bucket, REGION, "api", dry=True)
    storage.step_table_protection(ddb, prefix, dry=True)
    assert lines(capsys) == []

    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == REGION
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == storage.BLOCK_ALL
    (rule,) = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == storage.NONCURRENT_DAYS
    (statement,) = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"]
    assert statement["Effect"] == "Deny" and statement["Resource"] == [f"arn:aws:s3:::{bucket}/api/releases/*",
                                                                       f"arn:aws:s3:::{bucket}/api/objects/*"]
    assert statement["Condition"] == {"Null": {"s3:if-none-match": "true"}}

    for table in (f"{prefix}keys", f"{prefix}counters"):
        assert ddb.describe_table(TableName=table)["Table"]["DeletionProtectionEnabled"] is True
        with pytest.raises(ddb.exceptions.ClientError, match="DeletionProtection"):
            ddb.delete_table(TableName=table)
    pitr = ddb.describe_continuous_backups(TableName=f"{prefix}keys")["ContinuousBackupsDescription"]
    assert pitr["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"

    # a replaced object keeps its old version; the lifecycle rule removes it after NONCURRENT_DAYS
    s3.put_object(Bucket=bucket, Key="api/current.json", Body=b"1")
    s3.put_object(Bucket=bucket, Key="api/current.json", Body=b"2")
    versions = s3.list_object_versions(Bucket=bucket, Prefix="api/current.json")["Versions"]
    assert len(versions) == 2


def test_the_key_table_is_restored_from_a_backup_after_it_is_lost(endpoint: str, release_root: Path,
                                                                   capsys: pytest.CaptureFixture[str]):
    from edge.gate import Request, handle
    from edge.release import LocalReleases
    from tests.conftest import NOW

    prefix = f"r{next(_n)}-"
    ddb = client(endpoint, "dynamodb")
    store = DynamoDBKeyStore(ddb, prefix)
    store.create_tables()
    storage.step_table_protection(ddb, prefix)
    kid, key = store.create("partner", ["risk_scores"], "live", org="ngo", now=NOW)
    arn = storage.step_backup(ddb, prefix, stamp="20261122T120000Z")
    store.create("after the backup", ["risk_scores"], "test", now=NOW)

    with pytest.raises(SystemExit, match="exists"):  # never over a table that is still there
        storage.step_restore(ddb, prefix)

    # the loss: protection must be switched off first, so it takes two deliberate calls
    ddb.update_table(TableName=f"{prefix}keys", DeletionProtectionEnabled=False)
    ddb.delete_table(TableName=f"{prefix}keys")
    assert f"{prefix}keys" not in ddb.list_tables()["TableNames"]

    assert storage.step_restore(ddb, prefix) == arn  # the newest backup, found without being named
    restored = DynamoDBKeyStore(ddb, prefix)
    record = restored.lookup(hash_key(key))
    assert record is not None and record.id == kid and record.org == "ngo"
    assert [r["name"] for r in restored.list(NOW)] == ["partner"]  # as of the backup
    release = LocalReleases(release_root).current()
    req = Request("GET", "/v1/periods", "", {"authorization": f"Bearer {key}"})
    assert handle(req, NOW, restored, release).status == 200
    table = ddb.describe_table(TableName=f"{prefix}keys")["Table"]
    assert table["DeletionProtectionEnabled"] is True
    from edge.stores.dynamodb import ID_INDEX, ORG_INDEX, OWNER_INDEX

    # every index comes back with the table: the admin's and the dashboard's sparse holder indexes
    assert sorted(i["IndexName"] for i in table["GlobalSecondaryIndexes"]) == sorted([ID_INDEX, ORG_INDEX, OWNER_INDEX])
    pitr = ddb.describe_continuous_backups(TableName=f"{prefix}keys")["ContinuousBackupsDescription"]
    assert pitr["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    restored.revoke(kid, NOW)  # the admin index works on the restored table
    assert restored.lookup(hash_key(key)).revoked


def test_logs_metric_filters_and_alarms_twice(endpoint: str, capsys: pytest.CaptureFixture[str]):
    name = f"mon{next(_n)}"
    logs, cw, sns = client(endpoint, "logs"), client(endpoint, "cloudwatch"), client(endpoint, "sns")

    def run(dry: bool = False) -> list[str]:
        topic = monitoring.step_topic(sns, name, "ops@example.org", dry)
        monitoring.step_edge_logs(logs, name, 30, dry)
        monitoring.step_alarms(cw, monitoring.regional_alarms(name, topic) + [monitoring.jobs_alarm(name, topic)], dry)
        monitoring.step_alarms(cw, monitoring.global_alarms(name, "E2EXAMPLE", topic), dry)
        return lines(capsys)

    planned = run(dry=True)
    assert planned and all(line.startswith("would: ") for line in planned)
    assert cw.describe_alarms(AlarmNamePrefix=name)["MetricAlarms"] == []
    first = run()
    assert len([line for line in first if line.startswith("alarm ")]) == 7
    assert run() == [] and run(dry=True) == []

    groups = {g["logGroupName"]: g for g in logs.describe_log_groups(logGroupNamePrefix="/aws/lambda/us-east-1."
                                                                                       f"{name}-")["logGroups"]}
    assert sorted(groups) == sorted(monitoring.edge_log_groups(name))
    assert {g["retentionInDays"] for g in groups.values()} == {30}
    filters = logs.describe_metric_filters(logGroupName=monitoring.edge_log_groups(name)[0])["metricFilters"]
    assert {f["filterName"] for f in filters} == {f"{name}-decisions", f"{name}-5xx", f"{name}-problems"}
    alarms = {a["AlarmName"]: a for a in cw.describe_alarms(AlarmNamePrefix=name)["MetricAlarms"]}
    assert set(alarms) == {f"{name}-{x}" for x in ("edge-5xx-rate", "edge-function-errors",
                                                   "edge-function-throttles", "jobs-failed", "cdn-5xx-rate",
                                                   "cdn-function-errors", "cdn-function-throttles")}
    topic_arn = sns.list_topics()["Topics"]
    assert all(a["AlarmActions"] and a["AlarmActions"][0] in [t["TopicArn"] for t in topic_arn]
               for a in alarms.values())
    throttles = alarms[f"{name}-edge-function-throttles"]
    assert (throttles["Namespace"], throttles["MetricName"]) == ("AWS/Lambda", "Throttles")
    assert throttles["Dimensions"] == [{"Name": "FunctionName", "Value": f"us-east-1.{name}-viewer-request"}]


def test_the_metric_filters_match_the_edge_log_lines():
    """The filters' JSON patterns against lines the edge's one formatter writes (edge/accesslog.py)."""
    from edge.accesslog import AccessLog, event_line
    from edge.gate import Response, error

    log = AccessLog(lambda _t: None, ok_every=10)
    ok = json.loads(log.line("GET", "/v1/periods", Response(200, []), "r1", 2.0, sample=10))
    bad = json.loads(log.line("GET", "/v1/periods", error("TEMPORARILY_UNAVAILABLE", "x", "/v1/periods"), "r1", 9.0))
    problem = json.loads(event_line("edge_problem", what="key store unavailable"))
    patterns = {f["filterName"].rsplit("-", 1)[1]: f for f in monitoring.metric_filters("n")}
    # the patterns select on the fields the formatter writes, with these values
    assert '$.event = "edge_decision"' in patterns["decisions"]["filterPattern"]
    assert patterns["decisions"]["metricTransformations"][0]["metricValue"] == "$.sample"
    assert (ok["event"], ok["sample"], bad["event"], bad["status"]) == ("edge_decision", 10, "edge_decision", 503)
    assert "$.status >= 500" in patterns["5xx"]["filterPattern"] and ok["status"] < 500
    assert problem["event"] == "edge_problem" and '"edge_problem"' in patterns["problems"]["filterPattern"]


def test_the_schedule_dry_run_changes_nothing_then_deploys_twice(endpoint: str,
                                                                 capsys: pytest.CaptureFixture[str]):
    name = f"sched{next(_n)}"
    iam, cb, events, logs = (client(endpoint, s) for s in ("iam", "codebuild", "events", "logs"))

    def run(dry: bool = False) -> str:
        return schedule.step_schedule(iam, cb, events, logs, name, "sched-bucket", "api", "mr-", REGION,
                                    "https://api.example.org", 60, 30, dry)

    run(dry=True)
    planned = lines(capsys)
    assert planned and all(line.startswith("would: ") for line in planned)
    assert any(f"project {name}-jobs: created" in line for line in planned)
    assert sum(line.startswith(f"would: rule {name}-") and "starts" in line for line in planned) == 3
    assert cb.batch_get_projects(names=[f"{name}-jobs"])["projects"] == []
    assert not [r for r in events.list_rules(NamePrefix=name)["Rules"]]
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_role(RoleName=f"{name}-jobs")

    arn = run()
    assert any("created" in line for line in lines(capsys))
    assert run() == arn and lines(capsys) == []
    run(dry=True)
    assert lines(capsys) == []

    (project,) = cb.batch_get_projects(names=[f"{name}-jobs"])["projects"]
    env = {v["name"]: v for v in project["environment"]["environmentVariables"]}
    assert env["MALARIA_RISK_REGION"]["value"] == REGION and env["CANARY_KEY"]["type"] == "PARAMETER_STORE"
    assert "deploy/job.sh" in project["source"]["buildspec"]
    rules = {r["Name"]: r for r in events.list_rules(NamePrefix=name)["Rules"]}
    assert {k: v["ScheduleExpression"] for k, v in rules.items()} == {
        f"{name}-{job}": expr for job, (expr, _) in schedule.SCHEDULES.items()}
    for job in schedule.SCHEDULES:
        (target,) = events.list_targets_by_rule(Rule=f"{name}-{job}")["Targets"]
        assert target["Arn"] == arn
        assert json.loads(target["Input"])["environmentVariablesOverride"] == [
            {"name": "JOB", "value": job, "type": "PLAINTEXT"}]
    # least privilege: no wildcard action, deletes only of release objects, the key table read by Scan only
    policy = iam.get_role_policy(RoleName=f"{name}-jobs", PolicyName="jobs")["PolicyDocument"]
    statements = (json.loads(policy) if isinstance(policy, str) else policy)["Statement"]
    actions = [a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]
    assert not any("*" in a for a in actions)
    assert [s["Resource"] for s in statements if "s3:DeleteObject" in s["Action"]] == [
        ["arn:aws:s3:::sched-bucket/api/releases/*", "arn:aws:s3:::sched-bucket/api/objects/*"],
        "arn:aws:s3:::sched-bucket/api/ops/state/objects/*"]  # superseded fit cache entries of the job's state
    # the job's cache carries pip's downloads, never the build root (its state is kept, hash-checked, in
    # the bucket: tests/pipeline/publish/test_job_state.py)
    assert "build/" not in schedule.BUILDSPEC
    assert [s["Action"] for s in statements if "dynamodb" in json.dumps(s["Action"])] == ["dynamodb:Scan"]
    start = iam.get_role_policy(RoleName=f"{name}-schedule", PolicyName="jobs")["PolicyDocument"]
    start = json.loads(start) if isinstance(start, str) else start
    assert start["Statement"] == [{"Effect": "Allow", "Action": "codebuild:StartBuild", "Resource": arn}]


def test_the_deploy_needs_the_region_and_a_bundle_of_the_same_region(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]):
    from deploy.build_bundle import build_bundle

    monkeypatch.delenv("MALARIA_RISK_REGION", raising=False)
    with pytest.raises(SystemExit) as e:
        aws.main(["tables", "--table-prefix", "x-"])
    assert e.value.code == 2 and "MALARIA_RISK_REGION" in capsys.readouterr().err
    bundle = tmp_path / "edge.zip"
    build_bundle(bundle, {"bucket": "bucket-b", "table_prefix": "x-", "region": "eu-west-1"})
    with pytest.raises(SystemExit) as e:
        aws.main(["function", "--region", "eu-west-2", "--role-arn", "arn:aws:iam::1:role/r",
                     "--bundle", str(bundle)])
    assert e.value.code == 2 and "built for region 'eu-west-1'" in capsys.readouterr().err
