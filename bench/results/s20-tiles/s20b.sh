#!/usr/bin/env bash
# s20b.sh (session 20, call B): call A's "P" (two register buffers of 4 vectors, U = 4 tiles) won
# on the H100 at rows of 2^5-2^7 and lost arg ops at rows of R = 64-128 vectors (a row's lanes
# went from 8 to 16-32, one or two more shuffle levels). "H" keeps main's tile shape (8 vectors a
# lane, U = 8) and pipelines it in halves: the second half's loads in flight while the first is
# folded, the next tile's first half while the second is. Against main and P, as call A; H's
# test_gpu_kernels (fast) and sanitizers.
set -uo pipefail
F=$OUT; O=/tmp/s20b; rm -rf $O; mkdir -p $O
save() { tar czf $F/s20b.tgz -C /tmp s20b; }
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
for b in main P H; do
  echo "== $b" >> $O/regs.txt
  cuobjdump --dump-resource-usage $B/bench_reduce_$b 2>/dev/null | grep -A1 k_fast_tile | grep -o 'REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*' | sort | uniq -c >> $O/regs.txt
done
cat $O/regs.txt; save
for r in 1 2; do
  for b in main P H; do
    s=$(date +%s)
    timeout 120 $B/bench_reduce_$b --sections axis1 --repeats 5 --out $O/axis1_${b}_$r.json > $O/axis1_${b}_$r.txt 2>&1
    echo "$b round $r rc=$? $(( $(date +%s) - s )) s"; save
  done
done
for b in H; do
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
v = {b: [load('%s/axis1_%s_%d.json' % (O, b, r)) for r in (1, 2)] for b in ('main', 'P', 'H')}
for k in sorted(v['main'][0]):
    print("%-8s %-7s %5d" % k + "".join("  %s %5.1f %5.1f" % (b, v[b][0][k], v[b][1][k]) for b in v))
PY
save
