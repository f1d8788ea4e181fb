#!/bin/bash
# session 16, call H: k_fast_rows bounded to 1024 threads an SM (64 registers; int32 sums had
# taken 72, so 3 blocks an SM): "clu" (730e444) against "lb", bench_reduce whole 2^10-2^30 and
# axis 1, alternating, two rounds; test_gpu_kernels and memcheck on lb
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s16h.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2; do for v in clu lb; do
  timeout 200 $B/bench_reduce_$v --sections whole,axis1 --repeats 25 --out $O/all_${v}_$r.json > $O/all_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
timeout 200 $B/test_gpu_kernels_lb > $O/test_gpu_kernels_lb.log 2>&1; echo "test_gpu_kernels lb rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels_lb.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_lb > $O/memcheck_lb.log 2>&1; echo "memcheck lb rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_lb.log | tail -1)"
python3 - $O <<'PY'
import json,sys
o=sys.argv[1]
def load(f,sec):
    d=json.load(open(f)); c=d['hbm_ceiling_gbps']
    return {(x['dtype'],x['op'],x['cols']):(x['vs_cub'] if sec=='whole' else 100*x['gbps']/c) for x in d['results'] if x['section']==sec and x['variant']=='fast'}
for sec in ('whole','axis1'):
    R={v:[load(f"{o}/all_{v}_{r}.json",sec) for r in (1,2)] for v in ('clu','lb')}
    print(f"{sec}: mean of 2 rounds, clu -> lb" + (" (vs CUB)" if sec=='whole' else " (% of ceiling)") + "; int32 sum, then every point that moved by 2% or more")
    for k in sorted(R['clu'][0], key=lambda k:(k[0],k[1],k[2])):
        a=sum(x[k] for x in R['clu'])/2; b=sum(x[k] for x in R['lb'])/2
        if (k[0],k[1])==('int32','sum') or abs(b-a) >= 0.02*abs(a):
            print("%-8s %-7s 2^%-2d %.3f -> %.3f" % (k[0],k[1],k[2].bit_length()-1,a,b))
PY
echo "done at $((SECONDS-t0)) s"
