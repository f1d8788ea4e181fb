#!/bin/bash
# session 17, call K: 128-thread tiles in place of the cluster (64 KiB-1 MiB), 512-thread tiles
# above ("t128") against 2a78179 ("align"): bench_reduce whole 2^10-2^30, alternating, three rounds
# (axis 1 in the first); test_gpu_kernels, compute-sanitizer; e2e job suites with device "gpu"
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s17k.tgz -C /tmp o" EXIT
t0=$SECONDS
for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devdeps; done
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="align t128"
for r in 1 2 3; do for v in $V; do
  sec=whole; [ $r = 1 ] && sec=whole,axis1
  timeout 100 $B/bench_reduce_$v --sections $sec --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
timeout 200 $B/test_gpu_kernels_t128 > $O/test_gpu_kernels_t128.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels_t128.log)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_t128 > $O/memcheck_t128.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_t128.log | tail -1) $(grep -E '^fast ' $O/memcheck_t128.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_t128 > $O/racecheck_t128.log 2>&1; echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/racecheck_t128.log | tail -1) $(grep -E '^fast ' $O/racecheck_t128.log | tail -1)"
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_t128 GPURED_TEST_DEVICE=gpu timeout 220 bash -c "ls tests/e2e/test_{jobs,results,batch,benchmarks,datasets,launch_groups}.py | xargs -P 4 -I{} bash -c 'one {}'" | sort
python3 - $O $V <<'PY'
import json,sys
o=sys.argv[1]; V=sys.argv[2:]
def load(f,sec='whole'):
    d=json.load(open(f)); c=d['hbm_ceiling_gbps']
    return {(x['dtype'],x['op'],x['cols'].bit_length()-1):((x['vs_cub'] if sec=='whole' else 100*x['gbps']/c),x['ms']*1000) for x in d['results'] if x['section']==sec and x['variant']=='fast'}
R={v:[load(f"{o}/whole_{v}_{r}.json") for r in (1,2,3)] for v in V}
med=lambda a: sorted(a)[1]
M={v:{k:(med([x[k][0] for x in R[v]]),med([x[k][1] for x in R[v]])) for k in R[v][0]} for v in V}
for v in V: print(v, "median of 3: below 1.00:", sum(1 for x in M[v].values() if x[0]<1), "below 0.98:", sum(1 for x in M[v].values() if x[0]<0.98), "of", len(M[v]), "; >=1.3 at 2^12-2^16:", sum(1 for k,x in M[v].items() if 12<=k[2]<=16 and x[0]>=1.3))
print("t128 below 1.00:", sorted([(k[0],k[1],k[2],round(x[0],3)) for k,x in M['t128'].items() if x[0]<1], key=lambda t:t[3]))
print("whole, vs CUB (fast us), median of 3 rounds, align > t128, 2^13-2^21")
for dt in ('float32','float64','int32'):
    for op in ('sum','max','argmax'):
        print("%-8s %-7s " % (dt,op) + " ".join("%d:%.2f>%.2f(%.2f>%.2f)" % (l, M['align'][(dt,op,l)][0], M['t128'][(dt,op,l)][0], M['align'][(dt,op,l)][1], M['t128'][(dt,op,l)][1]) for l in range(13,22)))
PY
echo "done at $((SECONDS-t0)) s"
