#!/bin/bash
# session 13, run H (fe384a2) on two GPUs: the direct path on gpu:1 too; suites that spread jobs
# over both GPUs, with device "gpu"
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13h.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
ls tests/e2e/test_{jobs,launch_groups,placement,batch,api_sequences,results}.py | GPURED_BIN=$B/gpured_defer GPURED_TEST_DEVICE=gpu xargs -P 3 -I{} bash -c 'one {}' | sort | tee $O/summary.txt
d=$(mktemp -d); $B/gpured_defer serve --port 0 --data-dir $d --log-level warn 2>$d/log & pid=$!
for _ in $(seq 100); do grep -q 'listening on' $d/log && break; sleep 0.05; done
url=$(grep -o 'http://[0-9.]*:[0-9]*' $d/log | head -1)
for g in 0 1; do curl -s -H 'Prefer: wait=5' -H 'Content-Type: application/json' -d "{\"op\":\"sum\",\"dtype\":\"float32\",\"data\":[1,2,3.5],\"device\":\"gpu:$g\"}" $url/v1/jobs | tee -a $O/direct_per_gpu.txt; echo | tee -a $O/direct_per_gpu.txt; done
kill $pid; wait $pid; echo "stop rc=$?"
echo "done at $((SECONDS-t0)) s"
