#!/usr/bin/env bash
# fuzz.sh: the long fuzzing run: every libFuzzer target of tests/fuzz (ASan + UBSan) for SECONDS
# each, growing corpora outside the repository (kept between runs), then a table of execs, exec/s
# and coverage (libFuzzer's cov: edges reached, ft: features) per target, the line and branch
# coverage (llvm-cov) the grown corpora reach in the parsers' files, and JSON. Exit 1 if a target
# crashed, leaked, hung or broke a check (run.sh prints the reproducer: once understood it goes in
# tests/fuzz/corpus/<target>/crash-<name>).
#   bench/fuzz.sh [SECONDS (default 3600)] [out.json]
#   env: GPURED_FUZZ_CORPUS (default ~/.cache/gpured-fuzz), GPURED_FUZZ_PARALLEL=1 (targets at
#        once, one core each), GPURED_FUZZ_TARGETS, GPURED_FUZZ_ARGS (as tests/fuzz/run.sh),
#        BUILD_DIR (default build: the targets go in BUILD_DIR/fuzz)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
secs=${1:-3600}
out=${2:-$here/results/fuzz-$(hostname -s)-$(date -u +%Y%m%d).json}
build=${BUILD_DIR:-$root/build}/fuzz
targets=${GPURED_FUZZ_TARGETS:-fuzz_job_json fuzz_binary_job fuzz_npy fuzz_tokens fuzz_headers}
export GPURED_FUZZ_CORPUS=${GPURED_FUZZ_CORPUS:-$HOME/.cache/gpured-fuzz}
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)

"$root/tests/fuzz/run.sh" "$root" "$build" "$secs"
rc=$?
[ -f "$build/run/summary.tsv" ] || exit "$rc" # skipped (77) or not built (1): nothing ran

# Line coverage of the parsers from the grown corpora (crash-* inputs left out): the targets
# again, built for llvm-cov instead of the sanitizers, each run once over its corpus.
cov=$build/coverage
parsers=("$root/api/parse.c" "$root/api/npy.c" "$root/server/tokens.c" "$root/api/headers.c")
rm -f "$cov"/*.profraw "$cov/summary.json"
if command -v llvm-cov >/dev/null && command -v llvm-profdata >/dev/null &&
   env -u CFLAGS -u LDFLAGS -u CC cmake -S "$root/tests/fuzz" -B "$cov" -DCMAKE_C_COMPILER=clang \
     -DGPURED_FUZZ_COVERAGE=ON >"$build/coverage.log" 2>&1 &&
   cmake --build "$cov" -j"$(nproc)" >>"$build/coverage.log" 2>&1; then
  objects=()
  for t in $targets; do
    rm -rf "$cov/inputs" && mkdir -p "$cov/inputs"
    find "$GPURED_FUZZ_CORPUS/$t" -type f ! -name 'crash-*' -exec cp -t "$cov/inputs" {} +
    LLVM_PROFILE_FILE="$cov/$t.profraw" "$cov/$t" -runs=0 "$cov/inputs" >>"$build/coverage.log" 2>&1
    objects+=(${objects[0]+-object} "$cov/$t") # the first one plain, then -object each
  done
  llvm-profdata merge -o "$cov/all.profdata" "$cov"/*.profraw &&
    echo && llvm-cov report -instr-profile="$cov/all.profdata" "${objects[@]}" "${parsers[@]}" &&
    llvm-cov export -summary-only -instr-profile="$cov/all.profdata" "${objects[@]}" "${parsers[@]}" \
      >"$cov/summary.json"
else
  echo "fuzz.sh: no line coverage (llvm-cov missing or the coverage build failed: $build/coverage.log)"
fi

python3 - "$build/run/summary.tsv" "$cov/summary.json" "$out" "$start" "$secs" "$GPURED_FUZZ_CORPUS" \
  "$(clang --version | head -1)" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null)" "$root" <<'PY'
import json, os, platform, sys
summary, covfile, out, start, secs, corpus, clang, commit, root = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
num = lambda s: int(s) if s.isdigit() else None
rows = []
for line in open(summary):
    t, execs, speed, cov, ft, edges, files, rc = line.rstrip("\n").split("\t")
    rows.append({"target": t, "execs": num(execs), "exec_per_s": num(speed), "cov": num(cov), "ft": num(ft),
                 "edges": num(edges), "corpus_files": num(files), "result": "ok" if rc == "0" else f"failed (exit {rc})"})
parsers = {}
if os.path.exists(covfile):
    for f in json.load(open(covfile))["data"][0]["files"]:
        s = f["summary"]
        parsers[os.path.relpath(f["filename"], root)] = {
            k: {"covered": s[k]["covered"], "count": s[k]["count"], "percent": round(s[k]["percent"], 1)}
            for k in ("lines", "branches", "functions")}
doc = {"benchmark": "fuzz", "date": start, "commit": commit, "cpu": cpu, "cores": os.cpu_count(),
       "seconds_per_target": int(secs), "parallel": os.environ.get("GPURED_FUZZ_PARALLEL") == "1",
       "compiler": clang, "sanitizers": "address,undefined", "corpus_dir": corpus, "targets": rows,
       "parser_coverage": parsers}
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print(f"\nwritten: {out}")
PY
exit "$rc"
