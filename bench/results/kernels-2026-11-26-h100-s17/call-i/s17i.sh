#!/bin/bash
# session 17, call I: test_gpu_kernels of the final code with 1023-1025 whole arrays in the policy
# edges (the one block's full tiles of 1 and 2 vectors a thread), and compute-sanitizer over them
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s17i.tgz -C /tmp o" EXIT
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 200 $B/test_gpu_kernels_final > $O/test_gpu_kernels_final.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels_final.log)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_final > $O/memcheck_final.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_final.log | tail -1) $(grep -E 'fast ' $O/memcheck_final.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_final > $O/racecheck_final.log 2>&1; echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/racecheck_final.log | tail -1) $(grep -E 'fast ' $O/racecheck_final.log | tail -1)"
echo "done at $SECONDS s"
