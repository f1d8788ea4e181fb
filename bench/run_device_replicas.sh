#!/usr/bin/env bash
# run_device_replicas.sh: replicas on the GPU machine in one go: build gpured, the gpu-labelled
# affinity suite (two replicas on one PostgreSQL, tests/e2e/test_affinity.py), then
# bench/affinity.py. From the repo root after `source .devdeps/env.sh` with PostgreSQL's bin on
# GPURED_PG_BIN; logs and JSON under $OUT.
#   bash bench/run_device_replicas.sh [seconds] [connections] [MiB per dataset]
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
chart=/tmp/devdeps/usr/share/javascript/chart.js/chart.min.js extra=()
if [ ! -d /usr/share/javascript/chart.js ]; then
    [ -f $chart ] || for f in .devdeps/libjs-chart.js*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/devdeps; done
    [ -f $chart ] && extra=(-DGPURED_CHARTJS=$chart)
fi
cmake -S . -B build-device -DCMAKE_CUDA_ARCHITECTURES=90 -DGPURED_WERROR=ON "${extra[@]}" >"$OUT/build.log" 2>&1 &&
    cmake --build build-device -j"$(nproc)" --target gpured >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "== test_affinity (gpu)"
GPURED_BIN=build-device/gpured GPURED_TEST_DEVICE=gpu timeout 240 python3 tests/e2e/test_affinity.py >"$OUT/test_affinity.log" 2>&1
echo "rc=$?"; grep -vE "^ok " "$OUT/test_affinity.log" | tail -15
echo "== bench/affinity.py"
GPURED_BENCH_OUT=$OUT timeout 300 python3 bench/affinity.py build-device/gpured "${1:-10}" "${2:-32}" "${3:-1024}"
