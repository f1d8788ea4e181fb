#!/bin/bash
# session 13, run F: waited batches stored once (defer, b7653f1) vs d5799bf (direct): batch.py
# alternating; every e2e suite with device "gpu" against defer
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13f.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
for r in 1 2; do for v in direct defer; do mkdir -p $O/batch_${v}_$r; GPURED_BENCH_OUT=$O/batch_${v}_$r timeout 150 python3 bench/batch.py $B/gpured_$v gpu > $O/batch_${v}_$r.txt 2>&1; echo "== batch $v $r"; grep -A1 ' 100000 ' $O/batch_${v}_$r.txt; done; done
echo "batch at $((SECONDS-t0)) s"
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_defer GPURED_TEST_DEVICE=gpu bash -c "ls tests/e2e/test_*.py | grep -v test_affinity | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt
echo "done at $((SECONDS-t0)) s"
