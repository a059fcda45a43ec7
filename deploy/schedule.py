"""The schedule: refresh, usage export and canary as CodeBuild builds started by EventBridge rules, with
least-privilege roles and a dry run (docs/monitoring.md#the-schedule)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from deploy.common import change, log, subset
from deploy.monitoring import LOG_RETENTION_DAYS, step_log_group

ROOT = Path(__file__).resolve().parents[1]


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
    prefix (create-only objects: no s3:DeleteObject on releases except through `release prune`, which the
    refresh job runs after a good run, and the repair of a damaged object), read and write the data
    directory, the build state and the usage exports under ops/ (delete only the build state's
    superseded fit cache entries), write status.json, read the key table (usage export: Scan), read the
    canary's key, log. The stored objects (`objects/`) are written by the same publish as the release keys."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    ops = ops_prefix(prefix)
    b = f"arn:aws:s3:::{bucket}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": b,
         "Condition": {"StringLike": {"s3:prefix": [f"{base}*"] if base else ["*"]}}},
        {"Sid": "SourceAndCacheBucket", "Effect": "Allow",  # CodeBuild checks the bucket of its source and cache
         "Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"], "Resource": b},
        {"Sid": "PublishReleases", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": [f"{b}/{base}releases/*", f"{b}/{base}objects/*", f"{b}/{base}current.json",
                      f"{b}/{base}releases.json"]},
        {"Sid": "RepairDamagedReleaseObjects", "Effect": "Allow", "Action": "s3:DeleteObject",
         "Resource": [f"{b}/{base}releases/*", f"{b}/{base}objects/*"]},
        {"Sid": "OpsFiles", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": [f"{b}/{ops}/*", f"{b}/{base}status/status.json"]},
        {"Sid": "SupersededBuildState", "Effect": "Allow", "Action": "s3:DeleteObject",
         "Resource": f"{b}/{ops}/state/objects/*"},
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
    bucket; the job's name comes from each schedule's JOB override. The build root is not carried from run
    to run (the cache holds pip's downloads only): `refresh --state` keeps what the next run needs in the
    bucket instead (the fit cache and the live release's build key under ops/state/, hash-checked on
    restore), so an unchanged day builds and publishes nothing and a new month refits only what changed
    (docs/operations.md#the-jobs-state)."""
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
    if not subset(config, found[0]):
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
