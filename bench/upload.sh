#!/usr/bin/env bash
# upload.sh: upload benchmark: curl posts a 1 GiB raw body (-X POST -T, streamed from the file) over
# loopback to a fresh gpured (data dir on the disk under test: durable), to gpured with its data dir
# on tmpfs (the CPU path without the disk), and to bench/discard_server (body dropped; gpured's
# libmicrohttpd settings, and again with 1 MiB of connection memory), 3 runs each; beside them the
# ceilings of the same run: the disk (dd, O_DIRECT and buffered, with fsync) and sha256 on one core.
# gpured answers a body this big once durable and stores its sha256 after (GPURED_DIGEST_LATER_BYTES=0
# in the environment: in the 201, the digest on the upload's path); each row says how long after.
# Prints a table and writes JSON. Not a test: it measures, it does not judge.
#   bench/upload.sh [path/to/gpured] [out.json] [data dir parent (the disk under test; default .)]
#   env: DISCARD_BIN (default: bench/discard_server beside gpured), UPLOAD_MIB (default 1024),
#        UPLOAD_RUNS (default 3), GPURED_BENCH_HTTP_THREADS (default: nproc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-$here/../build/gpured}")
out=${2:-$here/results/upload-$(hostname -s)-$(date -u +%Y%m%d).json}
parent=$(realpath "${3:-.}")
discard=$(realpath "${DISCARD_BIN:-$(dirname "$bin")/bench/discard_server}")
mib=${UPLOAD_MIB:-1024}
runs=${UPLOAD_RUNS:-3}
threads=${GPURED_BENCH_HTTP_THREADS:-$(nproc)}
bytes=$((mib << 20))

work=$(mktemp -d -p "$parent" upload-bench.XXXXXX)
# the tmpfs row only where /dev/shm holds the body twice (a container's can be 64 MiB)
shm=$( [ "$(df -B1 --output=avail /dev/shm 2>/dev/null | tail -1)" -gt $((2 * bytes)) ] 2>/dev/null &&
  mktemp -d -p /dev/shm upload-bench.XXXXXX || true)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work" ${shm:+"$shm"}
}
trap cleanup EXIT

# start VAR LOG CMD...: start a server that logs "listening on http://..." and put its URL in VAR.
start() {
  local var=$1 log=$2; shift 2
  "$@" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do grep -q 'listening on' "$log" && break; sleep 0.05; done
  printf -v "$var" '%s' "$(grep -o 'http://[0-9.]*:[0-9]*' "$log" | head -1)"
  [ -n "${!var}" ] || { echo "$* did not start:" >&2; cat "$log" >&2; exit 1; }
}

gbps() { python3 -c "print(f'{$1 / $2 / 1e9:.3f}')"; } # bytes seconds

file=$work/body.bin
head -c "$bytes" /dev/urandom >"$file"
sync

# ceilings
sha_tool="openssl dgst -sha256 -r" # OpenSSL's sha256, as gpured's
command -v openssl >/dev/null || sha_tool=sha256sum
t0=$(date +%s.%N); want=$($sha_tool "$file" | cut -d' ' -f1); t1=$(date +%s.%N)
sha_gbps=$(gbps "$bytes" "$(python3 -c "print($t1 - $t0)")")
dd_speed() { # dd's "copied, T s" into GB/s
  local t
  t=$(dd if="$file" of="$work/dd.bin" bs=4M "$@" 2>&1 | grep -o 'copied, [0-9.]* s' | grep -o '[0-9.]*')
  rm -f "$work/dd.bin"
  gbps "$bytes" "$t"
}
dd_direct=$(dd_speed oflag=direct conv=fsync)
dd_fsync=$(dd_speed conv=fsync)

start durable "$work/gpured.log" "$bin" serve --port 0 --data-dir "$work/data" --threads "$threads" --log-level warn
volatile=
[ -z "$shm" ] || start volatile "$work/gpured-shm.log" "$bin" serve --port 0 --data-dir "$shm/data" \
  --threads "$threads" --log-level warn
start drop "$work/discard.log" "$discard" 0 "$threads"
start drop_big "$work/discard-1m.log" "$discard" 0 "$threads" $((1 << 20))

# One upload to $1: "seconds http_code digest_seconds". A dataset made is checked against the
# file's sha256 (read again until it is known when the 201 names it null: digest_seconds is how
# long after the 201 that took, 0 when the 201 had it) and deleted.
upload() {
  local url=$1 body=$work/answer.json r code t follow=0
  r=$(curl -s -o "$body" -w '%{time_total} %{http_code}' -H 'Content-Type: application/octet-stream' \
    -X POST -T "$file" "$url")
  local answered=$(date +%s.%N)
  t=${r% *}; code=${r#* }
  if [ "$code" = 201 ]; then
    follow=$(python3 - "$body" "$want" "$url" "$answered" <<'PY'
import json, sys, time, urllib.request
d, t0 = json.load(open(sys.argv[1])), time.monotonic()
base = sys.argv[3].split("/v1/")[0]
while d["sha256"] is None and time.monotonic() - t0 < 60:
    time.sleep(0.01)
    d = json.load(urllib.request.urlopen(f"{base}/v1/datasets/{d['id']}"))
if d["sha256"] != sys.argv[2]:
    sys.exit(f"sha256 {d['sha256']} != {sys.argv[2]}")
print(f"{time.time() - float(sys.argv[4]):.3f}" if json.load(open(sys.argv[1]))["sha256"] is None else 0)
urllib.request.urlopen(urllib.request.Request(f"{base}/v1/datasets/{d['id']}", method="DELETE"))
PY
)
  fi
  echo "$t $code $follow"
}

rows=()
printf '%-40s %10s %12s %s\n' target best_GBps median_GBps seconds
measure() { # name url expected-code
  local name=$1 url=$2 ok=$3 ts=() fs=() r code
  for _ in $(seq "$runs"); do
    read -r t code f <<<"$(upload "$url")"
    [ "$code" = "$ok" ] || { echo "$name: HTTP $code, expected $ok" >&2; exit 1; }
    ts+=("$t"); fs+=("$f")
  done
  rows+=("$(python3 - "$name" "$bytes" "${ts[*]}" "${fs[*]}" <<'PY'
import json, statistics, sys
name, n = sys.argv[1], int(sys.argv[2])
ts, fs = [float(t) for t in sys.argv[3].split()], [float(f) for f in sys.argv[4].split()]
best, med = n / min(ts) / 1e9, n / statistics.median(ts) / 1e9
later = f"  sha256 after the 201: {' '.join(f'{f:.3f}' for f in fs)} s" if any(fs) else ""
print(f"{name:<40} {best:>10.3f} {med:>12.3f} {' '.join(f'{t:.3f}' for t in ts)}{later}", file=sys.stderr)
print(json.dumps({"target": name, "seconds": ts, "best_gbps": round(best, 3), "median_gbps": round(med, 3),
                  "sha256_after_201_s": fs}))
PY
)")
}
q="v1/datasets?dtype=float32&shape=$((bytes / 4))"
measure "discard_server (gpured's MHD settings)" "$drop/" 200
measure "discard_server (1 MiB conn. memory)" "$drop_big/" 200
measure "gpured, durable ($(stat -f -c %T "$work"))" "$durable/$q" 201
[ -z "$volatile" ] || measure "gpured, tmpfs (not durable)" "$volatile/$q" 201
printf '%-40s %10s\n' "ceiling: dd O_DIRECT + fsync" "$dd_direct" "ceiling: dd buffered + fsync" "$dd_fsync" \
  "ceiling: sha256 one core (${sha_tool%% *})" "$sha_gbps"

mkdir -p "$(dirname "$out")"
python3 - "$out" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" "$(nproc)" "$threads" \
  "$bytes" "$(stat -f -c %T "$work")" "$dd_direct" "$dd_fsync" "$sha_gbps" "${sha_tool%% *}" "${rows[@]}" <<'PY'
import json, sys, datetime
out, cpu, ncpu, threads, n, fs, ddd, ddf, sha, sha_tool, *rows = sys.argv[1:]
json.dump({"benchmark": "upload", "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
           "cpu": cpu, "cores": int(ncpu), "http_threads": int(threads), "bytes": int(n),
           "client": "curl -X POST -T file, loopback", "data_dir_fs": fs,
           "ceilings_gbps": {"dd_odirect_fsync": float(ddd), "dd_buffered_fsync": float(ddf),
                             "sha256_one_core": float(sha), "sha256_tool": sha_tool},
           "runs": [json.loads(r) for r in rows]}, open(out, "w"), indent=1)
print("wrote", out)
PY
