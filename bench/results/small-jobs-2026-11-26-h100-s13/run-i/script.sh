#!/bin/bash
# session 13, run I: 16 KiB SQLite pages for new stores (16k, uncommitted on f598c05) vs f598c05
# (cur): http_load JSON and binary (2 rounds alternating), c1_probe, batch.py
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13i.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=.devdeps/bin
for r in 1 2; do for v in cur 16k; do for f in json binary; do
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_FORM=$([ $f = binary ] && echo binary) GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done; done
echo "http at $((SECONDS-t0)) s"
for v in cur 16k; do mkdir -p $O/c1_$v; GPURED_BENCH_OUT=$O/c1_$v timeout 100 python3 bench/c1_probe.py $B/gpured_$v gpu 2000 > $O/c1_$v.txt 2>&1; echo "== c1 $v"; grep 'round trip' $O/c1_$v.txt | cut -c1-230; done
echo "c1 at $((SECONDS-t0)) s"
for v in cur 16k; do mkdir -p $O/batch_$v; GPURED_BENCH_OUT=$O/batch_$v timeout 150 python3 bench/batch.py $B/gpured_$v gpu > $O/batch_$v.txt 2>&1; echo "== batch $v"; grep -A1 ' 100000 ' $O/batch_$v.txt; done
echo "done at $((SECONDS-t0)) s"
