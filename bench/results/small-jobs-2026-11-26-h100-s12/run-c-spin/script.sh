#!/bin/bash
# session 12, run C: the writer and workers spin briefly before sleeping (spin) vs 6c110ee (new)
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s12c.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; grep -m1 'model name' /proc/cpuinfo | tee -a $O/gpu.txt
B=.devdeps/bin
for v in new spin; do $B/gpured_$v --version; done
for v in new spin; do mkdir -p $O/c1_$v; GPURED_BENCH_OUT=$O/c1_$v timeout 60 python3 bench/c1_probe.py $B/gpured_$v gpu 2000 > $O/c1_$v.txt 2>&1; echo "== c1 $v"; grep 'round trip' $O/c1_$v.txt; done
echo "c1 at $((SECONDS-t0)) s"
for r in 1 2; do for v in new spin; do f=binary
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_FORM=binary GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 40 bash bench/http_load.sh $B/gpured_$v 4 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done
for v in spin; do f=json; mkdir -p $O/http_${f}_${v}; GPURED_BENCH_OUT=$O/http_${f}_${v} timeout 40 bash bench/http_load.sh $B/gpured_$v 4 gpu > $O/http_${f}_${v}.txt 2>&1
  echo "== $f $v"; grep -E '^(1|16|64) ' $O/http_${f}_${v}.txt; done
echo "done at $((SECONDS-t0)) s"
