#!/bin/bash
# session 18, call I: short rows of 8 and 16 vectors with 2 lanes a row instead of 4 (scratch
# binary: GR_TILE_GMIN sets the least lanes a row above 4 vectors; 4 is the committed code's):
# bench_reduce axis1, alternating, three rounds; call G/H's H200 had float32 argmax rows of 32 at
# 64% of the ceiling, float64 argmax rows of 16 at 71%, float32 argmax rows of 64 at 77%
set -u
rm -rf /tmp/o; FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s18i.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="g4 g2"
for r in 1 2 3; do for v in $V; do
  GR_TILE_GMIN=${v#g} timeout 60 $B/bench_reduce_gmin --sections axis1 --repeats 25 --out $O/axis1_${v}_$r.json > $O/axis1_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
done; done
python3 - $O $V <<'PY'
import json,sys,statistics
o=sys.argv[1]; V=sys.argv[2:]
def load(f):
    d=json.load(open(f)); c=d['hbm_ceiling_gbps']
    return {(x['dtype'],x['op'],x['cols']):100*x['gbps']/c for x in d['results'] if x['section']=='axis1' and x['variant']=='fast'}
R={v:[load(f"{o}/axis1_{v}_{r}.json") for r in (1,2,3)] for v in V}
keys=sorted(R[V[0]][0])
m={v:{k:statistics.median(r[k] for r in R[v]) for k in keys} for v in V}
for v in V: print(v, "min %.1f" % min(m[v].values()), "below 80:", sum(x < 80 for x in m[v].values()))
print("%-8s %-7s %6s " % ("dtype","op","cols") + " ".join("%6s" % v for v in V))
for k in keys:
    if k[2] in (32, 64) or (k[0] in ("float64", "int64") and k[2] in (16, 32)) or abs(m["g4"][k] - m["g2"][k]) > 1.5:
        print("%-8s %-7s %6d " % k + " ".join("%6.1f" % m[v][k] for v in V))
PY
echo "done at $((SECONDS-t0)) s"
