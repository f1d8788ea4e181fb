#!/bin/bash
# run_device.sh: the one script a GPU-machine run executes: build, `ctest -L gpu`, compute-sanitizer
# on a small run of every kernel variant, the reduction benchmark; logs and JSON under $OUT, a short
# table printed last. From the repo root, after `source .devdeps/env.sh`:
#   bash tests/gpu/run_device.sh [build] [test] [memcheck] [racecheck] [bench]   (default: all)
# Stages have their own time limits so that one hanging stage never costs the others.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
B=build-device
stages=" ${*:-build test memcheck racecheck bench} "
table=()
note() { table+=("$(printf '%-10s %s' "$1" "$2")"); }
want() { [[ $stages == *" $1 "* ]]; }
nproc=$(nproc)

{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
    nvcc --version | tail -2
    date -u
} >"$OUT/device.txt" 2>&1

if want build; then
    t0=$SECONDS
    # the dashboard embeds Debian's Chart.js; the GPU machine has none: use one packed in .devdeps
    chart=/tmp/devdeps/usr/share/javascript/chart.js/chart.min.js extra=()
    if [ ! -d /usr/share/javascript/chart.js ]; then
        [ -f $chart ] || for f in .devdeps/libjs-chart.js*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/devdeps; done
        [ -f $chart ] && extra=(-DGPURED_CHARTJS=$chart)
    fi
    if cmake -S . -B $B -DCMAKE_CUDA_ARCHITECTURES=90 -DGPURED_WERROR=ON "${extra[@]}" >"$OUT/build.log" 2>&1 &&
        cmake --build $B -j"$nproc" >>"$OUT/build.log" 2>&1; then
        note build "full build ok ($((SECONDS - t0)) s)"
    else
        # the GPU targets alone, so the kernels are still tested and measured
        cmake --build $B -j"$nproc" --target test_gpu_kernels test_gpu_backend bench_reduce >>"$OUT/build.log" 2>&1
        note build "full build FAILED, GPU targets rc=$? ($((SECONDS - t0)) s); see build.log"
    fi
fi

if want test; then
    t0=$SECONDS
    timeout 240 ctest --test-dir $B -L gpu -j4 --output-on-failure >"$OUT/ctest.log" 2>&1
    rc=$?
    note ctest "rc=$rc ($((SECONDS - t0)) s): $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
    while read -r line; do note "" "$line"; done < <(grep -E '^ *[0-9]+/[0-9]+ Test +#' "$OUT/ctest.log" |
        sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: //; s/ +/ /g')
fi

if want memcheck; then
    t0=$SECONDS
    GR_TEST_SMALL=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
        $B/tests/test_gpu_kernels >"$OUT/memcheck.log" 2>&1
    rc=$?
    note memcheck "rc=$rc ($((SECONDS - t0)) s): $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1);" \
        "$(grep 'cases passed' "$OUT/memcheck.log" | tail -1)"
fi

if want racecheck; then
    t0=$SECONDS
    GR_TEST_SMALL=1 GR_TEST_VARIANTS=harris5,harris6,shfl,redux,fast timeout 150 compute-sanitizer --tool racecheck \
        --error-exitcode 9 $B/tests/test_gpu_kernels >"$OUT/racecheck.log" 2>&1
    rc=$?
    note racecheck "rc=$rc ($((SECONDS - t0)) s): $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
fi

if want bench; then
    t0=$SECONDS
    timeout 240 $B/bench/bench_reduce --out "$OUT/bench_reduce.json" >"$OUT/bench.log" 2>&1
    rc=$?
    note bench "rc=$rc ($((SECONDS - t0)) s): $(tail -1 "$OUT/bench.log")"
    sed -n '/^== fast vs CUB/,$p' "$OUT/bench.log"
fi

echo
head -2 "$OUT/device.txt"
printf '%s\n' "${table[@]}"
