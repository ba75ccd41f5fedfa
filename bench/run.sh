#!/usr/bin/env bash
# Runs each workload of BENCHMARKS.md RUNS times (default 3) and prints every JSON line, then the
# median run's line per workload (median by its headline figure), with the load average before each run.
#
#   bench/run.sh                       # all workloads, 3 runs each, against redis://127.0.0.1:6379
#   RUNS=5 bench/run.sh drain enqueue  # some workloads
#   REDIS_URL=redis://127.0.0.1:6400 bench/run.sh
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test bench/run.sh outbox
#                                      # outbox needs PostgreSQL (that URL is its default)
#   STEADY_RATE=8000 bench/run.sh steady
#                                      # steady's rate, jobs/s (default 20,000: BENCHMARKS.md asks for
#                                      # half the measured drain capacity); each run takes 60 s and more
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
URL=${REDIS_URL:-redis://127.0.0.1:6379}
WORKLOADS=("$@")
[ ${#WORKLOADS[@]} -gt 0 ] || WORKLOADS=(enqueue enqueue-bulk enqueue-concurrent drain drain-io delayed memory backlog idle outbox steady floor)
cargo build --release -q -p postpone-bench
BIN=${CARGO_TARGET_DIR:-target}/release/postpone-bench
OUT=$(mktemp)
for w in "${WORKLOADS[@]}"; do
  for i in $(seq "$RUNS"); do
    echo "== $w run $i, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    extra=()
    [ "$w" != steady ] || [ -z "${STEADY_RATE:-}" ] || extra=(--rate "$STEADY_RATE")
    out=$("$BIN" "$w" --redis "$URL" ${extra[@]+"${extra[@]}"}) || { printf '%s\n' "$out" >&2; echo "postpone-bench $w failed" >&2; exit 1; }
    printf '%s\n' "$out" >&2
    printf '%s\n' "$out" | tail -1 >> "$OUT"
  done
done
echo "== medians of $RUNS runs" >&2
python3 - "$OUT" "${WORKLOADS[@]}" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
key = {"delayed": "p99_ms", "memory": "bytes_per_job", "idle": "commands_per_sec", "backlog": "ratio_to_drain",
       "outbox": "commit_to_queued_p99_ms", "steady": "start_lag_p99_ms",
       "floor": "drain_floor_us_per_job"}
for w in sys.argv[2:]:
    runs = [l for l in lines if l["workload"] == w]
    if not runs:
        continue
    runs.sort(key=lambda l: l.get(key.get(w, "jobs_per_sec"), 0))
    print(json.dumps(runs[len(runs) // 2], separators=(",", ":")))
PY
rm -f "$OUT"
