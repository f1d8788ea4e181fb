#!/bin/bash
# session 13, run E (d5799bf, direct): compute-sanitizer memcheck over test_gpu_backend (the direct
# path's host-mapped reads and writes included); batch.py on the GPU with the final binary
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s13e.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt; nproc | tee -a $O/gpu.txt
B=$PWD/.devdeps/bin
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "sanitizer: $CS"
timeout 330 $CS --tool memcheck --leak-check full --error-exitcode 3 $B/test_gpu_backend > $O/memcheck_backend.log 2>&1; echo "memcheck rc=$?"; tail -4 $O/memcheck_backend.log
echo "memcheck at $((SECONDS-t0)) s"
mkdir -p $O/batch_direct; GPURED_BENCH_OUT=$O/batch_direct timeout 200 python3 bench/batch.py $B/gpured_direct gpu > $O/batch_direct.txt 2>&1; echo "== batch direct"; grep -A1 ' 100000 ' $O/batch_direct.txt
echo "done at $((SECONDS-t0)) s"
