#!/bin/bash
# session 17, call H: split rows' pieces in whole multiples of 512 bytes ("align") against 4682146 ("s17"):
# bench_reduce whole 2^10-2^30 (axis 1 in the first round), alternating, three rounds; test_gpu_kernels, compute-sanitizer
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s17h.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="s17 align"
for r in 1 2 3; do for v in $V; do
  sec=whole; [ $r = 1 ] && sec=whole,axis1
  timeout 100 $B/bench_reduce_$v --sections $sec --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
timeout 150 $B/test_gpu_kernels_align > $O/test_gpu_kernels_align.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels_align.log)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_align > $O/memcheck_align.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_align.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_align > $O/racecheck_align.log 2>&1; echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/racecheck_align.log | tail -1)"
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
print("align below 1.00:", sorted([(k[0],k[1],k[2],round(x[0],3)) for k,x in M['align'].items() if x[0]<1], key=lambda t:t[3]))
print("whole, vs CUB (fast us), median of 3 rounds, s17 > align")
for dt in ('float32','float64','int32'):
    for op in ('sum','max','argmax'):
        print("%-8s %-7s " % (dt,op) + " ".join("%d:%.2f>%.2f(%.2f>%.2f)" % (l, M['s17'][(dt,op,l)][0], M['align'][(dt,op,l)][0], M['s17'][(dt,op,l)][1], M['align'][(dt,op,l)][1]) for l in range(10,31)))
A={v:load(f"{o}/whole_{v}_1.json",'axis1') for v in V}
print("axis 1, % of the ceiling, one round, s17 > align")
for dt in ('float32','float64','int32'):
    for op in ('sum','max','argmax'):
        print("%-8s %-7s " % (dt,op) + " ".join("%d:%.0f>%.0f" % (l, A['s17'][(dt,op,l)][0], A['align'][(dt,op,l)][0]) for l in range(4,21)))
PY
echo "done at $((SECONDS-t0)) s"
