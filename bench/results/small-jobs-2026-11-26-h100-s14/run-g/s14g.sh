#!/bin/bash
# session 14, run G: list pages at 1M jobs, head (b24565e) vs final (job keys written as text in C),
# alternating, 2 rounds; test_jobs, test_list_cancel_etag, test_durability, test_events with device "gpu" on final
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s14g.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
cp $0 $O/
for r in 1 2; do for v in head final; do mkdir -p $O/list_${v}_$r; GPURED_BENCH_OUT=$O/list_${v}_$r timeout 150 python3 bench/list_scale.py $B/gpured_$v > $O/list_${v}_$r.txt 2>&1; echo "== list $v $r"; grep -vE "jobs stored|wrote" $O/list_${v}_$r.txt; sync; sleep 3; done; done
echo "lists at $((SECONDS-t0)) s"
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_final GPURED_TEST_DEVICE=gpu timeout 240 bash -c "ls tests/e2e/test_{jobs,list_cancel_etag,durability,events,batch}.py | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt
echo "done at $((SECONDS-t0)) s"
