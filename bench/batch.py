#!/usr/bin/env python3
# batch.py: batch submission of 1k, 10k and 100k small jobs (4 int32 summed each) on each device,
# as a JSON array and as the binary form (?batch=rows, a raw body of R x 4 values): the time until
# the 202 (every job durable) is read, and with Prefer: wait the time until the 200 (every job
# ended), with launch groups (the default --launch-group 256) and without (1: each job its own
# launch). The 202's Server-Timing (where the time to durable went: parse, submit, store ...) is
# printed under each row. The store is the embedded SQLite file, or with "postgresql" a
# throwaway PostgreSQL cluster (tests/pg_cluster.py) with one replica on it. Prints a table and
# writes batch-<host>-<date>.json under GPURED_BENCH_OUT (default bench/results). Not a test: it
# measures.
#   bench/batch.py path/to/gpured [devices, e.g. cpu,gpu] [sqlite|postgresql] [sizes, e.g. 100000]
import json
import os
import struct
import sys
import time
import urllib.request

from store_load import save, serving

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import pg_cluster  # noqa: E402

BIN = sys.argv[1]
DEVICES = (sys.argv[2] if len(sys.argv) > 2 else "cpu").split(",")
STORE = sys.argv[3] if len(sys.argv) > 3 else "sqlite"
SIZES = tuple(int(n) for n in (sys.argv[4] if len(sys.argv) > 4 else "1000,10000,100000").split(","))
LAUNCH_GROUPS = (1, 256)


def post(url, body, headers, query="", ctype="application/json"):
    req = urllib.request.Request(url + "/v1/jobs" + query, data=body, method="POST",
                                 headers=dict(headers, **{"Content-Type": ctype}))
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read()
        return r.status, time.monotonic() - t0, raw, r.headers.get("Server-Timing")


def main():
    rows = []
    cluster = pg_cluster.Cluster().start() if STORE == "postgresql" else None
    try:
        measure(rows, cluster)
    finally:
        if cluster:
            cluster.stop()
    save("batch", {"cores": os.cpu_count(), "store": STORE, "rows": rows})


def measure(rows, cluster):
    print("%-6s %5s %-6s %8s %9s %12s %12s %12s" % ("device", "group", "form", "jobs", "body_MB", "durable_s", "ended_s",
                                                    "jobs/s"))
    for dev, group in ((d, g) for d in DEVICES for g in LAUNCH_GROUPS):
        env = {"GPURED_QUEUE_CAPACITY": "1000000", "GPURED_MAX_BODY_BYTES": str(1 << 30), "GPURED_LAUNCH_GROUP": str(group)}
        if cluster:
            env["GPURED_STORE"] = cluster.create_db("batch_%s_%d" % (dev, group))
        with serving(BIN, [env]) as (urls, _):
            url = urls[0]
            for n in SIZES:
                forms = {"json": (json.dumps([{"op": "sum", "dtype": "int32", "data": [i, 1, 2, 3], "device": dev}
                                              for i in range(n)]).encode(), "", "application/json"),
                         "rows": (b"".join(struct.pack("<4i", i, 1, 2, 3) for i in range(n)),
                                  "?batch=rows&op=sum&dtype=int32&shape=%d,4&device=%s" % (n, dev),
                                  "application/octet-stream")}
                for form, (body, query, ctype) in forms.items():
                    st, durable, raw, timing = post(url, body, {}, query, ctype)
                    assert st == 202 and len(json.loads(raw)) == n, (st, raw[:200])
                    time.sleep(n / 20000)  # let the first batch run out before the next is timed
                    st, ended, raw, _ = post(url, body, {"Prefer": "wait=600"}, query, ctype)
                    jobs = json.loads(raw)
                    assert st == 200 and all(j["status"] == "succeeded" for j in jobs), (st, raw[:200])
                    assert all(j["result"]["value"] == i + 6 for i, j in enumerate(jobs))
                    launched = max(j.get("launch_group", 1) for j in jobs)
                    r = dict(device=dev, launch_group=group, largest_group=launched, form=form, jobs=n, body_bytes=len(body), durable_s=durable, ended_s=ended,
                             jobs_per_s=n / ended, server_timing_202=timing)
                    rows.append(r)
                    print("%-6s %5d %-6s %8d %9.1f %12.3f %12.3f %12.0f" % (dev, group, form, n, len(body) / 1e6, durable,
                                                                            ended, n / ended), flush=True)
                    print("         202: %s" % timing, flush=True)


if __name__ == "__main__":
    main()
