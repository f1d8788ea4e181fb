#!/usr/bin/env bash
# run_device_data.sh: the data plane and matmul on the GPU machine in one go: build, every
# gpu-labelled test, then the benchmarks through the service (bench/data_plane.py), cuBLAS beside
# our kernels (bench_matmul) and matmul jobs through the service (bench/matmul_api.py); with
# UPLOAD=1 also bench/upload.sh. From the repo root after `source .devdeps/env.sh`; logs and JSON
# under $OUT, tables printed last.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/tmp/devdeps/usr/bin:$PATH
bash tests/gpu/run_device.sh build test >"$OUT/build-test.txt" 2>&1
tail -60 "$OUT/build-test.txt"
if [ "${UPLOAD:-0}" = 1 ]; then
  echo "== upload"
  timeout 180 bash bench/upload.sh build-device/gpured "$OUT/upload.json" . 2>&1 | tail -12
fi
echo "== data plane"
timeout 150 python3 bench/data_plane.py build-device/gpured "$OUT/data_plane.json" 2>&1 | tail -8
echo "== matmul kernels"
timeout 150 build-device/bench/bench_matmul --max-n 8192 --repeats 5 --json "$OUT/bench_matmul.json" >"$OUT/bench_matmul.txt" 2>&1
echo "rc=$?"; sed -n '/^summary/,$p' "$OUT/bench_matmul.txt" | head -40
echo "== matmul jobs"
timeout 150 python3 bench/matmul_api.py build-device/gpured "$OUT/bench_matmul.json" "$OUT/matmul_api.json" 2>&1 | tail -8
