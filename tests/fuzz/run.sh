#!/usr/bin/env bash
# run.sh SRC BUILD SECONDS: builds gpured's libFuzzer targets (tests/fuzz, clang, ASan + UBSan) in
# BUILD and fuzzes each for SECONDS from a copy of its checked-in corpus (which never grows here),
# printing execs and coverage per target. Exit 1 if a target crashed, leaked, hung or broke a check
# (the reproducer's path is printed); 77 if clang cannot build libFuzzer programs here (says why).
# Environment: GPURED_FUZZ_CORPUS=DIR keeps and grows the corpora in DIR/<target> instead, seeded
# without the crash-* regression inputs (bench/fuzz.sh: a known open bug must not stop it);
# GPURED_FUZZ_TARGETS="fuzz_npy ..." picks targets; GPURED_FUZZ_PARALLEL=1 runs them all at once
# (one core each); GPURED_FUZZ_ARGS adds libFuzzer options.
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 SRC BUILD SECONDS" >&2; exit 2; }
src=$(cd "$1" && pwd) secs=$3
fuzz=$src/tests/fuzz
mkdir -p "$2" && build=$(cd "$2" && pwd)
targets=${GPURED_FUZZ_TARGETS:-fuzz_job_json fuzz_binary_job fuzz_npy fuzz_tokens fuzz_headers}

# --- can clang build a libFuzzer program? (the only reason to skip)
if ! command -v clang >/dev/null; then
  echo "fuzz: SKIP: no clang (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 77
fi
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' \
  >"$build/probe.c"
if ! clang -fsanitize=fuzzer,address,undefined "$build/probe.c" -o "$build/probe" 2>"$build/probe.err"; then
  echo "fuzz: SKIP: clang cannot link -fsanitize=fuzzer,address,undefined (libclang-rt-14-dev missing?):"
  head -3 "$build/probe.err"
  exit 77
fi

# --- build (its own tree, whatever compiler and flags the main build uses)
if ! env -u CFLAGS -u LDFLAGS -u CC cmake -S "$fuzz" -B "$build/targets" -DCMAKE_C_COMPILER=clang >"$build/build.log" 2>&1 ||
   ! cmake --build "$build/targets" -j"$(nproc)" >>"$build/build.log" 2>&1; then
  echo "fuzz: FAIL: the targets did not build:"
  tail -30 "$build/build.log"
  exit 1
fi

# --- fuzz one target: corpus, dictionary, run; its summary line into its dir
fuzz_one() {
  local t=$1 work=$build/run/$1 corpus dict=""
  rm -rf "$work" && mkdir -p "$work"
  if [ -n "${GPURED_FUZZ_CORPUS:-}" ]; then
    corpus=$GPURED_FUZZ_CORPUS/$t
    mkdir -p "$corpus" && find "$fuzz/corpus/$t" -type f ! -name 'crash-*' -exec cp -n -t "$corpus" {} +
  else
    corpus=$work/corpus
    cp -r "$fuzz/corpus/$t" "$corpus"
  fi
  case $t in
    fuzz_job_json) dict=$fuzz/json.dict ;;
    fuzz_binary_job) dict=$work/dict && cat "$fuzz/query.dict" "$fuzz/npy.dict" >"$dict" ;;
    fuzz_npy) dict=$fuzz/npy.dict ;;
  esac
  # shellcheck disable=SC2086 # GPURED_FUZZ_ARGS: several options
  (cd "$work" && "$build/targets/$t" -max_total_time="$secs" -timeout=10 -error_exitcode=1 -print_final_stats=1 \
     -artifact_prefix="$work/" ${dict:+-dict="$dict"} ${GPURED_FUZZ_ARGS:-} "$corpus") >"$work/log" 2>&1
  local rc=$? last execs speed cov ft edges
  last=$(grep -E '^#[0-9]+.*cov: ' "$work/log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  edges=$(sed -n 's/.*Loaded 1 modules *(\([0-9]*\) inline 8-bit counters.*/\1/p' "$work/log" | head -1)
  # "-" for what a run that stopped early never printed
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${execs:--}" "${speed:--}" "${cov:--}" "${ft:--}" "${edges:--}" \
    "$(find "$corpus" -type f | wc -l)" "$rc" >"$work/summary.tsv"
}

rm -rf "$build/run"
for t in $targets; do
  if [ "${GPURED_FUZZ_PARALLEL:-0}" = 1 ]; then fuzz_one "$t" & else fuzz_one "$t"; fi
done
wait

# --- report
failed=0
printf '%-16s %12s %8s %6s %6s %6s %7s  %s\n' target execs exec/s cov ft edges corpus result
for t in $targets; do
  IFS=$'\t' read -r _ execs speed cov ft edges files rc <"$build/run/$t/summary.tsv"
  result=ok
  [ "$rc" = 0 ] || { result="FAILED (exit $rc)"; failed=1; }
  printf '%-16s %12s %8s %6s %6s %6s %7s  %s\n' "$t" "$execs" "$speed" "$cov" "$ft" "$edges" "$files" "$result"
  cat "$build/run/$t/summary.tsv" >>"$build/run/summary.tsv"
done
for t in $targets; do
  work=$build/run/$t
  [ "$(cut -f8 "$work/summary.tsv")" = 0 ] && continue
  echo
  echo "== $t failed; its log: $work/log"
  grep -E 'ERROR: |SUMMARY: |runtime error|check failed|stubs.c: ' "$work/log" | head -8
  for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$a" ] && echo "reproducer: $a  (run: $build/targets/$t $a)"
  done
done
exit $failed
