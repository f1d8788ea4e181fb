#!/bin/bash
# session 13, run J (34aa41f): the batch and durability suites with device "gpu", twice each
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13j.tgz -C /tmp o" EXIT
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
B=$PWD/.devdeps/bin
one() { n=$(basename $1 .py)_$2; timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
for t in batch durability launch_groups; do for r in 1 2; do echo "tests/e2e/test_$t.py $r"; done; done | GPURED_BIN=$B/gpured_head GPURED_TEST_DEVICE=gpu xargs -P 3 -L 1 bash -c 'one $0 $1' | sort | tee $O/summary.txt
