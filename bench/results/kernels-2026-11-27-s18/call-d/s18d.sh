#!/bin/bash
# session 18, call D: whole arrays in tiles up to 2^30 elements ("big": tiles_max 2^30, for
# k_fast_rows's 0.99 at 2^25-2^29) and the same with the finisher's partial loads unrolled by 8
# ("bigu"), against the committed code ("fin"): bench_reduce whole 2^10-2^30, alternating, three
# rounds; then sqlite_floor (the one writer's SQLite share of a 100k batch) on this host
set -u
rm -rf /tmp/o; FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s18d.tgz -C /tmp o" EXIT
t0=$SECONDS
source .devdeps/env.sh
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
V="fin big bigu"
for r in 1 2 3; do for v in $V; do
  timeout 100 $B/bench_reduce_$v --sections whole --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$? at $((SECONDS-t0)) s"
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
us={v:{k:statistics.median(r[k][1] for r in R[v]) for k in keys} for v in V}
for v in V:
    m=med[v]
    print(v, "below 1.00:", sum(m[k]<1.0 for k in keys), "below 0.98:", sum(m[k]<0.98 for k in keys), ">=1.3 at 2^12-16:", sum(m[k]>=1.3 for k in keys if 12<=k[2]<=16))
print("%-8s %-7s %3s " % ("dtype","op","lg") + " ".join("%16s" % v for v in V))
for k in keys:
    if k[2] >= 22:
        print("%-8s %-7s %3d " % k + " ".join("%6.3f %8.2fus" % (med[v][k], us[v][k]) for v in V))
PY
mkdir -p /tmp/floor && cd /tmp/floor && gcc -O2 $OLDPWD/bench/results/small-jobs-2026-11-27-s18/sqlite_floor.c -lsqlite3 -o floor && for d in 2 473; do ./floor $d; done | tee $O/sqlite_floor.txt
echo "done at $((SECONDS-t0)) s"
