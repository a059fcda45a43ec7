"""Scripted boto3 procedure for the CDN edge: tables, function versions, CloudFront behaviour.

Each step is idempotent and can be run alone; `all` runs them in order. Nothing here runs
in the test suite against AWS (see docs/deploy.md for what was tested against what).

    python deploy/aws.py tables   --table-prefix mr- [--region us-east-1]
    python deploy/aws.py function --name malaria-risk-edge --role-arn ARN --bundle build-edge/edge.zip
    python deploy/aws.py behaviour --distribution-id EDFDVBD6EXAMPLE --name malaria-risk-edge
    python deploy/aws.py all ... (every option above)

Lambda@Edge functions must live in us-east-1 and be referenced by a *numbered version*;
CloudFront replicates them to its edge locations. The role needs the trust policy for
both lambda.amazonaws.com and edgelambda.amazonaws.com, s3:GetObject on the pointer and
manifests, and dynamodb:GetItem/BatchGetItem/UpdateItem on the two tables.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LAMBDA_REGION = "us-east-1"  # a Lambda@Edge requirement, not a choice
RUNTIME = "python3.12"
HANDLERS = {"viewer-request": "edge.cloudfront.handler",
            "viewer-response": "edge.cloudfront.viewer_response_handler"}
# Managed cache policy "CachingOptimized": URI-only cache key (the function's rewrite puts the
# release id and encoding in the URI), no cookies/headers/query strings.
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"
RESPONSE_POLICY_NAME = "malaria-risk-api"
EXPOSE = ["ETag", "RateLimit", "RateLimit-Policy", "Retry-After", "X-Release-Id"]


def step_tables(table_prefix: str, region: str) -> None:
    import boto3

    from edge.stores.dynamodb import DynamoDBKeyStore

    store = DynamoDBKeyStore(boto3.client("dynamodb", region_name=region), table_prefix)
    store.create_tables()
    print(f"tables ready: {store.keys_table}, {store.counters_table_name} (TTL on expires_at)")


def step_function(name: str, role_arn: str, bundle: Path) -> dict[str, str]:
    """Create or update both functions from one zip and publish numbered versions."""
    import boto3

    lam = boto3.client("lambda", region_name=LAMBDA_REGION)
    code = bundle.read_bytes()
    arns: dict[str, str] = {}
    for event, handler in HANDLERS.items():
        fname = f"{name}-{event}"
        try:
            lam.get_function(FunctionName=fname)
            lam.update_function_code(FunctionName=fname, ZipFile=code)
            lam.get_waiter("function_updated_v2").wait(FunctionName=fname)
            lam.update_function_configuration(FunctionName=fname, Handler=handler, Runtime=RUNTIME,
                                              MemorySize=128, Timeout=5, Role=role_arn)
            lam.get_waiter("function_updated_v2").wait(FunctionName=fname)
        except lam.exceptions.ResourceNotFoundException:
            lam.create_function(FunctionName=fname, Runtime=RUNTIME, Role=role_arn, Handler=handler,
                                Code={"ZipFile": code}, MemorySize=128, Timeout=5, Publish=False,
                                Description=f"malaria-risk edge gate ({event})")
            lam.get_waiter("function_active_v2").wait(FunctionName=fname)
        version = lam.publish_version(FunctionName=fname)
        arns[event] = version["FunctionArn"]  # ends in :<version>, as CloudFront requires
        print(f"{event}: {arns[event]}")
    return arns


def _response_headers_policy(cf: Any) -> str:
    """Cache-Control and CORS for rewritten (authorised) answers, which come from S3 with a
    year-long immutable Cache-Control that must not reach viewers as is."""
    config = {
        "Name": RESPONSE_POLICY_NAME,
        "Comment": "malaria-risk API: private caching and CORS on release objects",
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
        "CustomHeadersConfig": {"Quantity": 1, "Items": [
            {"Header": "Cache-Control", "Value": "private, max-age=300, must-revalidate", "Override": True}]},
    }
    for item in cf.list_response_headers_policies(Type="custom").get("ResponseHeadersPolicyList", {}) \
            .get("Items", []):
        policy = item["ResponseHeadersPolicy"]
        if policy["ResponseHeadersPolicyConfig"]["Name"] == RESPONSE_POLICY_NAME:
            got = cf.get_response_headers_policy(Id=policy["Id"])
            cf.update_response_headers_policy(Id=policy["Id"], IfMatch=got["ETag"],
                                              ResponseHeadersPolicyConfig=config)
            return policy["Id"]
    return cf.create_response_headers_policy(ResponseHeadersPolicyConfig=config)["ResponseHeadersPolicy"]["Id"]


def step_behaviour(distribution_id: str, arns: dict[str, str]) -> None:
    """Attach both function versions to the default behaviour; GET/HEAD/OPTIONS only, no compression."""
    import boto3

    cf = boto3.client("cloudfront")
    policy_id = _response_headers_policy(cf)
    got = cf.get_distribution_config(Id=distribution_id)
    config, etag = got["DistributionConfig"], got["ETag"]
    b = config["DefaultCacheBehavior"]
    b["LambdaFunctionAssociations"] = {"Quantity": 2, "Items": [
        {"LambdaFunctionARN": arns["viewer-request"], "EventType": "viewer-request", "IncludeBody": False},
        {"LambdaFunctionARN": arns["viewer-response"], "EventType": "viewer-response"},
    ]}
    b["CachePolicyId"] = CACHING_OPTIMIZED
    b["ResponseHeadersPolicyId"] = policy_id
    b["Compress"] = False  # the function picks the precompressed .gz object itself
    b["ViewerProtocolPolicy"] = "https-only"
    b["AllowedMethods"] = {"Quantity": 3, "Items": ["GET", "HEAD", "OPTIONS"],
                           "CachedMethods": {"Quantity": 2, "Items": ["GET", "HEAD"]}}
    for legacy in ("ForwardedValues", "MinTTL", "DefaultTTL", "MaxTTL"):
        b.pop(legacy, None)  # incompatible with a cache policy
    cf.update_distribution(Id=distribution_id, IfMatch=etag, DistributionConfig=config)
    print(f"distribution {distribution_id}: behaviour updated; waiting for deployment…")
    deadline = time.monotonic() + 1800
    while cf.get_distribution(Id=distribution_id)["Distribution"]["Status"] != "Deployed":
        if time.monotonic() > deadline:
            print("still deploying after 30 min; check the console", file=sys.stderr)
            return
        time.sleep(20)
    print("deployed")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["tables", "function", "behaviour", "all"])
    p.add_argument("--table-prefix")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--name", default="malaria-risk-edge")
    p.add_argument("--role-arn")
    p.add_argument("--bundle", type=Path, default=ROOT / "build-edge" / "edge.zip")
    p.add_argument("--distribution-id")
    p.add_argument("--request-arn", help="for `behaviour` alone: the viewer-request version ARN")
    p.add_argument("--response-arn", help="for `behaviour` alone: the viewer-response version ARN")
    a = p.parse_args(argv)
    if a.step in ("tables", "all"):
        if not a.table_prefix:
            p.error("--table-prefix is required")
        step_tables(a.table_prefix, a.region)
    arns = {"viewer-request": a.request_arn, "viewer-response": a.response_arn}
    if a.step in ("function", "all"):
        if not a.role_arn:
            p.error("--role-arn is required")
        arns = step_function(a.name, a.role_arn, a.bundle)
    if a.step in ("behaviour", "all"):
        if not a.distribution_id or not all(arns.values()):
            p.error("--distribution-id and both function version ARNs are required")
        step_behaviour(a.distribution_id, arns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
