#!/usr/bin/env bash
# s19c.sh (session 19, call C): k_fast_tile with __launch_bounds__(256, 4) ("lb4": at most 64
# registers, a fourth block of 256 an SM) against main's (256, 3), axis 1, two alternating
# rounds of bench_reduce; register use of both; the variant's test_gpu_kernels (fast) and its
# compute-sanitizer memcheck and racecheck on the small sizes.
set -uo pipefail
F=$OUT; O=/tmp/o3; rm -rf $O; mkdir -p $O
save() { tar czf $F/s19c.tgz -C /tmp o3; } # after every step: a call cut short still brings back what ran
cp $0 $O/
python3 - <<'PY'
import lzma, os
for b in ("bench_reduce", "bench_reduce_lb4", "test_gpu_kernels_lb4"):
    with lzma.open(".devdeps/bin/%s.xz" % b) as f, open(".devdeps/bin/" + b, "wb") as o:
        o.write(f.read())
    os.chmod(".devdeps/bin/" + b, 0o755)
PY
B=.devdeps/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for b in bench_reduce bench_reduce_lb4; do
  echo "== $b" >> $O/regs.txt
  cuobjdump --dump-resource-usage $B/$b 2>/dev/null | grep -A1 k_fast_tile | grep -o 'REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*' | sort | uniq -c >> $O/regs.txt
done
cat $O/regs.txt; save
for r in 1 2; do
  for b in bench_reduce bench_reduce_lb4; do
    timeout 100 $B/$b --sections axis1 --repeats 5 --out $O/axis1_${b}_$r.json > $O/axis1_${b}_$r.txt 2>&1
    echo "$b round $r rc=$?"; save
  done
done
GR_TEST_VARIANTS=fast timeout 150 $B/test_gpu_kernels_lb4 > $O/test_kernels.txt 2>&1; echo "test_gpu_kernels rc=$?"; tail -3 $O/test_kernels.txt; save
for tool in memcheck racecheck; do
  GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 90 compute-sanitizer --tool $tool $B/test_gpu_kernels_lb4 > $O/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$?"; tail -2 $O/sanitizer_$tool.txt; save
done
python3 - $O <<'PY' | tee $O/compare.txt
import json, sys, glob
O = sys.argv[1]
def load(p):
    d = json.load(open(p)); c = d['hbm_ceiling_gbps']
    return {(r['dtype'], r['op'], r['cols']): 100 * r['gbps'] / c for r in d['results'] if r['section'] == 'axis1' and r['variant'] == 'fast' and r['cols'] <= 1024}
a = [load('%s/axis1_bench_reduce_%d.json' % (O, r)) for r in (1, 2)]
b = [load('%s/axis1_bench_reduce_lb4_%d.json' % (O, r)) for r in (1, 2)]
for k in sorted(a[0]):
    print("%-8s %-7s %5d  main %5.1f %5.1f  lb4 %5.1f %5.1f" % (k + (a[0][k], a[1][k], b[0][k], b[1][k])))
PY
save
