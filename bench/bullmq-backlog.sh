#!/usr/bin/env bash
# BullMQ's side of `backlog` (the peer's run.sh has no such workload): its drain of JOBS jobs alone, then
# the same beside BACKLOG jobs delayed by an hour in the same queue (BullMQ keeps those in its own
# `delayed` sorted set, each job a hash key of its own); prints both JSON lines and the ratio, as
# `postpone-bench backlog` prints `ratio_to_drain`.
#
#   bench/bullmq-backlog.sh                          # the peer in ../shared/peers/bullmq
#   PEER=/tmp/bullmq BACKLOG=900000 bench/bullmq-backlog.sh
#
# Env: PEER (the directory of the peer's bench.mjs; it installs BullMQ there with npm on first use, so
# copy it somewhere writable when it is not), REDIS_DB (default 1; FLUSHDBed before and after), JOBS
# (50,000), BACKLOG (1,000,000), CONCURRENCY (50). Needs node and Redis on 127.0.0.1:6379.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${PEER:-$root/../shared/peers/bullmq}"
[ -d node_modules/bullmq ] || npm install --no-audit --no-fund -s >/dev/null
export REDIS_DB="${REDIS_DB:-1}"
jobs="${JOBS:-50000}"
backlog="${BACKLOG:-1000000}"
flush() { redis-cli -n "$REDIS_DB" flushdb >/dev/null; }
rate() { sed -n 's/.*"jobs_per_s":\([0-9.]*\).*/\1/p'; }
flush
node bench.mjs prefill "$jobs" >/dev/null
plain=$(HANDLER_MS=0 node bench.mjs drain "$jobs")
echo "$plain"
flush
node bench.mjs enqueue-delayed "$backlog" >/dev/null
node bench.mjs prefill "$jobs" >/dev/null
beside=$(HANDLER_MS=0 node bench.mjs drain "$jobs")
echo "$beside"
flush
echo "{\"peer\":\"bullmq\",\"workload\":\"backlog\",\"backlog\":$backlog,\"drain_jobs_per_s\":$(rate <<<"$plain"),\"jobs_per_s\":$(rate <<<"$beside"),\"ratio_to_drain\":$(awk -v a="$(rate <<<"$beside")" -v b="$(rate <<<"$plain")" 'BEGIN {printf "%.3f", a / b}')}"
