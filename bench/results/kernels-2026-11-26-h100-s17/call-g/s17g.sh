#!/bin/bash
# session 17, call G: sweep_big (k_fast_rows' rounds of pieces at 2^28-2^30 elements) twice, 25 runs a point
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "cp -r $O/. $FINAL/" EXIT
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2; do SWEEP_JSON=$O/sweep_big_$r.jsonl timeout 250 $B/sweep_big 25 > $O/sweep_big_$r.txt 2>&1; echo "round $r rc=$? at $SECONDS s"; done
cat $O/sweep_big_1.txt $O/sweep_big_2.txt
