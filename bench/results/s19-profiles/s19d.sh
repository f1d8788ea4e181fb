#!/bin/bash
# s19d.sh (session 19, call D): #13's small-job targets with the session's final gpured (main at
# b387c63): 1024 float32 a job, Prefer: wait, --threads 16 --streams 4; binary and JSON at c=64
# (5 s) and c=1 (4 s), two rounds; bench/batch.py once. The harness is session 18's (s18c.sh).
set -u
F=$OUT; O=/tmp/o4; rm -rf $O; mkdir -p $O
save() { tar czf $F/s19d.tgz -C /tmp o4; }
t0=$SECONDS
source .devdeps/env.sh >/dev/null 2>&1
python3 -c "import lzma,os; open('.devdeps/bin/gpured_final','wb').write(lzma.open('.devdeps/bin/gpured_final.xz').read()); os.chmod('.devdeps/bin/gpured_final',0o755)"
if ldd .devdeps/bin/gpured_final | grep "not found"; then exit 1; fi
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
lscpu | grep -E 'Model name' | tee -a $O/gpu.txt
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
  point final 16 4 binary 64 5; point final 16 4 binary 1 4; point final 16 4 json 64 5; point final 16 4 json 1 4
  save
done
echo "http at $((SECONDS-t0)) s"
mkdir -p $O/batch_1; GPURED_BENCH_OUT=$O/batch_1 timeout 100 python3 bench/batch.py $B/gpured_final gpu > $O/batch_1.txt 2>&1
grep -vE '^\s*$' $O/batch_1.txt | tail -12
save
echo "done at $((SECONDS-t0)) s"
