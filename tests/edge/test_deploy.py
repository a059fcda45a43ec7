"""deploy/aws.py against moto's server on 127.0.0.1: every step run twice, the second changing nothing.

What moto cannot show (listed in docs/deploy.md): response headers policies (not
implemented), CloudFront actually running the functions or replicating them, Lambda
checking the runtime or the edgelambda trust, real IAM evaluation of the policies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy import aws as deploy
from deploy.build_bundle import build_bundle

from .conftest import boto_client


def test_every_step_twice_changes_nothing_the_second_time(endpoint: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]):
    iam, ddb, lam = (boto_client(endpoint, s) for s in ("iam", "dynamodb", "lambda"))
    cf, s3 = boto_client(endpoint, "cloudfront"), boto_client(endpoint, "s3")
    s3.create_bucket(Bucket="deploy-releases")
    s3.put_bucket_policy(Bucket="deploy-releases", Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "Other", "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteBucket",
         "Resource": "arn:aws:s3:::deploy-releases"}]}))
    bundle = tmp_path / "edge.zip"
    build_bundle(bundle, {"bucket": "deploy-releases", "table_prefix": "dp-", "prefix": "api", "region": "eu-west-1"})

    def run() -> tuple[str, dict[str, str], tuple[str, str, str]]:
        policy = deploy.role_policy("mr", "deploy-releases", "api", "dp-", "eu-west-1")
        role = deploy.step_role(iam, "mr", policy)
        deploy.step_tables(ddb, "dp-")
        arns = deploy.step_function(lam, "mr", role, bundle)
        oac = deploy.step_oac(cf, "mr")
        dist = deploy.step_distribution(cf, "mr", "deploy-releases", "eu-west-1", arns, oac, None, "api")
        deploy.step_bucket_policy(s3, "deploy-releases", "api", dist[1])
        return role, arns, dist

    first = run()
    first_log = capsys.readouterr().out
    assert "created" in first_log and "published" in first_log
    second = run()
    second_log = capsys.readouterr().out
    assert second == first  # same role, same function versions, same distribution
    assert "created" not in second_log and "published" not in second_log
    # moto keeps neither a behaviour's Lambda associations nor an origin's access control id, so
    # the distribution step finds them missing and sends them again; every other step is quiet
    updated = [line for line in second_log.splitlines() if "updated" in line]
    assert updated == [f"distribution {first[2][0]}: updated"]
    stored = cf.get_distribution_config(Id=first[2][0])["DistributionConfig"]
    assert stored["DefaultCacheBehavior"]["LambdaFunctionAssociations"]["Quantity"] == 0

    role, arns, (dist_id, dist_arn, _) = first
    assert arns["viewer-request"].endswith(":1") and arns["viewer-response"].endswith(":1")
    fn = lam.get_function(FunctionName="mr-viewer-request")["Configuration"]
    assert (fn["Handler"], fn["MemorySize"], fn["Timeout"]) == ("edge.cloudfront.handler", 128, 5)
    assert fn["Runtime"] == deploy.bundle_runtime(bundle)
    trust = iam.get_role(RoleName="mr-role")["Role"]["AssumeRolePolicyDocument"]
    assert "edgelambda.amazonaws.com" in json.dumps(trust)
    actions = json.dumps(iam.get_role_policy(RoleName="mr-role", PolicyName="edge")["PolicyDocument"])
    assert "dynamodb:UpdateItem" in actions and "s3:GetObject" in actions and "BatchGetItem" not in actions
    assert "api/releases/*/index/*" in actions and "api/objects/*" in actions and "ops/" not in actions
    config = cf.get_distribution_config(Id=dist_id)["DistributionConfig"]
    behaviour = config["DefaultCacheBehavior"]
    # CloudFront compresses: the index layout stores no gzip twins (CachingOptimized keys on the encoding)
    assert behaviour["CachePolicyId"] == deploy.CACHING_OPTIMIZED and behaviour["Compress"] is True
    assert behaviour["ViewerProtocolPolicy"] == "https-only"
    assert config["Origins"]["Items"][0]["DomainName"] == "deploy-releases.s3.eu-west-1.amazonaws.com"
    # the canary's status.json: its own origin under <prefix>/status, no function, keyless
    status_origin = {o["Id"]: o for o in config["Origins"]["Items"]}["mr-status"]
    assert status_origin["OriginPath"] == "/api/status"
    (status,) = config["CacheBehaviors"]["Items"]
    assert (status["PathPattern"], status["TargetOriginId"]) == ("/status.json", "mr-status")
    assert status["LambdaFunctionAssociations"]["Quantity"] == 0
    policy = json.loads(s3.get_bucket_policy(Bucket="deploy-releases")["Policy"])
    sids = [s["Sid"] for s in policy["Statement"]]
    assert sids == ["Other", deploy.BUCKET_POLICY_SID]  # another statement is kept
    ours = policy["Statement"][1]
    # the stored objects (index layout) and a copy-layout release's keys; never ops/ (the job's state)
    assert ours["Resource"] == ["arn:aws:s3:::deploy-releases/api/releases/*",
                                "arn:aws:s3:::deploy-releases/api/objects/*",
                                "arn:aws:s3:::deploy-releases/api/status/status.json"]
    assert ours["Condition"]["StringEquals"]["AWS:SourceArn"] == dist_arn

    # a new bundle publishes new versions and moves the distribution to them
    build_bundle(bundle, {"bucket": "deploy-releases", "table_prefix": "dp-", "prefix": "api", "per_minute": 61,
                          "region": "eu-west-1"})
    _, arns2, dist2 = run()
    assert arns2["viewer-request"].endswith(":2") and dist2[0] == dist_id


def test_the_response_headers_policy_never_sets_cache_control():
    config = deploy.response_headers_policy_config()
    assert "CustomHeadersConfig" not in config and "cache-control" not in json.dumps(config).lower()
    assert set(deploy.EXPOSE) <= set(config["CorsConfig"]["AccessControlExposeHeaders"]["Items"])
