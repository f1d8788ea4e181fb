#!/bin/bash
# session 14, run D: where a c=64 job's time goes with num (9da4dd4 + rates): c1_probe beside 63
# wrk connections, head vs num, binary and JSON; then perf of num at c=64 binary, reported here
# by thread and symbol (kernel symbols resolve on this host)
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s14d.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
cp $0 $O/
for v in head numsym; do mkdir -p $O/c1load_$v; GPURED_PROBE_LOAD=63 GPURED_BENCH_OUT=$O/c1load_$v timeout 100 python3 bench/c1_probe.py $B/gpured_$v gpu 3000 > $O/c1load_$v.txt 2>&1; echo "== c1 under c=63 load, $v"; grep -vE '^\s*$' $O/c1load_$v.txt | tail -22; done
echo "c1 at $((SECONDS-t0)) s"
P=/tmp/perf; for f in .devdeps/perf/*.deb; do dpkg -x "$f" $P; done
perf() { LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu "$(ls "$P"/usr/bin/perf_* "$P"/usr/bin/perf 2>/dev/null | head -1)" "$@"; }
d=$(mktemp -d)
$B/gpured_numsym serve --port 0 --data-dir $d --threads 16 --log-level warn 2>$d/log & pid=$!
for _ in $(seq 100); do grep -q 'listening on' $d/log && break; sleep 0.05; done
url=$(grep -o 'http://[0-9.]*:[0-9]*' $d/log | head -1)
GPURED_DEVICE=gpu GPURED_BENCH_FORM=binary wrk -t4 -c64 -d8s --latency -s bench/http_load.lua $url > $O/wrk.txt & w=$!
sleep 2; perf record -F 1999 -p $pid -o $O/c64.data -- sleep 4 >/dev/null 2>&1; wait $w; kill $pid; wait $pid
grep JSON $O/wrk.txt
for t in gr-store-writer MHD-worker gr-gpu:0-0 gr-timer gr-checkpoint; do
  echo "== $t"; perf report -i $O/c64.data --comm $t --no-children --sort dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -25 | tee $O/syms-$t.txt; done
perf script -i $O/c64.data -F comm 2>/dev/null | sort | uniq -c | sort -rn | head -12
rm -f $O/c64.data
echo "done at $((SECONDS-t0)) s"
