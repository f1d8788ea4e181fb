#!/bin/bash
# session 13, run A: job indexes all per tenant (new, 6a1eaa2) vs 980ddb4 (old): http_load JSON and
# binary (2 rounds alternating), c1_probe (with the job's own stage timings), batches
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13a.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; grep -m1 'model name' /proc/cpuinfo | tee -a $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=.devdeps/bin
for v in old new; do $B/gpured_$v --version; done
for r in 1 2; do for v in old new; do for f in json binary; do
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_FORM=$([ $f = binary ] && echo binary) GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done; done
echo "http at $((SECONDS-t0)) s"
for v in old new; do mkdir -p $O/c1_$v; GPURED_BENCH_OUT=$O/c1_$v timeout 100 python3 bench/c1_probe.py $B/gpured_$v gpu 2000 > $O/c1_$v.txt 2>&1; echo "== c1 $v"; grep 'round trip' $O/c1_$v.txt; done
echo "c1 at $((SECONDS-t0)) s"
for v in old new; do mkdir -p $O/batch_$v; GPURED_BENCH_OUT=$O/batch_$v timeout 170 python3 bench/batch.py $B/gpured_$v gpu > $O/batch_$v.txt 2>&1; echo "== batch $v"; grep -A1 ' 100000 ' $O/batch_$v.txt; done
echo "done at $((SECONDS-t0)) s"
