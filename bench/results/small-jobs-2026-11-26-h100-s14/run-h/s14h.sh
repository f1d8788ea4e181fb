#!/bin/bash
# session 14, run H: final (e837bef) vs pause (gr_idle_wait's spin pauses instead of sched_yield,
# so the writer and lanes keep their cores while they wait): http_load binary and JSON alternating,
# 2 rounds; c1_probe beside 63 connections
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s14h.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
cp $0 $O/
for r in 1 2; do for v in final pause; do for f in binary json; do
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_FORM=$([ $f = binary ] && echo binary) GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done; done
echo "http at $((SECONDS-t0)) s"
for v in final pause; do mkdir -p $O/c1load_$v; GPURED_PROBE_LOAD=63 GPURED_BENCH_OUT=$O/c1load_$v timeout 100 python3 bench/c1_probe.py $B/gpured_$v gpu 3000 > $O/c1load_$v.txt 2>&1; echo "== c1 under c=63 load, $v"; grep 'round trip' $O/c1load_$v.txt; done
echo "done at $((SECONDS-t0)) s"
