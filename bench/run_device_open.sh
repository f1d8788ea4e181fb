#!/usr/bin/env bash
# run_device_open.sh: what the open issues still lack from the GPU machine: build, every
# gpu-labelled test (the GPU metrics suite checks NVML's utilisation series), NVML's series as
# /metrics gives it, launch groups on the GPU (bench/batch.py, --launch-group 1 against 256),
# 1,000 event subscribers against the small-job rate on 16 cores (bench/events_load.py), and the
# small-job HTTP load on the GPU. From the repo root after `source .devdeps/env.sh`:
#   bash bench/run_device_open.sh [build] [test] [nvml] [batch] [events] [http]   (default: all)
# All of it runs past one call's 10 minutes: split it, build first in each call (a warm machine
# keeps the build). Logs and JSON under $OUT, tables printed.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/tmp/devdeps/usr/bin:$PATH
BIN=build-device/gpured

stage_build() { bash tests/gpu/run_device.sh build >"$OUT/build.txt" 2>&1; tail -3 "$OUT/build.txt"; }
stage_test() { bash tests/gpu/run_device.sh test >"$OUT/test.txt" 2>&1; tail -40 "$OUT/test.txt"; }

stage_nvml() {
    echo "== NVML: the utilisation series, as /metrics gives it, and the start log's word on it"
    local d pid
    d=$(mktemp -d)
    $BIN serve --port 18181 --data-dir "$d" >"$OUT/nvml-serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf localhost:18181/healthz >/dev/null && break; sleep 0.2; done
    curl -s localhost:18181/metrics | grep '^gpured_device_utilization_ratio' || echo "no utilisation series"
    grep 'utilisation' "$OUT/nvml-serve.log"
    kill $pid; wait $pid; rm -rf "$d"
}

stage_batch() {
    echo "== launch groups (bench/batch.py cpu,gpu)"
    GPURED_BENCH_OUT=$OUT timeout 240 python3 bench/batch.py $BIN cpu,gpu 2>&1 | tail -26
}

stage_events() {
    echo "== event subscribers (bench/events_load.py, 10 s per row)"
    GPURED_BENCH_OUT=$OUT timeout 120 python3 bench/events_load.py $BIN 10 1000 64 2>&1 | tail -6
}

stage_http() {
    echo "== small jobs over HTTP, device gpu"
    GPURED_BENCH_OUT=$OUT timeout 100 bash bench/http_load.sh $BIN 8 gpu 2>&1 | tail -8
}

for s in ${*:-build test nvml batch events http}; do "stage_$s"; done
