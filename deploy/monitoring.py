"""Log groups with retention, metric filters on the edge's JSON lines, alarms and their topics
(docs/monitoring.md)."""

from __future__ import annotations

from typing import Any

from deploy.common import EDGE_EVENTS, change, subset

# --- logs, metric filters, alarms -------------------------------------------------------------------

NAMESPACE = "MalariaRisk"
LOG_RETENTION_DAYS = 30
FIVE_XX_PERCENT = 5.0  # of the edge's decisions, over 5 minutes, two periods of three


def edge_log_groups(name: str) -> list[str]:
    """Lambda@Edge writes in each region that runs a replica, to a group named after us-east-1."""
    return [f"/aws/lambda/us-east-1.{name}-{event}" for event in EDGE_EVENTS]


def mt(metric: str, value: str) -> list[dict[str, Any]]:
    """A metric filter's one transformation: `value` (a number or a `$.field`) into our namespace."""
    return [{"metricName": metric, "metricNamespace": NAMESPACE, "metricValue": value, "defaultValue": 0.0}]


def alarm_actions(topic_arn: str | None) -> dict[str, Any]:
    return {"AlarmActions": [topic_arn], "OKActions": [topic_arn]} if topic_arn else {}


def metric_filters(name: str) -> list[dict[str, Any]]:
    """Metrics from the edge's JSON lines (edge/accesslog.py): decisions weighted by their sample
    factor (so sampled successes still count fully), 5xx answers, and the function's own problems."""
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
    actions = alarm_actions(topic_arn)
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
    actions = alarm_actions(topic_arn)
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


# --- the key dashboard: its function's log group, the mail budget's event, its alarm ---------------

MAIL_BUDGET_EVENT = "dashboard.mail_budget_exhausted"  # the dashboard's JSON log line when a budget stops mail


def dashboard_log_group(name: str) -> str:
    """The dashboard is a plain Lambda function in the home region: one group, named after it."""
    return f"/aws/lambda/{name}"


def dashboard_metric_filters(name: str) -> list[dict[str, Any]]:
    """A count of the dashboard's `dashboard.mail_budget_exhausted` lines: one of its service-wide pools
    of codes (to unknown or to known addresses; the line's `budget` says which) was used up, and mail
    was refused."""
    return [{"filterName": f"{name}-mail-budget-exhausted", "filterPattern": f'{{ $.event = "{MAIL_BUDGET_EVENT}" }}',
             "metricTransformations": mt("DashboardMailBudgetExhausted", "1")}]


def dashboard_alarms(name: str, topic_arn: str | None) -> list[dict[str, Any]]:
    """One refusal is worth a look: a budget is sized so that people never meet it."""
    return [{"AlarmName": f"{name}-mail-budget-exhausted", "AlarmDescription": "the key dashboard refused to send "
             "mail: a service-wide pool of codes is used up, its log line's budget says which (docs/monitoring.md"
             "#dashboard-mail-budget)", "Namespace": NAMESPACE, "MetricName": "DashboardMailBudgetExhausted",
             "Statistic": "Sum", "Period": 300, "EvaluationPeriods": 1, "Threshold": 1.0,
             "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
             **alarm_actions(topic_arn)}]


def jobs_alarm(name: str, topic_arn: str | None) -> dict[str, Any]:
    """A scheduled job (refresh, canary, usage export) failed: CodeBuild's count of failed builds."""
    actions = alarm_actions(topic_arn)
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
    # decisions are logged by the viewer-request function only
    step_metric_filters(logs, edge_log_groups(name)[0], metric_filters(name), dry)


def step_dashboard_logs(logs: Any, name: str, retention_days: int = LOG_RETENTION_DAYS, dry: bool = False) -> None:
    """The dashboard function's log group, made ahead with its retention, and its metric filter."""
    group = dashboard_log_group(name)
    step_log_group(logs, group, retention_days, dry)
    step_metric_filters(logs, group, dashboard_metric_filters(name), dry)


def step_metric_filters(logs: Any, group: str, filters: list[dict[str, Any]], dry: bool = False) -> None:
    have = {f["filterName"]: f for f in logs.describe_metric_filters(logGroupName=group).get("metricFilters", [])}
    for f in filters:
        got = have.get(f["filterName"])
        if got is None or not subset(f, got):
            change(dry, f"log group {group}: metric filter {f['filterName']}", lambda f=f: logs.put_metric_filter(
                logGroupName=group, **f))


def step_alarms(cw: Any, alarms: list[dict[str, Any]], dry: bool = False) -> None:
    names = [a["AlarmName"] for a in alarms]
    have = {a["AlarmName"]: a for a in cw.describe_alarms(AlarmNames=names).get("MetricAlarms", [])}
    for alarm in alarms:
        got = have.get(alarm["AlarmName"])
        if got is None or not subset(alarm, got):
            change(dry, f"alarm {alarm['AlarmName']}: {'updated' if got else 'created'}",
                   lambda a=alarm: cw.put_metric_alarm(**a))
