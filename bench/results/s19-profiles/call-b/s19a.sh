#!/usr/bin/env bash
# s19a.sh (session 19, one device call): where the time of #13's missed targets goes (perf on the
# 16-core host: bench/profile_small_jobs.sh) and what bounds #14's short arg rows (ncu counters of
# k_fast_tile against the same rows' sums). Binaries built on the dev machine at main.
set -uo pipefail
source .devdeps/env.sh
python3 - <<'PY'  # xz may be missing there; Python's lzma is not
import lzma, os, tarfile
for b in ("gpured", "bench_reduce"):
    with lzma.open(".devdeps/bin/%s.xz" % b) as f, open(".devdeps/bin/" + b, "wb") as o:
        o.write(f.read())
    os.chmod(".devdeps/bin/" + b, 0o755)
tarfile.open(".devdeps/perfmin.tar.xz").extractall("/tmp/perf")
PY
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
ldd .devdeps/bin/gpured | grep 'not found'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
nproc >> $OUT/gpu.txt; lscpu | grep -E 'Model name' >> $OUT/gpu.txt; cp $0 $OUT/
OUT=$OUT/profile timeout 240 bash bench/profile_small_jobs.sh .devdeps/bin/gpured > $OUT/profile.txt 2>&1
rm -f $OUT/profile/*.data
tail -60 $OUT/profile.txt
# ncu: the k_fast_tile launches (short rows) of float32/float64 sum, argmin and argmax in the
# axis-1 section, a few counters each
timeout 200 ncu --target-processes all --kernel-name-base demangled -k 'regex:k_fast_tile<(Arg|Sum)<(float|double)' \
  --launch-count 200 --csv --page raw \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,dram__bytes_read.sum,launch__grid_size \
  .devdeps/bin/bench_reduce --sections axis1 --repeats 1 --out $OUT/ncu_bench.json > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$? lines $(wc -l < $OUT/ncu.csv)"; tail -3 $OUT/ncu.err
if ! grep -q '^"[0-9]' $OUT/ncu.csv; then # the name filter matched nothing: every short-row launch, fewer
  timeout 100 ncu --target-processes all -k regex:k_fast_tile --launch-count 120 --csv --page raw \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active \
    .devdeps/bin/bench_reduce --sections axis1 --repeats 1 --out $OUT/ncu_bench2.json > $OUT/ncu2.csv 2> $OUT/ncu2.err
  echo "ncu (all k_fast_tile) rc=$? lines $(wc -l < $OUT/ncu2.csv)"
fi
# the same section unprofiled, for the ceiling's percentages on this card
timeout 120 .devdeps/bin/bench_reduce --sections axis1 --repeats 5 --out $OUT/axis1.json > $OUT/axis1.txt 2>&1
grep -A30 "== axis 1" $OUT/axis1.txt | head -32
