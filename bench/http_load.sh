#!/usr/bin/env bash
# http_load.sh: load benchmark of the job path: wrk posts small inline jobs (1024 float32,
# Prefer: wait=5) to a fresh gpured at 1, 16 and 64 connections. Prints a table and writes
# bench/results/http_load-<host>-<date>.json. Not a test: it measures, it does not judge.
#   bench/http_load.sh [path/to/gpured] [seconds per run] [device]   (GPURED_BENCH_OUT: results folder)
# GPURED_BENCH_TOKEN=... runs the server with a tokens file holding that token (tenant bench) and
# sends it on every request, to measure what authentication costs. GPURED_BENCH_FORM=binary sends
# the values as a one-shot raw body instead of JSON.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/gpured}
secs=${2:-10}
export GPURED_DEVICE=${3:-auto}
threads=${GPURED_BENCH_HTTP_THREADS:-$(nproc)}
data=$(mktemp -d)
log=$data/server.log
auth=()
if [ -n "${GPURED_BENCH_TOKEN:-}" ]; then
  echo "bench $GPURED_BENCH_TOKEN" > "$data/tokens"
  auth=(--tokens-file "$data/tokens")
fi
"$bin" serve --port 0 --data-dir "$data" --threads "$threads" --log-level warn "${auth[@]}" 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do grep -q 'listening on' "$log" && break; sleep 0.05; done
url=$(grep -o 'http://[0-9.]*:[0-9]*' "$log" | head -1)
device=$(curl -s ${GPURED_BENCH_TOKEN:+-H "Authorization: Bearer $GPURED_BENCH_TOKEN"} "$url/v1/devices")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
mkdir -p "${GPURED_BENCH_OUT:-$here/results}"
out=${GPURED_BENCH_OUT:-$here/results}/http_load-$GPURED_DEVICE${GPURED_BENCH_TOKEN:+-token}${GPURED_BENCH_FORM:+-$GPURED_BENCH_FORM}-$(hostname -s)-$(date -u +%Y%m%d).json
rows=()
printf '%-6s %10s %9s %9s %9s %8s\n' conns jobs/s p50_ms p90_ms p99_ms errors
for c in 1 16 64; do
  wt=$(( c < $(nproc) ? c : $(nproc) ))
  line=$(wrk -t"$wt" -c"$c" -d"${secs}s" --latency -s "$here/http_load.lua" "$url" | grep '^JSON ' | cut -c6-)
  python3 - "$c" "$line" <<'PY'
import json, sys
r = json.loads(sys.argv[2])
print(f"{sys.argv[1]:<6} {r['jobs_per_s']:>10.0f} {r['p50_ms']:>9.3f} {r['p90_ms']:>9.3f} {r['p99_ms']:>9.3f} "
      f"{r['socket_errors'] + r['non_2xx']:>8}")
PY
  rows+=("{\"connections\":$c,\"wrk_threads\":$wt,\"result\":$line}")
done
python3 - "$out" "$cpu" "$(nproc)" "$threads" "$GPURED_DEVICE" "$device" "${rows[@]}" <<'PY'
import json, sys, datetime
out, cpu, ncpu, http_threads, dev, devices, *rows = sys.argv[1:]
json.dump({"benchmark": "http_load", "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
           "cpu": cpu, "cores": int(ncpu), "http_threads": int(http_threads), "device": dev,
           "devices": json.loads(devices), "job": "sum of 1024 float32, inline JSON, Prefer: wait=5",
           "runs": [json.loads(r) for r in rows]}, open(out, "w"), indent=1)
print("wrote", out)
PY
