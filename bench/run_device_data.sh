#!/usr/bin/env bash
# run_device_data.sh: the data plane on the GPU machine in one go: build, every gpu-labelled test,
# the upload benchmark (bench/upload.sh) and the ingest/cache/lanes benchmark (bench/data_plane.py).
# From the repo root after `source .devdeps/env.sh`; logs and JSON under $OUT, a table printed last.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/tmp/devdeps/usr/bin:$PATH
bash tests/gpu/run_device.sh build test >"$OUT/build-test.txt" 2>&1
tail -40 "$OUT/build-test.txt"
echo "== upload"
timeout 180 bash bench/upload.sh build-device/gpured "$OUT/upload.json" . 2>&1 | tail -15
echo "== data plane"
timeout 240 python3 bench/data_plane.py build-device/gpured "$OUT/data_plane.json" 2>&1 | tail -15
