#!/usr/bin/env bash
# run_device_open.sh: what the open issues still lack from the GPU machine, in one go (about
# 8 minutes): build, every gpu-labelled test (the GPU metrics suite checks NVML's utilisation
# series), then launch groups on the GPU (bench/batch.py, --launch-group 1 against 256), 1,000
# event subscribers against the small-job rate on 16 cores (bench/events_load.py), and the
# small-job HTTP load on the GPU. From the repo root after `source .devdeps/env.sh`; logs and JSON
# under $OUT, tables printed last.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/tmp/devdeps/usr/bin:$PATH
bash tests/gpu/run_device.sh build test >"$OUT/build-test.txt" 2>&1
tail -40 "$OUT/build-test.txt"
echo "== NVML: the utilisation series, as /metrics gives it, and the start log's word on it"
d=$(mktemp -d)
build-device/gpured serve --port 18181 --data-dir "$d" >"$OUT/nvml-serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf localhost:18181/healthz >/dev/null && break; sleep 0.2; done
curl -s localhost:18181/metrics | grep '^gpured_device_utilization_ratio' || echo "no utilisation series"
grep 'utilisation' "$OUT/nvml-serve.log"
kill $pid; wait $pid; rm -rf "$d"
echo "== launch groups (bench/batch.py cpu,gpu)"
GPURED_BENCH_OUT=$OUT timeout 240 python3 bench/batch.py build-device/gpured cpu,gpu 2>&1 | tail -26
echo "== event subscribers (bench/events_load.py, 10 s per row)"
GPURED_BENCH_OUT=$OUT timeout 120 python3 bench/events_load.py build-device/gpured 10 1000 64 2>&1 | tail -6
echo "== small jobs over HTTP, device gpu"
GPURED_BENCH_OUT=$OUT timeout 100 bash bench/http_load.sh build-device/gpured 8 gpu 2>&1 | tail -8
