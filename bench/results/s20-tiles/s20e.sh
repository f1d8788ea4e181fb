#!/usr/bin/env bash
# s20e.sh (session 20, call E): rows of 8 vectors (float32 and int32 rows of 32, float64 of 16,
# the lowest points left) with 2 lanes a row ("G2": 4 vectors a lane, one shuffle level, loads
# 32 bytes contiguous) against the kept tiles' 4 lanes (2 vectors a lane, two levels), axis 1,
# two alternating rounds; G2's test_gpu_kernels (fast) and compute-sanitizer memcheck.
set -uo pipefail
F=$OUT; O=/tmp/s20e; rm -rf $O; mkdir -p $O
save() { tar czf $F/s20e.tgz -C /tmp s20e; }
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
  for b in new G2; do
    timeout 120 $B/bench_reduce_$b --sections axis1 --repeats 5 --out $O/axis1_${b}_$r.json > $O/axis1_${b}_$r.txt 2>&1
    echo "$b round $r rc=$?"; save
  done
done
GR_TEST_VARIANTS=fast timeout 120 $B/test_gpu_kernels_G2 > $O/test_kernels.txt 2>&1; echo "test_gpu_kernels rc=$?"; tail -1 $O/test_kernels.txt; save
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 90 compute-sanitizer --tool memcheck $B/test_gpu_kernels_G2 > $O/sanitizer_memcheck.txt 2>&1
echo "memcheck rc=$?"; tail -1 $O/sanitizer_memcheck.txt; save
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys
O = sys.argv[1]
def load(p):
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['dtype'], r['op'], r['cols']): 100 * r['gbps'] / c for r in d['results'] if r['section'] == 'axis1' and r['variant'] == 'fast'}
v = {b: [load('%s/axis1_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in ('new', 'G2')}
for k in sorted(v['new'][0]):
    if k[2] <= 128:
        print("%-8s %-7s %7d" % k + "".join("  %s %5.1f %5.1f" % (b, v[b][0][k], v[b][1][k]) for b in v))
PY
save
