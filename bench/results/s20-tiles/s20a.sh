#!/usr/bin/env bash
# s20a.sh (session 20, call A): k_fast_tile's loads kept in flight while a warp folds, two ways,
# against main (8 vectors a lane, loaded then folded): "P" two register buffers of 4 vectors (the
# next tile's loads issued before this one's fold), "A" cp.async into three shared-memory stages
# of 4 vectors a lane (no registers held by loads in flight). Axis 1, two alternating rounds of
# bench_reduce; register use; the variants' test_gpu_kernels (fast) and compute-sanitizer memcheck
# and racecheck on the small sizes.
set -uo pipefail
F=$OUT; O=/tmp/s20a; rm -rf $O; mkdir -p $O
save() { tar czf $F/s20a.tgz -C /tmp s20a; }
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
for b in main P A; do
  echo "== $b" >> $O/regs.txt
  cuobjdump --dump-resource-usage $B/bench_reduce_$b 2>/dev/null | grep -A1 k_fast_tile | grep -o 'REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*' | sort | uniq -c >> $O/regs.txt
done
cat $O/regs.txt; save
for r in 1 2; do
  for b in main P A; do
    s=$(date +%s)
    timeout 120 $B/bench_reduce_$b --sections axis1 --repeats 5 --out $O/axis1_${b}_$r.json > $O/axis1_${b}_$r.txt 2>&1
    echo "$b round $r rc=$? $(( $(date +%s) - s )) s"; save
  done
done
for b in P A; do
  GR_TEST_VARIANTS=fast timeout 100 $B/test_gpu_kernels_$b > $O/test_kernels_$b.txt 2>&1; echo "test_gpu_kernels $b rc=$?"; tail -2 $O/test_kernels_$b.txt; save
  for tool in memcheck racecheck; do
    GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 60 compute-sanitizer --tool $tool $B/test_gpu_kernels_$b > $O/sanitizer_${tool}_$b.txt 2>&1
    echo "$tool $b rc=$?"; tail -1 $O/sanitizer_${tool}_$b.txt; save
  done
done
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys
O = sys.argv[1]
def load(p):
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['dtype'], r['op'], r['cols']): 100 * r['gbps'] / c for r in d['results'] if r['section'] == 'axis1' and r['variant'] == 'fast' and r['cols'] <= 4096}
v = {b: [load('%s/axis1_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in ('main', 'P', 'A')}
for k in sorted(v['main'][0]):
    print("%-8s %-7s %5d" % k + "".join("  %s %5.1f %5.1f" % (b, v[b][0][k], v[b][1][k]) for b in v))
PY
save
