#!/usr/bin/env bash
# s20d.sh (session 20, call D): the kept tiles (7041265) against main before them (b551979) and
# "L" (the kept code with a fourth block an SM for the loads-ahead shape: __launch_bounds__(256,
# 4), which spills 20-60 bytes a thread there), axis 1, two alternating rounds; on an H200 also
# the whole-array section of main and the kept code, where session 19's misses were measured.
set -uo pipefail
F=$OUT; O=/tmp/s20d; rm -rf $O; mkdir -p $O
save() { tar czf $F/s20d.tgz -C /tmp s20d; }
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
for b in main new L; do
  echo "== $b" >> $O/regs.txt
  cuobjdump --dump-resource-usage $B/bench_reduce_$b 2>/dev/null | grep -A1 '11k_fast_tileI' | grep -o 'REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*' | sort | uniq -c >> $O/regs.txt
done
save
for r in 1 2; do
  for b in main new L; do
    timeout 120 $B/bench_reduce_$b --sections axis1 --repeats 5 --out $O/axis1_${b}_$r.json > $O/axis1_${b}_$r.txt 2>&1
    echo "$b round $r rc=$?"; save
  done
done
if grep -q H200 $O/gpu.txt; then
  for b in main new; do
    timeout 200 $B/bench_reduce_$b --sections whole --repeats 10 --out $O/whole_${b}.json > $O/whole_${b}.txt 2>&1
    echo "$b whole rc=$?"; save
  done
fi
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys
O = sys.argv[1]
def load(p):
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['dtype'], r['op'], r['cols']): 100 * r['gbps'] / c for r in d['results'] if r['section'] == 'axis1' and r['variant'] == 'fast'}
v = {b: [load('%s/axis1_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in ('main', 'new', 'L')}
for k in sorted(v['main'][0]):
    print("%-8s %-7s %7d" % k + "".join("  %s %5.1f %5.1f" % (b, v[b][0][k], v[b][1][k]) for b in v))
for b in v:
    lo = sorted((min(v[b][0][k], v[b][1][k]), k) for k in v[b][0])
    print(b, "below 80%:", sum(1 for m, k in lo if m < 80), "; argmax from 2^10 below 90%:",
          sum(1 for m, k in lo if m < 90 and k[1] == 'argmax' and k[2] >= 1024), "; lowest:",
          ", ".join("%s %s %d %.1f%%" % (k + (m,)) for m, k in lo[:5]))
PY
save
