#!/bin/bash
# session 17, call B: whole arrays in full tiles (k_fast_tiles to 64 MiB, block_tile) against
# c548152 ("lb"): bench_reduce whole 2^10-2^30 and axis 1, alternating, two rounds; test_gpu_kernels
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "cp -r $O/. $FINAL/" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2; do for v in lb tiles; do
  timeout 150 $B/bench_reduce_$v --sections whole,axis1 --repeats 25 --out $O/all_${v}_$r.json > $O/all_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
timeout 150 $B/test_gpu_kernels_tiles > $O/test_gpu_kernels_tiles.log 2>&1; echo "test_gpu_kernels tiles rc=$? $(grep -E 'passed' $O/test_gpu_kernels_tiles.log | tr '\n' ' ')"
python3 - $O <<'PY'
import json,sys
o=sys.argv[1]
def load(f,sec):
    d=json.load(open(f)); c=d['hbm_ceiling_gbps']
    return {(x['dtype'],x['op'],x['cols']):(x['vs_cub'] if sec=='whole' else 100*x['gbps']/c) for x in d['results'] if x['section']==sec and x['variant']=='fast'}
for sec in ('whole','axis1'):
    R={v:[load(f"{o}/all_{v}_{r}.json",sec) for r in (1,2)] for v in ('lb','tiles')}
    M={v:{k:sum(x[k] for x in R[v])/2 for k in R[v][0]} for v in R}
    if sec=='whole':
        for v in M: print(v, "below 1.00:", sum(1 for x in M[v].values() if x<1), "below 0.98:", sum(1 for x in M[v].values() if x<0.98), "of", len(M[v]))
    print(sec, "mean of 2 rounds, lb -> tiles" + (" (vs CUB)" if sec=='whole' else " (% of ceiling)"))
    for dt in ('float32','float64','int32'):
        for op in ('sum','max','argmax'):
            ks=sorted(k for k in M['lb'] if k[0]==dt and k[1]==op)
            print("%-8s %-7s " % (dt,op) + " ".join("%d:%.2f>%.2f" % (k[2].bit_length()-1, M['lb'][k], M['tiles'][k]) for k in ks))
PY
echo "done at $((SECONDS-t0)) s"
