"""The dashboard's WAF web ACL: rate-based rules in front of its CloudFront distribution, so no one
client (and no crowd of clients) can make the dashboard send mail or guess codes at will. The
limits and why they are what they are: docs/deploy.md#rate-rules-in-front-of-the-dashboard."""

from __future__ import annotations

from typing import Any

from deploy.common import change, subset
from deploy.monitoring import alarm_actions

WAF_REGION = "us-east-1"  # a web ACL for CloudFront (scope CLOUDFRONT) is made there, whatever the home region
SCOPE = "CLOUDFRONT"
WINDOW_S = 300  # every limit counts requests over the last five minutes
# POSTs that send mail or check a code, from one client address (IP) in five minutes: a sign-in is two
# (ask, enter the code), a typo or a second code one or two more, an admin inviting a team one each.
MAIL_POSTS_PER_CLIENT = 20
# the same POSTs from all clients together in five minutes, counted and never blocked: blocking on a
# constant key would let a flood spread over many addresses switch sign-in off for everyone. Past it,
# the rule only counts (and alarms); what the flood can get sent is bounded by the dashboard's own
# pool for unknown addresses, which members, invitees and invitations do not share.
MAIL_POSTS_ALL_CLIENTS = 500
# any request from one client address in five minutes: a person clicks far fewer pages; a flood of
# the (uncached) function from one address is held to about three requests a second.
REQUESTS_PER_CLIENT = 1000
BLOCKED_BODY = "rate-limited"
BLOCKED_HTML = (
    "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>Too many requests</title>"
    "<h1>Too many requests</h1><p>Too many requests came from your network, or too many sign-in requests "
    "from everyone at once, in the last five minutes. Nothing was sent. Please try again in five minutes.</p></html>"
)
# POST paths of the dashboard that send mail or check a code (dashboard/app.py)
MAIL_PATHS = (("STARTS_WITH", "/sign-in"), ("ENDS_WITH", "/members/invite"), ("STARTS_WITH", "/me/request-access"))


def web_acl_name(name: str) -> str:
    return f"{name}-rate-rules"


def _byte_match(field: dict[str, Any], where: str, text: str, transform: str) -> dict[str, Any]:
    return {"ByteMatchStatement": {"SearchString": text.encode(), "FieldToMatch": field,
                                   "TextTransformations": [{"Priority": 0, "Type": transform}],
                                   "PositionalConstraint": where}}


def mail_posts() -> dict[str, Any]:
    """A POST to a path that sends mail or checks a code (the path URL-decoded first, as the dashboard reads it)."""
    paths = [_byte_match({"UriPath": {}}, where, path, "URL_DECODE") for where, path in MAIL_PATHS]
    return {"AndStatement": {"Statements": [_byte_match({"Method": {}}, "EXACTLY", "POST", "NONE"),
                                            {"OrStatement": {"Statements": paths}}]}}


def _visibility(metric: str) -> dict[str, Any]:
    return {"SampledRequestsEnabled": True, "CloudWatchMetricsEnabled": True, "MetricName": metric}


def _rate_rule(name: str, priority: int, limit: int, key: str, scope_down: dict[str, Any] | None,
               block: bool = True) -> dict[str, Any]:
    statement: dict[str, Any] = {"Limit": limit, "EvaluationWindowSec": WINDOW_S, "AggregateKeyType": key}
    if scope_down is not None:
        statement["ScopeDownStatement"] = scope_down
    action = {"Block": {"CustomResponse": {"ResponseCode": 429, "CustomResponseBodyKey": BLOCKED_BODY}}} if block \
        else {"Count": {}}
    return {"Name": name, "Priority": priority, "Statement": {"RateBasedStatement": statement},
            "Action": action, "VisibilityConfig": _visibility(name)}


def web_acl_config(name: str) -> dict[str, Any]:
    """The web ACL: everything allowed but what a rate rule blocks, with a 429 page that says why."""
    acl = web_acl_name(name)
    return {
        "Name": acl,
        "Description": "malaria-risk key dashboard: sign-in and mail rate limits (docs/deploy.md)",
        "DefaultAction": {"Allow": {}},
        "Rules": [
            _rate_rule("mail-posts-per-client", 0, MAIL_POSTS_PER_CLIENT, "IP", mail_posts()),
            _rate_rule("mail-posts-all-clients", 1, MAIL_POSTS_ALL_CLIENTS, "CONSTANT", mail_posts(), block=False),
            _rate_rule("requests-per-client", 2, REQUESTS_PER_CLIENT, "IP", None),
        ],
        "VisibilityConfig": _visibility(acl),
        "CustomResponseBodies": {BLOCKED_BODY: {"ContentType": "TEXT_HTML", "Content": BLOCKED_HTML}},
    }


def _find(waf: Any, acl: str) -> dict[str, Any] | None:
    kwargs: dict[str, Any] = {"Scope": SCOPE}
    while True:
        page = waf.list_web_acls(**kwargs)
        for item in page.get("WebACLs", []):
            if item["Name"] == acl:
                return dict(item)
        if not page.get("NextMarker"):
            return None
        kwargs["NextMarker"] = page["NextMarker"]


def step_web_acl(waf: Any, name: str, dry: bool = False) -> str | None:
    """The web ACL (found by name) created or brought to the wanted rules: its ARN, which the
    distribution takes as its WebACLId (None in a dry run when it does not exist yet)."""
    wanted = web_acl_config(name)
    found = _find(waf, wanted["Name"])
    if found is None:
        created = change(dry, f"web ACL {wanted['Name']}: created", lambda: waf.create_web_acl(Scope=SCOPE, **wanted))
        return str(created["Summary"]["ARN"]) if created else None
    got = waf.get_web_acl(Name=wanted["Name"], Scope=SCOPE, Id=found["Id"])
    if not subset({k: v for k, v in wanted.items() if k != "Name"}, got["WebACL"]):
        change(dry, f"web ACL {wanted['Name']}: rules updated", lambda: waf.update_web_acl(
            Scope=SCOPE, Id=found["Id"], LockToken=got["LockToken"], **wanted))
    return str(found["ARN"])


def waf_alarms(name: str, topic_arn: str | None) -> list[dict[str, Any]]:
    """In us-east-1, where WAF counts for CloudFront: all clients together passed the all-clients rule's
    rate (it counts, never blocks), so a flood spread over many addresses is under way; an operator
    should see who is flooding (sampled requests) and may block their networks."""
    rule = "mail-posts-all-clients"
    return [{"AlarmName": f"{name}-waf-{rule}", "AlarmDescription": "the dashboard's sign-in and mail POSTs from "
             "all clients together passed the all-clients rate: a distributed flood (docs/deploy.md"
             "#rate-rules-in-front-of-the-dashboard)", "Namespace": "AWS/WAFV2", "MetricName": "CountedRequests",
             "Dimensions": [{"Name": "WebACL", "Value": web_acl_name(name)}, {"Name": "Rule", "Value": rule}],
             "Statistic": "Sum", "Period": 300, "EvaluationPeriods": 1, "Threshold": 1.0,
             "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
             **alarm_actions(topic_arn)}]
