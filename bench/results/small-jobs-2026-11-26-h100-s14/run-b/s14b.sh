#!/bin/bash
# session 14, run B: where c=64 binary time goes with key (405e933): profile_small_jobs.sh in the
# binary form; http_load JSON head vs key alternating, 2 rounds; ab_batch head vs key with Server-Timing
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s14b.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
cp .devdeps/ab_batch.py $0 $O/
GPURED_BENCH_FORM=binary OUT=$O/prof timeout 150 bash bench/profile_small_jobs.sh $B/gpured_key > $O/prof.txt 2>&1
grep -A40 "== gpu-c64" $O/prof.txt
echo "prof at $((SECONDS-t0)) s"
for r in 1 2; do for v in head key; do for f in json; do
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done; done
echo "http at $((SECONDS-t0)) s"
timeout 200 python3 .devdeps/ab_batch.py $B/gpured_head,$B/gpured_key gpu 2 2>&1 | tee $O/ab_batch.txt
echo "done at $((SECONDS-t0)) s"
