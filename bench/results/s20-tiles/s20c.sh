#!/usr/bin/env bash
# s20c.sh (session 20, call C): the tiles as committed (rows to 32 vectors: 4 loads a lane, the
# next tile's ahead; 64-128: 8 a lane, not ahead; longer a warp each) against main before it,
# axis 1, two alternating rounds of bench_reduce; register use; the whole test_gpu_kernels (every
# variant and the big cases) and compute-sanitizer memcheck and racecheck on the small sizes.
set -uo pipefail
F=$OUT; O=/tmp/s20c; rm -rf $O; mkdir -p $O
save() { tar czf $F/s20c.tgz -C /tmp s20c; }
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
for b in main new; do
  echo "== $b" >> $O/regs.txt
  cuobjdump --dump-resource-usage $B/bench_reduce_$b 2>/dev/null | grep -A1 '11k_fast_tileI' | grep -o 'REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*' | sort | uniq -c >> $O/regs.txt
done
cat $O/regs.txt; save
for r in 1 2; do
  for b in main new; do
    s=$(date +%s)
    timeout 120 $B/bench_reduce_$b --sections axis1 --repeats 5 --out $O/axis1_${b}_$r.json > $O/axis1_${b}_$r.txt 2>&1
    echo "$b round $r rc=$? $(( $(date +%s) - s )) s"; save
  done
done
s=$(date +%s); timeout 240 $B/test_gpu_kernels_new > $O/test_kernels.txt 2>&1; echo "test_gpu_kernels rc=$? $(( $(date +%s) - s )) s"; tail -4 $O/test_kernels.txt; save
for tool in memcheck racecheck; do
  GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 90 compute-sanitizer --tool $tool $B/test_gpu_kernels_new > $O/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$?"; tail -2 $O/sanitizer_$tool.txt; save
done
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys
O = sys.argv[1]
def load(p):
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['dtype'], r['op'], r['cols']): 100 * r['gbps'] / c for r in d['results'] if r['section'] == 'axis1' and r['variant'] == 'fast'}
v = {b: [load('%s/axis1_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in ('main', 'new')}
for k in sorted(v['main'][0]):
    print("%-8s %-7s %7d" % k + "".join("  %s %5.1f %5.1f" % (b, v[b][0][k], v[b][1][k]) for b in v))
lo = sorted((min(v['new'][0][k], v['new'][1][k]), k) for k in v['new'][0])[:6]
print("lowest (new):", ", ".join("%s %s %d %.1f%%" % (k + (m,)) for m, k in lo))
PY
save
