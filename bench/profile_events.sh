#!/usr/bin/env bash
# profile_events.sh: where gpured's time goes while 1,000 event streams follow the small-job load
# (bench/events_load.py), on the GPU machine. perf (linux-perf, packed under .devdeps/perf as for
# bench/profile_small_jobs.sh) samples gpured for 6 s inside the filtered row and inside the
# unfiltered one; per-thread and per-symbol reports under $OUT, heads printed.
#   bash bench/profile_events.sh path/to/gpured [cpu|gpu: where the jobs run]   (after `source .devdeps/env.sh`)
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
bin=$1
dev=${2:-cpu}
P=/tmp/perf
[ -d $P/usr ] || for f in .devdeps/perf/*.deb; do dpkg -x "$f" $P; done
perf() { LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu "$(ls "$P"/usr/bin/perf_* "$P"/usr/bin/perf 2>/dev/null | head -1)" "$@"; }
GPURED_BENCH_OUT=$OUT python3 bench/events_load.py "$bin" 10 1000 64 "$dev" >"$OUT/events_load.txt" 2>&1 &
load=$!
for name in filtered unfiltered; do
    after=$([ $name = filtered ] && echo '^none ' || echo 'filtered (?job=)')
    until grep -q "$after" "$OUT/events_load.txt" || ! kill -0 $load 2>/dev/null; do sleep 0.2; done
    sleep 2
    pid=$(pgrep -n -f "$bin serve")
    perf record -F 999 -p "$pid" -o "$OUT/$name.data" -- sleep 6 >"$OUT/$name-perf.txt" 2>&1
    perf report -i "$OUT/$name.data" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12 >"$OUT/$name-threads.txt"
    perf report -i "$OUT/$name.data" --no-children --sort comm,dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -60 >"$OUT/$name-syms.txt"
done
wait $load
cat "$OUT/events_load.txt" | tail -6
for name in filtered unfiltered; do
    echo "== $name: threads"; head -10 "$OUT/$name-threads.txt"
    echo "== $name: symbols"; head -30 "$OUT/$name-syms.txt"
done
