#!/usr/bin/env bash
# profile_small_jobs.sh: where a small job's time goes, on the GPU machine. perf (Debian's
# linux-perf, packed under .devdeps/perf: bash ../shared/device/pack.sh does not unpack it) samples
# gpured while wrk sends the http_load.lua job (1024 float32 as JSON, Prefer: wait=5) at 1 and
# 64 connections to the CPU and to the GPU, and while a 100k-job batch is taken. Writes per-thread
# and per-symbol reports under $OUT and prints their heads; one c=1 run is logged at info level,
# so the server's own time per request (arrival to answer) stands beside wrk's latency.
#   bash bench/profile_small_jobs.sh path/to/gpured   (after `source .devdeps/env.sh`)
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
P=/tmp/perf
[ -d $P/usr ] || for f in .devdeps/perf/*.deb; do dpkg -x "$f" $P; done
perf() { LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu "$(ls "$P"/usr/bin/perf_* "$P"/usr/bin/perf 2>/dev/null | head -1)" "$@"; }
data=$(mktemp -d)
start() {
    "$bin" serve --port 0 --data-dir "$data" --threads 16 --log-level "$1" --queue-capacity 1000000 \
        --max-body-bytes 1073741824 2>"$data/log" &
    pid=$!
    for _ in $(seq 100); do grep -q 'listening on' "$data/log" && break; sleep 0.05; done
    url=$(grep -o 'http://[0-9.]*:[0-9]*' "$data/log" | head -1)
}
report() { # $1: name
    perf report -i "$OUT/$1.data" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12 >"$OUT/$1-threads.txt"
    perf report -i "$OUT/$1.data" --no-children --sort dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -50 >"$OUT/$1-syms.txt"
    echo "== $1: $(grep -h '^JSON' "$OUT/$1-wrk.txt" 2>/dev/null | cut -c6-200)"
    head -8 "$OUT/$1-threads.txt"
    head -25 "$OUT/$1-syms.txt"
}
start warn
for dev in cpu gpu; do
    for c in 1 64; do
        name=$dev-c$c
        GPURED_DEVICE=$dev wrk -t$((c < 4 ? c : 4)) -c$c -d7s --latency -s "$here/http_load.lua" "$url" >"$OUT/$name-wrk.txt" &
        w=$!
        sleep 2
        perf record -F 999 -p $pid -o "$OUT/$name.data" -- sleep 4 >/dev/null 2>&1
        wait $w
        report $name
    done
done
python3 - "$url" >"$OUT/batch-body.json" <<'PY'
import json, sys
print(json.dumps([{"op": "sum", "dtype": "int32", "data": [i, 1, 2, 3], "device": "cpu"} for i in range(100000)]))
PY
perf record -F 999 -p $pid -o "$OUT/batch.data" -- sleep 12 >/dev/null 2>&1 &
r=$!
sleep 0.5
curl -s -o /dev/null -w 'batch of 100k: %{http_code} in %{time_total} s\n' -H 'Content-Type: application/json' \
    --data-binary @"$OUT/batch-body.json" "$url/v1/jobs" | tee "$OUT/batch-wrk.txt"
wait $r
report batch
rm -f "$OUT/batch-body.json"
kill $pid; wait $pid
start info
GPURED_DEVICE=cpu wrk -t1 -c1 -d4s --latency -s "$here/http_load.lua" "$url" >"$OUT/info-c1-wrk.txt"
kill $pid; wait $pid
echo "== c=1 on the CPU, the server's own time per POST (arrival to answer), ms:"
grep -o 'POST /v1/jobs 200 [0-9.]*ms' "$data/log" | grep -o '[0-9.]*ms' | tr -d ms | sort -n |
    awk '{v[NR]=$1} END {print "n", NR, "p50", v[int(NR*0.5)], "p90", v[int(NR*0.9)], "p99", v[int(NR*0.99)]}'
echo "   wrk: $(grep '^JSON' "$OUT/info-c1-wrk.txt" | cut -c6-200)"
rm -rf "$data"
