#!/bin/bash
# session 15, run E: head (08922cb) vs final (769bf8d) vs told (1f8e31f: a commit's answers in one
# hold of the jobs lock), 2 rounds; perf of told at c=64 binary; e2e suites with device "gpu" on told
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s15e.tgz -C /tmp o" EXIT
t0=$SECONDS
for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devdeps; done
source .devdeps/env.sh
if ldd .devdeps/bin/gpured_head | grep "not found"; then exit 1; fi
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin; cp $0 $O/
export GPURED_DEVICE=gpu
# point BIN THREADS STREAMS FORM CONNS SECS -> one line: jobs/s p50 p99
point() {
  d=$(mktemp -d)
  $B/gpured_$1 serve --port 0 --data-dir $d --threads $2 --streams $3 --log-level warn 2>$d/log & pid=$!
  for _ in $(seq 100); do grep -q 'listening on' $d/log && break; sleep 0.05; done
  url=$(grep -o 'http://[0-9.]*:[0-9]*' $d/log | head -1)
  wt=$(( $5 < 4 ? $5 : 4 ))
  line=$(GPURED_BENCH_FORM=$([ $4 = binary ] && echo binary) wrk -t$wt -c$5 -d${6}s --latency -s bench/http_load.lua $url | grep '^JSON ' | cut -c6-)
  kill $pid || tail -5 $d/log; wait $pid 2>/dev/null; rm -rf $d
  [ -n "$line" ] || line='{"jobs_per_s":0,"p50_ms":0,"p99_ms":0,"socket_errors":-1,"non_2xx":0}'
  echo "$line" >> $O/raw.jsonl
  python3 -c "import json,sys; r=json.loads(sys.argv[1]); print('%-9s t=%-2s s=%s %-6s c=%-2s %8.0f jobs/s p50 %.3f p99 %.3f err %d' % (sys.argv[2],sys.argv[3],sys.argv[4],sys.argv[5],sys.argv[6],r['jobs_per_s'],r['p50_ms'],r['p99_ms'],r['socket_errors']+r['non_2xx']))" "$line" $1 $2 $3 $4 $5 | tee -a $O/table.txt
}
for r in 1 2; do
  for v in head final told; do point $v 16 4 binary 64 5; point $v 16 4 binary 1 4; point $v 16 4 json 64 5; done
done
echo "http at $((SECONDS-t0)) s"
P=/tmp/perf; for f in .devdeps/perf/*.deb; do dpkg -x "$f" $P; done
perf() { LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu "$(ls "$P"/usr/bin/perf_* "$P"/usr/bin/perf 2>/dev/null | head -1)" "$@"; }
d=$(mktemp -d)
$B/gpured_told serve --port 0 --data-dir $d --threads 16 --log-level warn 2>$d/log & pid=$!
for _ in $(seq 100); do grep -q 'listening on' $d/log && break; sleep 0.05; done
url=$(grep -o 'http://[0-9.]*:[0-9]*' $d/log | head -1)
GPURED_BENCH_FORM=binary wrk -t4 -c64 -d8s --latency -s bench/http_load.lua $url > $O/wrk.txt & w=$!
sleep 2; perf record -F 1999 -p $pid -o $O/c64.data -- sleep 4 > $O/perf-record.txt 2>&1; wait $w; kill $pid; wait $pid
grep JSON $O/wrk.txt
for t in gr-store-writer MHD-worker gr-gpu:0-0 gr-gpu:0-1 gr-timer gr-checkpoint; do
  echo "== $t"; perf report -i $O/c64.data --comm $t --no-children --sort dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -25 | tee $O/syms-$t.txt | head -8; done
perf script -i $O/c64.data -F comm 2>/dev/null | sort | uniq -c | sort -rn | head -14 | tee $O/threads.txt
rm -f $O/c64.data
one() { n=$(basename $1 .py); timeout 150 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_told GPURED_TEST_DEVICE=gpu timeout 160 bash -c "ls tests/e2e/test_{jobs,batch,durability,launch_groups,events,api_sequences,list_cancel_etag,results,metrics}.py | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt
echo "done at $((SECONDS-t0)) s"
