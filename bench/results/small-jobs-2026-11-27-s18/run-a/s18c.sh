#!/bin/bash
# session 18, run A (device call C): the small-job targets as they stand, on this call's
# host: 1024 float32 a job, Prefer: wait, --threads 16 --streams 4; binary and JSON at c=64 (5 s)
# and c=1 (4 s), three rounds; bench/batch.py twice; e2e suites with device "gpu"
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s18c.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
if ldd .devdeps/bin/gpured_tree | grep "not found"; then exit 1; fi
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
lscpu | grep -E 'Model name|MHz' | tee -a $O/gpu.txt
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
for r in 1 2 3; do
  point tree 16 4 binary 64 5; point tree 16 4 binary 1 4; point tree 16 4 json 64 5; point tree 16 4 json 1 4
done
echo "http at $((SECONDS-t0)) s"
for r in 1 2; do mkdir -p $O/batch_$r; GPURED_BENCH_OUT=$O/batch_$r timeout 100 python3 bench/batch.py $B/gpured_tree gpu > $O/batch_$r.txt 2>&1; echo "== batch round $r"; grep -vE '^\s*$' $O/batch_$r.txt | tail -12; done
echo "batch at $((SECONDS-t0)) s"
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_tree GPURED_TEST_DEVICE=gpu timeout 200 bash -c "ls tests/e2e/test_{jobs,results,batch,benchmarks,datasets,launch_groups,durability}.py | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt
echo "done at $((SECONDS-t0)) s"
