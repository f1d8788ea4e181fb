#!/bin/bash
# session 17, call J: sweep_clu (full tiles against the cluster at 2^13-2^18) three times, 101 runs a point
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "cp -r $O/. $FINAL/" EXIT
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2 3; do SWEEP_JSON=$O/sweep_clu_$r.jsonl timeout 250 $B/sweep_clu 101 > $O/sweep_clu_$r.txt 2>&1; echo "round $r rc=$? at $SECONDS s"; done
cat $O/sweep_clu_*.txt
