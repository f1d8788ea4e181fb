#!/bin/bash
# session 16, run A: the small-array kernel sweep (sweep_small); then s15 (b664572) against s16
# (push wakes a sleeper only when the watcher won't take the job), 2 rounds; batch.py of
# head (08922cb), s15 and s16, two rounds; e2e job-path suites with device "gpu" on s16
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s16a.tgz -C /tmp o" EXIT
t0=$SECONDS
for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devdeps; done
source .devdeps/env.sh
if ldd .devdeps/bin/gpured_s16 | grep "not found"; then exit 1; fi
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin; cp $0 $O/
(cd $O && SWEEP_JSON=$O/sweep_small.jsonl timeout 240 $B/sweep_small 41 > $O/sweep_small.txt 2>&1; echo "sweep rc=$?")
echo "sweep at $((SECONDS-t0)) s"
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
  for v in s15 s16; do point $v 16 4 binary 64 5; point $v 16 4 binary 1 4; point $v 16 4 json 64 5; done
done
echo "http at $((SECONDS-t0)) s"
for r in 1 2; do for v in head s15 s16; do mkdir -p $O/batch_${v}_$r; GPURED_BENCH_OUT=$O/batch_${v}_$r timeout 90 python3 bench/batch.py $B/gpured_$v gpu > $O/batch_${v}_$r.txt 2>&1; echo "== batch $v round $r"; grep -vE '^\s*$' $O/batch_${v}_$r.txt | tail -12; done; done
echo "batch at $((SECONDS-t0)) s"
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_s16 GPURED_TEST_DEVICE=gpu timeout 150 bash -c "ls tests/e2e/test_{jobs,batch,durability,launch_groups,events}.py | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt | grep -v "rc=77"
echo "== sweep (best shapes)"; cat $O/sweep_small.txt
echo "done at $((SECONDS-t0)) s"
