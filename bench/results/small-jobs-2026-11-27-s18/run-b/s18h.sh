#!/bin/bash
# session 18, call H (on whichever card comes; call G's was an H200): axis 1 three more times
# (call G's one round had float32 argmax rows of 32 at 64% of the ceiling), then the small-job
# harness of run A (1024 float32 a job, Prefer: wait, --threads 16 --streams 4), two rounds, and
# bench/batch.py once, all on the final code
set -u
rm -rf /tmp/o; FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s18h.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
lscpu | grep -E 'Model name' | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin; cp $0 $O/
for r in 1 2 3; do timeout 60 $B/bench_reduce_final --sections axis1 --repeats 25 --out $O/axis1_$r.json > $O/axis1_$r.txt 2>&1; echo "axis1 $r rc=$? at $((SECONDS-t0)) s"; done
python3 - $O <<'PY'
import json,sys,statistics
o=sys.argv[1]
def load(f):
    d=json.load(open(f)); c=d['hbm_ceiling_gbps']
    return {(x['dtype'],x['op'],x['cols']):100*x['gbps']/c for x in d['results'] if x['section']=='axis1' and x['variant']=='fast'}
R=[load(f"{o}/axis1_{r}.json") for r in (1,2,3)]
m={k:statistics.median(r[k] for r in R) for k in R[0]}
print("axis1 median of 3, lowest:", sorted(((round(v,1),)+k for k,v in m.items()))[:8])
print("below 80%:", sum(v<80 for v in m.values()), "of", len(m))
PY
export GPURED_DEVICE=gpu
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
  point final 16 4 binary 64 5; point final 16 4 binary 1 4; point final 16 4 json 64 5; point final 16 4 json 1 4
done
echo "http at $((SECONDS-t0)) s"
mkdir -p $O/batch_1; GPURED_BENCH_OUT=$O/batch_1 timeout 100 python3 bench/batch.py $B/gpured_final gpu > $O/batch_1.txt 2>&1; echo "== batch"; grep -vE '^\s*$' $O/batch_1.txt | tail -12
echo "done at $((SECONDS-t0)) s"
