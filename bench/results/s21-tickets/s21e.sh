#!/usr/bin/env bash
# s21e.sh (session 21, calls E and F): whole arrays only, F (db96174) against P1 = F with
# k_fast_rows's pieces of 1 MiB, not 512 KiB; three alternating rounds, 5 runs a point. Prints
# each op and dtype's ratio to CUB from 2^23 up (where k_fast_rows takes over), all rounds.
set -uo pipefail
F=$OUT; O=/tmp/s21e; rm -rf $O; mkdir -p $O
save() { tar czf $F/s21e.tgz -C /tmp s21e; }
cp $0 $O/
B=.devdeps/bin
python3 - <<'PY'
import lzma, os, glob
for p in glob.glob(".devdeps/bin/*.xz"):
    with lzma.open(p) as f, open(p[:-3], "wb") as o:
        o.write(f.read())
    os.chmod(p[:-3], 0o755)
PY
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $O/gpu.txt
for r in 1 2 3; do
  for b in F P1; do
    timeout 100 $B/bench_reduce_$b --sections whole --repeats 5 --out $O/w_${b}_$r.json > /dev/null 2>&1
    echo "$b round $r rc=$? at ${SECONDS} s"; save
  done
done
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys
O = sys.argv[1]
def load(p):
    d = json.load(open(p))
    return {(r['dtype'], r['op'], r['cols']): r['vs_cub'] for r in d['results'] if r['variant'] == 'fast'}
v = {b: [load('%s/w_%s_%d.json' % (O, b, r)) for r in (1, 2, 3)] for b in ('F', 'P1')}
for k in sorted(v['F'][0]):
    if k[2] >= 2**23:
        f = [x[k] for x in v['F']]; p = [x[k] for x in v['P1']]
        print("%-8s %-7s 2^%d  F %s  P1 %s  mean %+.3f" % (k[0], k[1], k[2].bit_length() - 1, " ".join("%.3f" % x for x in f),
              " ".join("%.3f" % x for x in p), sum(p) / 3 - sum(f) / 3))
for b in v:
    print(b, "below 1.00 from 2^23:", [sum(1 for k in x if k[2] >= 2**23 and x[k] < 1.0) for x in v[b]])
PY
save
