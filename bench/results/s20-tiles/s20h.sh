#!/usr/bin/env bash
# s20h.sh (session 20, call H): the code as committed against main before the session (b551979):
# sums, min and max with loads ahead to rows of 32 vectors; arg ops ahead only at 8 vectors,
# with 2 lanes a row (call F's "G2" there), not ahead elsewhere (as main); rows of 256 vectors
# a warp each. Axis 1, two alternating rounds; the whole test_gpu_kernels and compute-sanitizer
# memcheck and racecheck.
set -uo pipefail
F=$OUT; O=/tmp/s20h; rm -rf $O; mkdir -p $O
save() { tar czf $F/s20h.tgz -C /tmp s20h; }
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
  for b in main final; do
    timeout 100 $B/bench_reduce_$b --sections axis1 --repeats 5 --out $O/axis1_${b}_$r.json > /dev/null 2>&1
    echo "$b round $r rc=$?"; save
  done
done
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys
O = sys.argv[1]
def load(p):
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['dtype'], r['op'], r['cols']): 100 * r['gbps'] / c for r in d['results'] if r['section'] == 'axis1' and r['variant'] == 'fast'}
v = {b: [load('%s/axis1_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in ('main', 'final')}
for k in sorted(v['main'][0]):
    if k[2] <= 4096:
        print("%-8s %-7s %7d" % k + "".join("  %s %5.1f %5.1f" % (b, v[b][0][k], v[b][1][k]) for b in v))
for b in v:
    lo = sorted((min(v[b][0][k], v[b][1][k]), k) for k in v[b][0])
    print(b, "below 80%:", ", ".join("%s %s %d %.1f" % (k + (m,)) for m, k in lo if m < 80) or "none",
          "; argmax from 2^10 below 90%:", ", ".join("%s %s %d %.1f" % (k + (m,)) for m, k in lo if m < 90 and k[1] == 'argmax' and k[2] >= 1024) or "none")
PY
save
s=$(date +%s); timeout 200 $B/test_gpu_kernels_final > $O/test_kernels.txt 2>&1; echo "test_gpu_kernels rc=$? $(( $(date +%s) - s )) s"; tail -4 $O/test_kernels.txt; save
for tool in memcheck racecheck; do
  GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 80 compute-sanitizer --tool $tool $B/test_gpu_kernels_final > $O/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$?"; tail -2 $O/sanitizer_$tool.txt; save
done
