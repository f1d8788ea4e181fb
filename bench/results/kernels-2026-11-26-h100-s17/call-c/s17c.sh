#!/bin/bash
# session 17, call C: three ways to run small arrays' full tiles, against c548152 ("lb"): tiles1
# (block_tile with a switch over 1-4 vectors a thread), tiles2 (tests for 4, 2, 1), tiles3 (the
# launcher picks a kernel per vector count; the cluster and tiles test for 4 only); bench_reduce
# whole 2^10-2^30, alternating, three rounds; test_gpu_kernels and compute-sanitizer on tiles3
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s17c.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="lb tiles1 tiles2 tiles3"
for r in 1 2 3; do for v in $V; do
  timeout 100 $B/bench_reduce_$v --sections whole --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
timeout 150 $B/test_gpu_kernels_tiles3 > $O/test_gpu_kernels_tiles3.log 2>&1; echo "test_gpu_kernels tiles3 rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels_tiles3.log)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_tiles3 > $O/memcheck_tiles3.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_tiles3.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_tiles3 > $O/racecheck_tiles3.log 2>&1; echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/racecheck_tiles3.log | tail -1)"
python3 - $O $V <<'PY'
import json,sys
o=sys.argv[1]; V=sys.argv[2:]
def load(f):
    d=json.load(open(f))
    return {(x['dtype'],x['op'],x['cols'].bit_length()-1):(x['vs_cub'],x['ms']*1000) for x in d['results'] if x['section']=='whole' and x['variant']=='fast'}
R={v:[load(f"{o}/whole_{v}_{r}.json") for r in (1,2,3)] for v in V}
med=lambda a: sorted(a)[1]
M={v:{k:(med([x[k][0] for x in R[v]]),med([x[k][1] for x in R[v]])) for k in R[v][0]} for v in V}
for v in V: print(v, "median of 3: below 1.00:", sum(1 for x in M[v].values() if x[0]<1), "below 0.98:", sum(1 for x in M[v].values() if x[0]<0.98), "of", len(M[v]), "; >=1.3 at 2^12-2^16:", sum(1 for k,x in M[v].items() if 12<=k[2]<=16 and x[0]>=1.3))
print("fast us, median of 3 rounds (" + " / ".join(V) + "); vs CUB of the last")
for dt in ('float32','float64','int32'):
    for op in ('sum','max','argmax'):
        for l in list(range(10,20))+[20,22,24,26,28,30]:
            k=(dt,op,l)
            print("%-8s %-7s 2^%-2d " % k + " / ".join("%.2f" % M[v][k][1] for v in V) + "   (%.3f)" % M[V[-1]][k][0])
PY
echo "done at $((SECONDS-t0)) s"
