#!/bin/bash
# session 15, run B: head (08922cb) vs adapt3 (adaptive mutexes: jobs, store queue, tenants; 0837d9a) vs
# watch1 (adapt3 + one idle lane a GPU watches) vs yield (adapt3 + cudaDeviceScheduleYield), 3 rounds
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s15b.tgz -C /tmp o" EXIT
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
for r in 1 2 3; do
  for v in head adapt3 watch1 yield; do point $v 16 4 binary 64 5; point $v 16 4 binary 1 4; point $v 16 4 json 64 5; done
  point adapt3 8 4 binary 64 5; point watch1 8 4 binary 64 5
done
echo "done at $((SECONDS-t0)) s"
