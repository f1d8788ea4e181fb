#!/bin/bash
# session 18, call B: full tiles joining their vectors as a tree, an arg op's vector as one ("tree"), against
# call A's "fin": bench_reduce whole 2^10-2^30, alternating, three rounds (axis 1 in the first);
# test_gpu_kernels (its float products kept in range) and compute-sanitizer memcheck/racecheck on tree
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s18b.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="fin tree"
for r in 1 2 3; do for v in $V; do
  sec=whole; [ $r = 1 ] && sec=whole,axis1
  timeout 100 $B/bench_reduce_$v --sections $sec --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
timeout 200 $B/test_gpu_kernels_tree > $O/test_gpu_kernels_tree.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels_tree.log)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_tree > $O/memcheck_tree.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_tree.log | tail -1) $(grep -E '^fast ' $O/memcheck_tree.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_tree > $O/racecheck_tree.log 2>&1; echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/racecheck_tree.log | tail -1) $(grep -E '^fast ' $O/racecheck_tree.log | tail -1)"
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
    print(v, "below 1.00:", sum(m[k]<1.0 for k in keys), "below 0.98:", sum(m[k]<0.98 for k in keys),
          ">=1.3 at 2^12-16:", sum(m[k]>=1.3 for k in keys if 12<=k[2]<=16), "of", sum(1 for k in keys if 12<=k[2]<=16))
print("%-8s %-7s %3s " % ("dtype","op","lg") + " ".join("%14s" % v for v in V))
for k in keys:
    if k[2] <= 20 or min(med[v][k] for v in V) < 1.0:
        print("%-8s %-7s %3d " % k + " ".join("%6.3f %6.2fus" % (med[v][k], statistics.median(r[k][1] for r in R[v])) for v in V))
PY
echo "done at $((SECONDS-t0)) s"
