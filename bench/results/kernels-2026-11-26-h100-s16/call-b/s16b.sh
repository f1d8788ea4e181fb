#!/bin/bash
# session 16, call B: sweep_argkey (packed arg keys, a whole-tile block); bench_reduce whole arrays
# to 2^20, the commit before (old) and the new block/cluster policy (new) alternating, two rounds;
# test_gpu_kernels and compute-sanitizer memcheck/racecheck over fast (new)
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s16b.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
(cd $O && timeout 150 $B/sweep_argkey 101 > $O/sweep_argkey.txt 2>&1; echo "argkey rc=$?")
echo "argkey at $((SECONDS-t0)) s"
for r in 1 2; do for v in old new; do
  timeout 120 $B/bench_reduce_$v --sections whole --max-log2 20 --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$?"
done; done
echo "bench at $((SECONDS-t0)) s"
timeout 200 $B/test_gpu_kernels > $O/test_gpu_kernels.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels > $O/memcheck_kernels.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_kernels.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels > $O/racecheck_kernels.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $O/racecheck_kernels.log | tail -1)"
echo "== sweep_argkey"; cat $O/sweep_argkey.txt
python3 - $O <<'PY'
import json,sys
o=sys.argv[1]
def load(v,r):
    d=json.load(open(f"{o}/whole_{v}_{r}.json")); return {(x['dtype'],x['op'],x['cols']):x for x in d['results'] if x['section']=='whole' and x['variant']=='fast'}
old=[load('old',r) for r in (1,2)]; new=[load('new',r) for r in (1,2)]
print("fast vs CUB (mean of 2 rounds): old -> new")
for k in sorted(old[0], key=lambda k:(k[0],k[1],k[2])):
    if k[2] > (1<<20): continue
    a=sum(x[k]['vs_cub'] for x in old)/2; b=sum(x[k]['vs_cub'] for x in new)/2
    print("%-8s %-7s 2^%-2d %.2f -> %.2f   (%.2f/%.2f us -> %.2f/%.2f us)" % (k[0],k[1],k[2].bit_length()-1,a,b,old[0][k]['ms']*1e3,old[1][k]['ms']*1e3,new[0][k]['ms']*1e3,new[1][k]['ms']*1e3))
PY
echo "done at $((SECONDS-t0)) s"
