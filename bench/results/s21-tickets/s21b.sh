#!/usr/bin/env bash
# s21b.sh BINS TESTED [no] (session 21, calls B, C, D and F): bench_reduce_<b> for each b in BINS, axis 1 and
# whole arrays, two alternating rounds (5 runs a point); whole arrays to 2^17 at 25 runs a point,
# one round each; then test_gpu_kernels_<t> for each t in TESTED and compute-sanitizer memcheck
# and racecheck over the first one's small run (unless the third argument is "no"), as the time
# left allows. M = main before the session (ef602cd's kernels),
# F = db96174 (an arg op's short rows to 32 KiB), V = F with the arg scan's tie rule a compile-time
# choice (one uniform branch a vector, not a compare and an AND an element), V1 = V for float32
# vectors without NaNs only, P2 = F with an arg op's k_fast_rows pieces of 1 MiB (call F).
set -uo pipefail
BINS=$1; T=$2; SAN=${3:-yes}
F=$OUT; O=/tmp/s21b; rm -rf $O; mkdir -p $O
save() { tar czf $F/s21b.tgz -C /tmp s21b; }
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
  for b in $BINS; do
    timeout 120 $B/bench_reduce_$b --sections axis1,whole --repeats 5 --out $O/r_${b}_$r.json > /dev/null 2>&1
    echo "$b round $r rc=$? at ${SECONDS} s"; save
  done
done
for b in $BINS; do
  timeout 60 $B/bench_reduce_$b --sections whole --max-log2 17 --repeats 25 --out $O/s_${b}_1.json > /dev/null 2>&1
  echo "$b small rc=$? at ${SECONDS} s"; save
done
python3 - $O "$BINS" <<'PY' | tee $O/compare.txt
import json, sys, os
O = sys.argv[1]; bs = sys.argv[2].split()
def load(p):
    if not os.path.exists(p): return {}
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['section'], r['dtype'], r['op'], r['cols']): (100 * r['gbps'] / c if r['section'] == 'axis1' else r['vs_cub'])
            for r in d['results'] if r['variant'] == 'fast'}
v = {b: [load('%s/r_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in bs}
s = {b: load('%s/s_%s_1.json' % (O, b)) for b in bs}
for k in sorted(v[bs[0]][0]):
    if k[2] == 'argmax' and (k[0] == 'axis1' and k[3] <= 16384 or k[0] == 'whole' and k[3] >= 2**20):
        print("%-6s %-8s %-7s %10d" % k + "".join("  %s %6.3f %6.3f" % (b, v[b][0].get(k, 0), v[b][1].get(k, 0)) for b in bs))
def summ(name, a):
    print(name, "axis1 below 80%:", ", ".join("%s %s %d %.1f" % (k[1], k[2], k[3], a[k]) for k in sorted(a) if k[0] == 'axis1' and a[k] < 80) or "none",
          "| argmax from 2^10 below 90%:", ", ".join("%s %d %.1f" % (k[1], k[3], a[k]) for k in sorted(a) if k[0] == 'axis1' and k[2] == 'argmax' and k[3] >= 1024 and a[k] < 90) or "none",
          "| whole below 1.00:", sum(1 for k in a if k[0] == 'whole' and a[k] < 1.0),
          "| >= 1.3 at 2^12-2^16:", sum(1 for k in a if k[0] == 'whole' and 2**12 <= k[3] <= 2**16 and a[k] >= 1.3))
for b in bs:
    for r in (0, 1):
        summ("%s %d" % (b, r + 1), v[b][r])
    summ("%s small(25)" % b, s[b])
PY
save
for t in $T; do
  left=$(( 560 - SECONDS ))
  [ $left -gt 150 ] || { echo "no time for test_gpu_kernels_$t"; continue; }
  s=$(date +%s); timeout $(( left - 90 )) $B/test_gpu_kernels_$t > $O/test_kernels_$t.txt 2>&1; echo "test_gpu_kernels_$t rc=$? $(( $(date +%s) - s )) s"; tail -4 $O/test_kernels_$t.txt; save
done
T=${T%% *}
for tool in memcheck racecheck; do
  [ "$SAN" = yes ] || break
  left=$(( 585 - SECONDS ))
  [ $left -gt 40 ] || { echo "no time for $tool"; continue; }
  GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout $left compute-sanitizer --tool $tool $B/test_gpu_kernels_$T > $O/sanitizer_${tool}_$T.txt 2>&1
  echo "$tool rc=$?"; tail -2 $O/sanitizer_${tool}_$T.txt; save
done
