#!/bin/bash
# session 18, call G: the session's final code (4f789e2: whole arrays in tiles to 64 MiB, the
# tiles' finisher on keys) on whichever card comes: bench_reduce whole 2^10-2^30, three rounds
# (axis 1 in the first); test_gpu_kernels (2^30 and 2^30 + 1 among the big cases),
# compute-sanitizer over fast (small run); e2e job suites with device "gpu"
set -u
rm -rf /tmp/o; FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s18g.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="final"
for r in 1 2 3; do for v in $V; do
  sec=whole; [ $r = 1 ] && [ $v = final ] && sec=whole,axis1
  timeout 100 $B/bench_reduce_$v --sections $sec --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
timeout 200 $B/test_gpu_kernels_final > $O/test_gpu_kernels_final.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed|^big' $O/test_gpu_kernels_final.log | tr '\n' ' ') at $((SECONDS-t0)) s"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 90 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_final > $O/memcheck_final.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_final.log | tail -1) $(grep -E '^fast ' $O/memcheck_final.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_final > $O/racecheck_final.log 2>&1; echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/racecheck_final.log | tail -1) $(grep -E '^fast ' $O/racecheck_final.log | tail -1) at $((SECONDS-t0)) s"
# test_gpu_backend left out: the carried tree's 64 MiB; the backend did not change
one() { n=$(basename $1 .py); timeout 150 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_final GPURED_TEST_DEVICE=gpu timeout 160 bash -c "ls tests/e2e/test_{jobs,results,batch,benchmarks,datasets,launch_groups}.py | xargs -P 4 -I{} bash -c 'one {}'" | sort
python3 - $O $V <<'PY'
import json,sys,statistics
o=sys.argv[1]; V=sys.argv[2:]
def load(f,sec='whole'):
    d=json.load(open(f)); c=d['hbm_ceiling_gbps']
    return {(x['dtype'],x['op'],x['cols'].bit_length()-1):((x['vs_cub'] if sec=='whole' else 100*x['gbps']/c),x['ms']*1000) for x in d['results'] if x['section']==sec and x['variant']=='fast'}
R={v:[load(f"{o}/whole_{v}_{r}.json") for r in (1,2,3)] for v in V}
keys=sorted(R[V[0]][0])
med={v:{k:statistics.median(r[k][0] for r in R[v]) for k in keys} for v in V}
for v in V:
    m=med[v]
    print(v, "below 1.00:", sum(m[k]<1.0 for k in keys), "below 0.98:", sum(m[k]<0.98 for k in keys), ">=1.3 at 2^12-16:", sum(m[k]>=1.3 for k in keys if 12<=k[2]<=16))
    print("  <1.00:", [(k[0],k[1],k[2],round(m[k],3)) for k in keys if m[k]<1.0])
    print("  <1.3 at 2^12-16:", [(k[0],k[1],k[2],round(m[k],3)) for k in keys if 12<=k[2]<=16 and m[k]<1.3])
a=load(f"{o}/whole_final_1.json",'axis1'); print("final axis1: min %.1f%% of the ceiling" % min(x[0] for x in a.values()))
PY
echo "done at $((SECONDS-t0)) s"
