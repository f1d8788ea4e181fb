#!/usr/bin/env bash
# sweep_load.sh: what the retention sweep costs the small-job path. Seeds a store with N finished
# jobs submitted 8 days ago, then runs the HTTP load (bench/http_load.lua, c connections) twice:
# with --result-ttl 7d, so the sweep deletes all N while the load runs, and without (the same
# seeded store, nothing swept). Prints p50/p99 of both and how long the sweep took; JSON to
# bench/results/. Not a test.
#   bench/sweep_load.sh [path/to/gpured] [N] [seconds] [connections] [device]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/gpured} n=${2:-100000} secs=${3:-10} conns=${4:-16}
export GPURED_DEVICE=${5:-auto}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
pid=
start() { # data-dir, extra args...
  local d=$1; shift
  "$bin" serve --port 0 --data-dir "$d" --threads "$(nproc)" --log-level info "$@" 2>"$d.log" &
  pid=$!
  for _ in $(seq 200); do grep -qs 'listening on' "$d.log" && break; sleep 0.05; done
  url=$(grep -o 'http://[0-9.]*:[0-9]*' "$d.log" | head -1)
}
seed() { # data-dir: the schema from a first start, then n old finished jobs straight into the file
  start "$1"; kill "$pid"; wait "$pid" || true
  python3 - "$1/gpured.db" "$n" <<'PY'
import sqlite3, sys, time
db, n = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
t0 = int((time.time() - 8 * 86400) * 1e6)
rows = []
for i in range(n):
    jid = "j_%016x" % (t0 + i)  # the row's key is the id's number
    rows.append((t0 + i, "succeeded", "sum", '{"id":"%s","tenant":"default","status":"succeeded","result":{"value":1}}' % jid,
                 (t0 + i) / 1e6, "default"))
db.executemany("INSERT INTO jobs(id, status, op, doc, created, tenant) VALUES (?,?,?,?,?,?)", rows)
db.commit()
PY
}
load() { wrk -t"$(( conns < $(nproc) ? conns : $(nproc) ))" -c"$conns" -d"${secs}s" --latency -s "$here/http_load.lua" "$url" |
         grep '^JSON ' | cut -c6-; }
seed "$work/a"
cp -r "$work/a" "$work/b"
start "$work/a"
base=$(load); kill "$pid"; wait "$pid" || true
start "$work/b" --result-ttl 7d
swept=$(load); kill "$pid"; wait "$pid" || true
python3 - "$work/b.log" "$base" "$swept" "$n" "$conns" "${GPURED_BENCH_OUT:-$here/results}" <<'PY'
import json, re, sys, datetime, socket
log, base, swept, n, conns, outdir = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), *sys.argv[4:]
deleted, ms = 0, 0.0
for ln in open(log):
    m = re.search(r"retention sweep: (\d+) finished.* in (\d+) ms", ln)
    if m:
        deleted += int(m.group(1)); ms += float(m.group(2))
print("%-22s %9s %8s %8s" % ("run (c=%s)" % conns, "jobs/s", "p50_ms", "p99_ms"))
for name, r in (("no sweep", base), ("sweeping %s jobs" % n, swept)):
    print("%-22s %9.0f %8.3f %8.3f" % (name, r["jobs_per_s"], r["p50_ms"], r["p99_ms"]))
print("swept %d jobs in %.0f ms while the load ran" % (deleted, ms))
out = "%s/sweep_load-%s-%s.json" % (outdir, socket.gethostname().split(".")[0], datetime.date.today().strftime("%Y%m%d"))
json.dump({"benchmark": "sweep_load", "jobs_seeded": int(n), "connections": int(conns), "no_sweep": base,
           "sweeping": swept, "deleted": deleted, "sweep_ms": ms}, open(out, "w"), indent=1)
print("wrote", out)
PY
