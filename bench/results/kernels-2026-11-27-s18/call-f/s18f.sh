#!/bin/bash
# session 18, call F: scratch experiment (not the committed code): arrays above 64 MiB (above
# 2^30 elements: unchanged) in 512-thread tiles with a grid of `waves` rounds of resident blocks,
# each block looping over its share of tiles (k_fast_tiles_loop, one tree a block), for arg ops
# (0.95-0.99 of CUB in a tile a block, call D) and sums and max (GR_LOOP_ALL). One binary:
# without GR_LOOP_WAVES it is the committed code ("t30"). bench_reduce whole, three rounds.
set -u
rm -rf /tmp/o; FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s18f.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="t30 w1 w2 w4 w8"
for r in 1 2 3; do for v in $V; do
  w=${v#w}; [ $v = t30 ] && w=0
  GR_LOOP_WAVES=$w GR_LOOP_ALL=1 timeout 100 $B/bench_reduce_loop --sections whole --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
python3 - $O $V <<'PY'
import json,sys,statistics
o=sys.argv[1]; V=sys.argv[2:]
def load(f):
    d=json.load(open(f))
    return {(x['dtype'],x['op'],x['cols'].bit_length()-1):(x['vs_cub'],x['ms']*1000) for x in d['results'] if x['section']=='whole' and x['variant']=='fast'}
R={v:[load(f"{o}/whole_{v}_{r}.json") for r in (1,2,3)] for v in V}
keys=sorted(R[V[0]][0])
med={v:{k:statistics.median(r[k][0] for r in R[v]) for k in keys} for v in V}
print("%-8s %-7s %3s " % ("dtype","op","lg") + " ".join("%7s" % v for v in V))
for k in keys:
    if k[2] >= 25:
        print("%-8s %-7s %3d " % k + " ".join("%7.3f" % med[v][k] for v in V))
for v in V:
    print(v, "below 1.00 at 2^25-2^30:", sum(med[v][k] < 1 for k in keys if k[2] >= 25), "min %.3f" % min(med[v][k] for k in keys if k[2] >= 25))
PY
echo "done at $((SECONDS-t0)) s"
