#!/bin/bash
# session 17, call A: sweep_tiles (full tiles for small and mid whole arrays) twice, 101 runs a point
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "cp -r $O/. $FINAL/" EXIT
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2; do SWEEP_JSON=$O/sweep_tiles_$r.jsonl timeout 250 $B/sweep_tiles 101 > $O/sweep_tiles_$r.txt 2>&1; echo "round $r rc=$? at $SECONDS s"; done
cat $O/sweep_tiles_1.txt
