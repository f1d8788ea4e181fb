#!/usr/bin/env python3
# A/B (session 14): 100k jobs, rows and JSON forms: the 202 (durable) and waited end to end, twice per server, binaries alternating.
#   ab_batch.py bin1,bin2,... [device] [rounds]
import json, os, struct, sys, time, urllib.request
sys.path.insert(0, "bench")
from store_load import serving
BINS = sys.argv[1].split(",")
DEV = sys.argv[2] if len(sys.argv) > 2 else "cpu"
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
N = 100000
def post(url, body, headers, query, ctype):
    req = urllib.request.Request(url + "/v1/jobs" + query, data=body, method="POST", headers=dict(headers, **{"Content-Type": ctype}))
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read(); return r.status, time.monotonic() - t0, raw, r.headers.get("Server-Timing")
body = b"".join(struct.pack("<4i", i, 1, 2, 3) for i in range(N))
q = "?batch=rows&op=sum&dtype=int32&shape=%d,4&device=%s" % (N, DEV)
jb = json.dumps([{"op": "sum", "dtype": "int32", "data": [i, 1, 2, 3], "device": DEV} for i in range(N)]).encode()
for r in range(ROUNDS):
    for b in BINS:
        env = {"GPURED_QUEUE_CAPACITY": "1000000", "GPURED_MAX_BODY_BYTES": str(1 << 30)}
        with serving(b, [env]) as (urls, _):
            url = urls[0]
            res = []
            for i in range(2):
                st, d, raw, tm = post(url, body, {}, q, "application/octet-stream"); assert st == 202
                time.sleep(1.5)
                st, e, raw, _ = post(url, body, {"Prefer": "wait=600"}, q, "application/octet-stream"); assert st == 200
                jobs = json.loads(raw); assert all(j["status"] == "succeeded" for j in jobs)
                st, dj, raw, tmj = post(url, jb, {}, "", "application/json"); assert st == 202
                time.sleep(1.5)
                st, ej, raw, _ = post(url, jb, {"Prefer": "wait=600"}, "", "application/json"); assert st == 200
                res.append("rows 202 %.3f s waited %.0f/s | json 202 %.3f waited %.0f/s\n   rows 202: %s\n   json 202: %s" % (d, N / e, dj, N / ej, tm, tmj))
            print(r, os.path.basename(b), "\n ".join(res), flush=True)
