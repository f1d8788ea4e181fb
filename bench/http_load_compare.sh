#!/usr/bin/env bash
# http_load_compare.sh: the small-job path of two gpured binaries side by side in one run
# (before/after a change): http_load.sh for A, B, B with a bearer token, then A again, so that
# drift of the machine shows as the A/A spread. Prints one table; JSON per run under $OUT.
#   bench/http_load_compare.sh OLD_BIN NEW_BIN [seconds per run] [device]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=$1 new=$2 secs=${3:-8} dev=${4:-auto}
out=${GPURED_BENCH_OUT:-$here/results}/compare-$(date -u +%Y%m%dT%H%M%S)
mkdir -p "$out"
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
run() { # name bin [token]
  mkdir -p "$out/$1"
  GPURED_BENCH_TOKEN=${3:-} GPURED_BENCH_OUT=$out/$1 bash "$here/http_load.sh" "$2" "$secs" "$dev" >"$out/$1.txt"
}
run before-1 "$old"
run after "$new"
run after-token "$new" "$token"
run before-2 "$old"
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
runs = {n: json.load(open(glob.glob(os.path.join(out, n, "*.json"))[0]))["runs"]
        for n in ("before-1", "after", "after-token", "before-2")}
print("%-12s %s" % ("run", "  ".join("c=%-3d jobs/s   p50ms   p99ms" % r["connections"] for r in runs["after"])))
for n, rs in runs.items():
    print("%-12s %s" % (n, "  ".join("%11.0f %7.3f %7.3f" % (r["result"]["jobs_per_s"], r["result"]["p50_ms"],
                                                             r["result"]["p99_ms"]) for r in rs)))
for n in ("after", "after-token"):
    print("%-12s %s" % (n + "/before", "  ".join(
        "%10.3fx" % (r["result"]["jobs_per_s"] / ((a["result"]["jobs_per_s"] + b["result"]["jobs_per_s"]) / 2))
        for r, a, b in zip(runs[n], runs["before-1"], runs["before-2"]))))
PY
