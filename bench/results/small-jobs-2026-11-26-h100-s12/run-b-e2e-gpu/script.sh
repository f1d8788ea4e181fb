#!/bin/bash
# session 12, run B: every e2e suite with device "gpu" against the new binary (6c110ee), 4 at once
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s12b.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
export GPURED_BIN=$PWD/.devdeps/bin/gpured_new GPURED_TEST_DEVICE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
ls tests/e2e/test_*.py | grep -v test_affinity | xargs -P 4 -I{} bash -c 'one {}' | sort | tee $O/summary.txt
echo "done at $((SECONDS-t0)) s"
