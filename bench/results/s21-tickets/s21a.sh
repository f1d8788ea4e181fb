#!/usr/bin/env bash
# s21a.sh (session 21, call A): "X" = the ticket taken with an acq_rel atomic (no fence.sc),
# 8-byte arg rows to 32 KiB a warp each; "Y" = X with
# every op's short rows to 32 KiB; "M" = main (ef602cd's kernels). Axis 1 and whole arrays,
# alternating rounds; whole arrays to 2^17 at 25 runs a point, alternating; then X's
# test_gpu_kernels and compute-sanitizer as the time left allows.
set -uo pipefail
F=$OUT; O=/tmp/s21a; rm -rf $O; mkdir -p $O
save() { tar czf $F/s21a.tgz -C /tmp s21a; }
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
for b in M X; do cuobjdump -sass $B/bench_reduce_$b | grep -oE "MEMBAR\.[A-Z.]+|ATOM[A-Z.]*|CCTL[A-Z.]*" | sort | uniq -c > $O/sass_$b.txt; done
head -20 $O/sass_*.txt
for r in 1 2; do
  for b in M X Y; do
    timeout 120 $B/bench_reduce_$b --sections axis1,whole --repeats 5 --out $O/r_${b}_$r.json > /dev/null 2>&1
    echo "$b round $r rc=$? at ${SECONDS} s"; save
  done
done
for r in 1 2; do
  for b in M X; do
    timeout 60 $B/bench_reduce_$b --sections whole --max-log2 17 --repeats 25 --out $O/s_${b}_$r.json > /dev/null 2>&1
    echo "$b small round $r rc=$? at ${SECONDS} s"; save
  done
done
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys, os
O = sys.argv[1]
def load(p):
    if not os.path.exists(p): return {}
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['section'], r['dtype'], r['op'], r['cols']): (100 * r['gbps'] / c if r['section'] == 'axis1' else r['vs_cub'])
            for r in d['results'] if r['variant'] == 'fast'}
bs = ('M', 'X', 'Y')
v = {b: [load('%s/r_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in bs}
s = {b: [load('%s/s_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in ('M', 'X')}
for k in sorted(v['M'][0]):
    if k[0] == 'axis1' and 16384 <= k[3] * (8 if k[1] == 'float64' else 4) <= 65536 or k[0] == 'whole' and (k[3] >= 2**22 or k[3] <= 2**17):
        print("%-6s %-8s %-7s %10d" % k + "".join("  %s %6.3f %6.3f" % (b, v[b][0].get(k, 0), v[b][1].get(k, 0)) for b in bs)
              + ("  |25 runs| M %6.3f %6.3f X %6.3f %6.3f" % (s['M'][0].get(k, 0), s['M'][1].get(k, 0), s['X'][0].get(k, 0), s['X'][1].get(k, 0)) if k in s['M'][0] else ""))
def summ(name, a):
    print(name, "axis1 below 80%:", ", ".join("%s %s %d %.1f" % (k[1], k[2], k[3], a[k]) for k in sorted(a) if k[0] == 'axis1' and a[k] < 80) or "none",
          "| argmax from 2^10 below 90%:", ", ".join("%s %d %.1f" % (k[1], k[3], a[k]) for k in sorted(a) if k[0] == 'axis1' and k[2] == 'argmax' and k[3] >= 1024 and a[k] < 90) or "none",
          "| whole below 1.00:", sum(1 for k in a if k[0] == 'whole' and a[k] < 1.0),
          "| >= 1.3 at 2^12-2^16:", sum(1 for k in a if k[0] == 'whole' and 2**12 <= k[3] <= 2**16 and a[k] >= 1.3))
for b in bs:
    for r in (0, 1):
        summ("%s %d" % (b, r + 1), v[b][r])
for p in sorted(os.listdir(O)):
    if p.endswith('.json'):
        print(p, "launch floor %s ms" % json.load(open(os.path.join(O, p))).get('launch_floor_ms'))
for b in ('M', 'X'):
    for r in (0, 1):
        summ("%s small(25) %d" % (b, r + 1), s[b][r])
PY
save
left=$(( 560 - SECONDS ))
if [ $left -gt 150 ]; then
  s=$(date +%s); timeout $(( left - 100 )) $B/test_gpu_kernels_X > $O/test_kernels.txt 2>&1; echo "test_gpu_kernels rc=$? $(( $(date +%s) - s )) s"; tail -4 $O/test_kernels.txt; save
fi
for tool in memcheck racecheck; do
  left=$(( 580 - SECONDS ))
  [ $left -gt 40 ] || { echo "no time for $tool"; continue; }
  GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout $left compute-sanitizer --tool $tool $B/test_gpu_kernels_X > $O/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$?"; tail -2 $O/sanitizer_$tool.txt; save
done
