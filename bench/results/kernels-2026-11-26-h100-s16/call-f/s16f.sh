#!/bin/bash
# session 16, call F: bench_reduce whole arrays to 2^20, "full" (6e60fe4: full tiles in
# k_fast_block) against "clu" (full + the cluster's blocks of 256/512 threads, 4 vectors each,
# full tiles unguarded), alternating, three rounds; test_gpu_kernels, compute-sanitizer over fast
# and test_gpu_backend on clu
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s16f.tgz -C /tmp o" EXIT
t0=$SECONDS
for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devdeps; done
source .devdeps/env.sh
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2 3; do for v in full clu; do
  timeout 120 $B/bench_reduce_$v --sections whole --max-log2 20 --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$?"
done; done
echo "bench at $((SECONDS-t0)) s"
v=clu
timeout 200 $B/test_gpu_kernels_$v > $O/test_gpu_kernels_$v.log 2>&1; echo "test_gpu_kernels $v rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels_$v.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_$v > $O/memcheck_$v.log 2>&1; echo "memcheck $v rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_$v.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_$v > $O/racecheck_$v.log 2>&1; echo "racecheck $v rc=$? $(grep -E 'RACECHECK SUMMARY' $O/racecheck_$v.log | tail -1)"
timeout 200 $B/test_gpu_backend_$v > $O/test_gpu_backend_$v.log 2>&1; echo "test_gpu_backend $v rc=$? $(tail -1 $O/test_gpu_backend_$v.log)"
python3 - $O <<'PY'
import json,sys
o=sys.argv[1]
def load(f):
    d=json.load(open(f)); return {(x['dtype'],x['op'],x['cols']):x for x in d['results'] if x['section']=='whole' and x['variant']=='fast'}
V=('full','clu')
R={v:[load(f"{o}/whole_{v}_{r}.json") for r in (1,2,3)] for v in V}
print("whole, fast vs CUB, mean of 3 rounds: full | clu    (fast's us, mean)")
for k in sorted(R['full'][0], key=lambda k:(k[0],k[1],k[2])):
    m=[sum(x[k]['vs_cub'] for x in R[v])/3 for v in V]; us=[sum(x[k]['ms'] for x in R[v])/3*1e3 for v in V]
    print("%-8s %-7s 2^%-2d %.2f | %.2f    %.2f %.2f" % (k[0],k[1],k[2].bit_length()-1,*m,*us))
PY
echo "done at $((SECONDS-t0)) s"
