#!/bin/bash
# session 14, run C: head (b24565e) vs num (event runs + jobs keyed by number + 6-decimal timings,
# 9da4dd4): http_load binary and JSON alternating, 2 rounds; ab_batch 2 rounds; every e2e suite
# with device "gpu" against num
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s14c.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
cp .devdeps/ab_batch.py $0 $O/
for r in 1 2; do for v in head num; do for f in binary json; do
  mkdir -p $O/http_${f}_${v}_$r; GPURED_BENCH_FORM=$([ $f = binary ] && echo binary) GPURED_BENCH_OUT=$O/http_${f}_${v}_$r timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}_$r.txt 2>&1
  echo "== $f $v $r"; grep -E '^(1|16|64) ' $O/http_${f}_${v}_$r.txt; done; done; done
echo "http at $((SECONDS-t0)) s"
timeout 150 python3 .devdeps/ab_batch.py $B/gpured_head,$B/gpured_num gpu 2 2>&1 | tee $O/ab_batch.txt | grep -v "   "
echo "batch at $((SECONDS-t0)) s"
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_num GPURED_TEST_DEVICE=gpu timeout 240 bash -c "ls tests/e2e/test_*.py | grep -v test_affinity | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt | grep -v "rc=77"
echo "done at $((SECONDS-t0)) s"
