#!/bin/bash
# run_device.sh: the one script a GPU-machine run executes: build, `ctest -L gpu`, compute-sanitizer
# on a small run of every kernel variant, the reduction benchmark; logs and JSON under $OUT, a short
# table printed last. From the repo root, after `source .devdeps/env.sh`:
#   bash tests/gpu/run_device.sh [build] [test] [memcheck] [racecheck] [bench]   (default: all)
# Stages run in the order given, each under its own time limit so a hanging one never costs the rest.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
B=build-device
table=()
note() { table+=("$(printf '%-10s %s' "$1" "$2")"); }

stage_build() {
    # the dashboard embeds Debian's Chart.js; the GPU machine has none: use one packed in .devdeps
    local chart=/tmp/devdeps/usr/share/javascript/chart.js/chart.min.js extra=()
    if [ ! -d /usr/share/javascript/chart.js ]; then
        [ -f $chart ] || for f in .devdeps/libjs-chart.js*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/devdeps; done
        [ -f $chart ] && extra=(-DGPURED_CHARTJS=$chart)
    fi
    if cmake -S . -B $B -DCMAKE_CUDA_ARCHITECTURES=90 -DGPURED_WERROR=ON "${extra[@]}" >"$OUT/build.log" 2>&1 &&
        cmake --build $B -j"$(nproc)" >>"$OUT/build.log" 2>&1; then
        note build "full build ok"
    else
        # the GPU targets alone, warnings allowed, so the kernels are still tested and measured
        cmake -S . -B $B -DGPURED_WERROR=OFF >>"$OUT/build.log" 2>&1
        cmake --build $B -j"$(nproc)" --target test_gpu_kernels test_gpu_backend bench_reduce >>"$OUT/build.log" 2>&1
        note build "full build with -Werror FAILED; GPU targets without it rc=$?; see build.log"
    fi
}

stage_test() {
    # -V -O keeps every test's output, the passing ones' counts too
    timeout 900 ctest --test-dir $B -L gpu -j4 -V -O "$OUT/ctest.log" >/dev/null 2>&1
    note ctest "rc=$?: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
    local line
    while read -r line; do note "" "$line"; done < <(grep -E '^ *[0-9]+/[0-9]+ Test +#' "$OUT/ctest.log" |
        sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: //; s/ +/ /g')
    while read -r line; do note "" "$line"; done < <(grep -E '[a-z0-9]+ +[0-9]+ passed +[0-9]+ failed|cases passed|checks, ' \
        "$OUT/ctest.log")
}

stage_memcheck() {
    GR_TEST_SMALL=1 timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 \
        $B/tests/test_gpu_kernels >"$OUT/memcheck.log" 2>&1
    note memcheck "rc=$?: $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1); $(grep 'cases passed' "$OUT/memcheck.log")"
}

stage_racecheck() {
    GR_TEST_SMALL=1 GR_TEST_VARIANTS=harris5,harris6,shfl,redux,fast timeout 120 compute-sanitizer \
        --tool racecheck --error-exitcode 9 $B/tests/test_gpu_kernels >"$OUT/racecheck.log" 2>&1
    note racecheck "rc=$?: $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
}

stage_bench() {
    timeout 240 $B/bench/bench_reduce --out "$OUT/bench_reduce.json" >"$OUT/bench.log" 2>&1
    note bench "rc=$?: $(tail -1 "$OUT/bench.log")"
    sed -n '/^== fast vs CUB/,$p' "$OUT/bench.log"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
    nvcc --version | tail -2
    date -u
} >"$OUT/device.txt" 2>&1
for s in ${*:-build test memcheck racecheck bench}; do
    t0=$SECONDS
    "stage_$s"
    table[-1]="${table[-1]} [$s $((SECONDS - t0)) s]"
done
echo
head -2 "$OUT/device.txt"
printf '%s\n' "${table[@]}"
