#!/bin/bash
# session 13, run C: test_gpu_backend (direct path); http_load idx vs direct, 2 rounds; perf of the
# store writer during a 100k batch 202, JSON vs rows (direct binary)
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13c.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
timeout 200 $B/test_gpu_backend > $O/test_gpu_backend.log 2>&1; echo "test_gpu_backend rc=$?: $(tail -1 $O/test_gpu_backend.log)"; grep -m5 FAIL $O/test_gpu_backend.log
echo "test at $((SECONDS-t0)) s"
for r in 1 2; do for v in direct idx; do for f in json binary; do
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_FORM=$([ $f = binary ] && echo binary) GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done; done
echo "http at $((SECONDS-t0)) s"
P=/tmp/perf
[ -d $P/usr ] || for f in .devdeps/perf/*.deb; do dpkg -x "$f" $P; done
perf() { LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu "$(ls "$P"/usr/bin/perf_* "$P"/usr/bin/perf 2>/dev/null | head -1)" "$@"; }
python3 - $O <<'PY'
import json, struct, sys
n = 100000
open(sys.argv[1] + "/b.json", "w").write(json.dumps([{"op": "sum", "dtype": "int32", "data": [i, 1, 2, 3], "device": "gpu"} for i in range(n)]))
open(sys.argv[1] + "/b.rows", "wb").write(b"".join(struct.pack("<4i", i, 1, 2, 3) for i in range(n)))
PY
for round in 1 2; do for form in json rows; do
  d=$(mktemp -d); $B/gpured_direct serve --port 0 --data-dir $d --threads 16 --log-level warn --queue-capacity 1000000 --max-body-bytes 1073741824 2>$d/log &
  pid=$!; for _ in $(seq 100); do grep -q 'listening on' $d/log && break; sleep 0.05; done
  url=$(grep -o 'http://[0-9.]*:[0-9]*' $d/log | head -1)
  perf record -F 1999 -g -p $pid -o $O/perf-$form-$round.data -- sleep 5 >/dev/null 2>&1 &
  pr=$!; sleep 0.5
  if [ $form = json ]; then curl -s -o /dev/null -D $O/h-$form-$round.txt -H 'Content-Type: application/json' --data-binary @$O/b.json "$url/v1/jobs"
  else curl -s -o /dev/null -D $O/h-$form-$round.txt -H 'Content-Type: application/octet-stream' --data-binary @$O/b.rows "$url/v1/jobs?batch=rows&op=sum&dtype=int32&shape=100000,4&device=gpu"; fi
  echo "== $form $round: $(grep -i server-timing $O/h-$form-$round.txt)"
  wait $pr; kill $pid; wait $pid; rm -rf $d
  perf report -i $O/perf-$form-$round.data --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8 > $O/perf-$form-$round-threads.txt
  perf report -i $O/perf-$form-$round.data --comm gr-store-writer --no-children --sort dso,sym -g none --percentage relative --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -40 > $O/perf-$form-$round-writer.txt
  head -4 $O/perf-$form-$round-threads.txt; head -12 $O/perf-$form-$round-writer.txt
  rm -f $O/perf-$form-$round.data
done; done
rm -f $O/b.json $O/b.rows
echo "done at $((SECONDS-t0)) s"
