#!/usr/bin/env bash
# One scheduled job of the data service, run by the CodeBuild project `deploy/aws.py schedule`
# creates (docs/monitoring.md#the-schedule). The job's name comes from the EventBridge rule:
#
#   refresh       the data directory (kept in the bucket under <prefix>/ops/data/) is synced down,
#                 `malaria-risk refresh --state` restores the build state (fit cache, the live release's
#                 build key and document keys: <prefix>/ops/state/, each entry hash-checked), fetches,
#                 checks, builds (nothing when the inputs are unchanged; in a new month only the files
#                 whose inputs changed), publishes, verifies, saves the state and confirms the
#                 served /v1/periods; the data directory is synced back, `release prune` keeps the
#                 KEEP_RELEASES newest releases (default 12; the live and previous ones and pinned ones
#                 always), then last month's usage is exported too (harmless to repeat; the
#                 usage-export rule is the one relied on)
#   usage-export  last month's per-key totals, before the counters expire, to <prefix>/ops/usage/
#   canary        staleness and a sample of routes; status.json published under <prefix>/status/
#
# Settings arrive as the project's environment: BUCKET, PREFIX, TABLE_PREFIX, MALARIA_RISK_REGION,
# BASE_URL, MAX_LAG_DAYS and CANARY_KEY (from Parameter Store; written to an owner-only file, never
# echoed). Exit status: the job's own (refresh's codes are in docs/data-load.md), so a failed job is
# a failed build, which the `<name>-jobs-failed` alarm reports.
set -euo pipefail

job="${1:?usage: job.sh refresh|usage-export|canary}"
: "${BUCKET:?}" "${TABLE_PREFIX:?}" "${MALARIA_RISK_REGION:?}" "${BASE_URL:?}"
base="${PREFIX:+$PREFIX/}"
ops="s3://${BUCKET}/${base}ops"
umask 077
key_file="$(mktemp)"
trap 'rm -f "$key_file"' EXIT
printf '%s\n' "${CANARY_KEY:?}" > "$key_file"

last_month() { date -u -d "$(date -u +%Y-%m-01) -1 day" +%Y-%m; }

usage_export() {
  local month out
  month="$(last_month)"
  out="usage-${month}.csv"
  malaria-risk keys usage-export --store "dynamodb:${TABLE_PREFIX}" --month "$month" --out "$out"
  aws s3 cp --only-show-errors "$out" "${ops}/usage/${out}"
}

case "$job" in
  refresh)
    mkdir -p data
    aws s3 sync --only-show-errors "${ops}/data/" data/
    status=0
    malaria-risk refresh --data-dir data --out build --bucket "$BUCKET" --prefix "${PREFIX:-}" --state \
      --base-url "$BASE_URL" --key-file "$key_file" || status=$?
    aws s3 sync --only-show-errors data/ "${ops}/data/"
    if [ "$status" -eq 0 ]; then  # retention: only after a good run (never prune around a failed publish)
      malaria-risk release prune --bucket "$BUCKET" --prefix "${PREFIX:-}" --keep "${KEEP_RELEASES:-12}" \
        || status=$?
    fi
    usage_export || status=$(( status ? status : 1 ))
    exit "$status"
    ;;
  usage-export)
    usage_export
    ;;
  canary)
    malaria-risk canary --base-url "$BASE_URL" --key-file "$key_file" --max-lag-days "${MAX_LAG_DAYS:-60}" \
      --publish-status "$BUCKET" --status-prefix "${PREFIX:-}"
    ;;
  *)
    echo "unknown job: $job (refresh, usage-export, canary)" >&2
    exit 2
    ;;
esac
