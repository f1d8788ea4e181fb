#!/usr/bin/env bash
# http_load_compare.sh: the small-job path of two gpured binaries side by side in one run
# (before/after a change): rounds of http_load.sh for A, B, B with a bearer token, then A again,
# so that drift of the machine shows as the A/A spread; ratios are of medians over the rounds.
# Prints one table; JSON per run under $GPURED_BENCH_OUT/compare-<time>/.
#   bench/http_load_compare.sh OLD_BIN NEW_BIN [seconds per run] [device] [rounds]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=$1 new=$2 secs=${3:-8} dev=${4:-auto} rounds=${5:-1}
out=${GPURED_BENCH_OUT:-$here/results}/compare-$(date -u +%Y%m%dT%H%M%S)
mkdir -p "$out"
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
run() { # name bin [token]
  mkdir -p "$out/$1"
  GPURED_BENCH_TOKEN=${3:-} GPURED_BENCH_OUT=$out/$1 bash "$here/http_load.sh" "$2" "$secs" "$dev" >"$out/$1.txt"
}
for r in $(seq "$rounds"); do
  run "before-$r-a" "$old"
  run "after-$r" "$new"
  run "after-token-$r" "$new" "$token"
  run "before-$r-b" "$old"
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "*", "*.json"))):
    name = os.path.basename(os.path.dirname(path))
    kind = "before" if name.startswith("before") else "after-token" if name.startswith("after-token") else "after"
    for r in json.load(open(path))["runs"]:
        runs.setdefault((kind, r["connections"]), []).append(r["result"])
conns = sorted({c for _, c in runs})
med = lambda k, c, f: statistics.median(x[f] for x in runs[(k, c)])
print("%-12s %s" % ("median of", "  ".join("c=%-3d jobs/s   p50ms   p99ms" % c for c in conns)))
for k in ("before", "after", "after-token"):
    print("%-12s %s" % (k, "  ".join("%11.0f %7.3f %7.3f" % (med(k, c, "jobs_per_s"), med(k, c, "p50_ms"),
                                                             med(k, c, "p99_ms")) for c in conns)))
print("%-12s %s" % ("before range", "  ".join("%5.0f-%-5.0f              " % (min(x["jobs_per_s"] for x in runs[("before", c)]),
                                                                     max(x["jobs_per_s"] for x in runs[("before", c)])) for c in conns)))
for k in ("after", "after-token"):
    print("%-12s %s" % (k + "/before", "  ".join("%10.3fx               " % (med(k, c, "jobs_per_s") / med("before", c, "jobs_per_s"))
                                                for c in conns)))
PY
