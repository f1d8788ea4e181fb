#!/bin/bash
# session 16, call D: bench_reduce whole arrays to 2^20, three binaries alternating, two rounds:
# b (71f80c2, the block/cluster policy), keyonly (b + the 4-byte arg key), tpin (key + tiles with
# every load pinned before the first fold); test_gpu_kernels (signed zeros now among the specials)
# and compute-sanitizer over fast, on tpin
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s16d.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2; do for v in b keyonly tpin; do
  timeout 120 $B/bench_reduce_$v --sections whole --max-log2 20 --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$?"
done; done
echo "bench at $((SECONDS-t0)) s"
timeout 200 $B/test_gpu_kernels_tpin > $O/test_gpu_kernels.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_tpin > $O/memcheck_kernels.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_kernels.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_tpin > $O/racecheck_kernels.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $O/racecheck_kernels.log | tail -1)"
python3 - $O <<'PY'
import json,sys
o=sys.argv[1]
def load(f):
    d=json.load(open(f)); return {(x['dtype'],x['op'],x['cols']):x for x in d['results'] if x['section']=='whole' and x['variant']=='fast'}
V=('b','keyonly','tpin')
R={v:[load(f"{o}/whole_{v}_{r}.json") for r in (1,2)] for v in V}
print("whole, fast vs CUB, mean of 2 rounds: b | keyonly | tpin    (fast's us, mean)")
for k in sorted(R['b'][0], key=lambda k:(k[0],k[1],k[2])):
    m=[sum(x[k]['vs_cub'] for x in R[v])/2 for v in V]; us=[sum(x[k]['ms'] for x in R[v])/2*1e3 for v in V]
    print("%-8s %-7s 2^%-2d %.2f | %.2f | %.2f    %.2f %.2f %.2f" % (k[0],k[1],k[2].bit_length()-1,*m,*us))
PY
echo "done at $((SECONDS-t0)) s"
