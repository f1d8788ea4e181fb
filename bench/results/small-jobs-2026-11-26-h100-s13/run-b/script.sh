#!/bin/bash
# session 13, run B: small inputs read directly from pinned memory (direct, uncommitted on 6a1eaa2)
# vs 6a1eaa2 (idx): every e2e suite with device "gpu" on direct; c1_probe at 1024 and 16384 values;
# http_load JSON and binary, one round each
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13b.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_direct GPURED_TEST_DEVICE=gpu bash -c "ls tests/e2e/test_*.py | grep -v test_affinity | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt
echo "e2e at $((SECONDS-t0)) s"
for n in 1024 16384; do for v in idx direct; do mkdir -p $O/c1_${v}_$n; GPURED_PROBE_VALUES=$n GPURED_BENCH_OUT=$O/c1_${v}_$n timeout 100 python3 bench/c1_probe.py $B/gpured_$v gpu 2000 > $O/c1_${v}_$n.txt 2>&1; echo "== c1 $v $n"; grep 'round trip' $O/c1_${v}_$n.txt; done; done
echo "c1 at $((SECONDS-t0)) s"
for v in idx direct; do for f in json binary; do
  mkdir -p $O/http_${f}_${v}; GPURED_BENCH_FORM=$([ $f = binary ] && echo binary) GPURED_BENCH_OUT=$O/http_${f}_${v} timeout 60 bash bench/http_load.sh $B/gpured_$v 5 gpu > $O/http_${f}_${v}.txt 2>&1
  echo "== $f $v"; grep -E '^(1|16|64) ' $O/http_${f}_${v}.txt; done; done
echo "done at $((SECONDS-t0)) s"
