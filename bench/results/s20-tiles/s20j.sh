#!/usr/bin/env bash
# s20j.sh (session 20, call J): the whole-array standing of the committed code (its whole-array
# kernels are session 18's; only short rows changed): two rounds of the whole section, CUB in
# the same runs, and the counts #14 asks about.
set -uo pipefail
F=$OUT; O=/tmp/s20j; rm -rf $O; mkdir -p $O
save() { tar czf $F/s20j.tgz -C /tmp s20j; }
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
for r in 1 2; do
  timeout 150 $B/bench_reduce_final --sections whole --repeats 25 --out $O/whole_$r.json > $O/whole_$r.txt 2>&1
  echo "round $r rc=$? at ${SECONDS} s"; save
done
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys, math
O = sys.argv[1]
runs = [{(r['dtype'], r['op'], r['cols']): r['vs_cub'] for r in json.load(open('%s/whole_%d.json' % (O, i)))['results']
         if r['section'] == 'whole' and r['variant'] == 'fast'} for i in (1, 2)]
keys = sorted(runs[0])
for k in keys:
    print("%-8s %-7s 2^%-2d %.3f %.3f" % (k[0], k[1], int(math.log2(k[2])), runs[0][k], runs[1][k]))
for i, v in enumerate(runs):
    below = sorted((v[k], k) for k in keys if v[k] < 1.0)
    small = [k for k in keys if 2**12 <= k[2] <= 2**16]
    print("round %d: %d points, below 1.00: %d (%s); >= 1.3 at 2^12-2^16: %d of %d" % (
        i + 1, len(keys), len(below), ", ".join("%s %s 2^%d %.3f" % (k[0], k[1], int(math.log2(k[2])), x) for x, k in below),
        sum(1 for k in small if v[k] >= 1.3), len(small)))
PY
save
