#!/bin/bash
# session 14, run A: head (b24565e) vs ev (event runs, 4b6a7dd) vs key (jobs keyed by number, 405e933):
# 100k batches (ab_batch.py, 2 rounds), then http_load binary c=1..64 alternating, 2 rounds
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s14a.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
cp .devdeps/ab_batch.py $0 $O/
timeout 300 python3 .devdeps/ab_batch.py $B/gpured_head,$B/gpured_ev,$B/gpured_key gpu 2 2>&1 | tee $O/ab_batch.txt
echo "batch at $((SECONDS-t0)) s"
for r in 1 2; do for v in head ev key; do for f in binary; do
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_FORM=$([ $f = binary ] && echo binary) GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done; done
echo "done at $((SECONDS-t0)) s"
