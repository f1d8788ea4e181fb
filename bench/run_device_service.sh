#!/usr/bin/env bash
# run_device_service.sh: the service on the GPU machine in one go: build, every gpu-labelled
# test (kernels, backend, the e2e suites with device gpu), then the HTTP load benchmark on
# the CPU and on the GPU. From the repo root after `source .devdeps/env.sh`; logs under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/tmp/devdeps/usr/bin:$PATH
bash tests/gpu/run_device.sh build >"$OUT/build-stage.txt" 2>&1
tail -3 "$OUT/build-stage.txt"
timeout 300 ctest --test-dir build-device -L gpu -j4 --output-on-failure >"$OUT/ctest-gpu.log" 2>&1
echo "ctest -L gpu rc=$?"; grep -E "Test +#|tests passed" "$OUT/ctest-gpu.log"
for dev in cpu gpu; do
  echo "== http_load device=$dev"
  GPURED_BENCH_OUT=$OUT timeout 100 bash bench/http_load.sh build-device/gpured 8 "$dev"
done
