#!/usr/bin/env bash
# What observability costs: `drain` with postpone built without its `metrics`/`opentelemetry` features
# (off), against `drain --observe` built with them, a Prometheus recorder installed and a `tracing`
# subscriber at INFO (on). Alternated RUNS times (default 3) in one session; prints each run's JSON line,
# then the medians and on/off.
#
#   bench/observe-overhead.sh                                  # against redis://127.0.0.1:6379
#   REDIS_URL=redis://127.0.0.1:6399 RUNS=5 bench/observe-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
URL=${REDIS_URL:-redis://127.0.0.1:6379}
TARGET=${CARGO_TARGET_DIR:-target}
BINS=$(mktemp -d)
cargo build --release -q -p postpone-bench
cp "$TARGET/release/postpone-bench" "$BINS/off"
cargo build --release -q -p postpone-bench --features observe
cp "$TARGET/release/postpone-bench" "$BINS/on"
OUT=$(mktemp)
for i in $(seq "$RUNS"); do
  for mode in off on; do
    flag=()
    [ "$mode" = on ] && flag=(--observe)
    echo "== drain $mode, run $i, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    line=$("$BINS/$mode" drain --redis "$URL" "${flag[@]}" | tail -1)
    printf '%s %s\n' "$mode" "$line" | tee -a "$OUT" >&2
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = {"off": [], "on": []}
for line in open(sys.argv[1]):
    mode, js = line.split(" ", 1)
    runs[mode].append(json.loads(js))
med = {m: statistics.median(r["jobs_per_sec"] for r in rs) for m, rs in runs.items()}
cpu = {m: statistics.median(r["worker_us_per_job"] for r in rs) for m, rs in runs.items()}
print(f"drain medians of {len(runs['off'])}: off {med['off']:.0f} jobs/s ({cpu['off']:.2f} us worker CPU/job), "
      f"on {med['on']:.0f} jobs/s ({cpu['on']:.2f} us/job); on/off = {med['on'] / med['off']:.3f}")
PY
rm -rf "$OUT" "$BINS"
