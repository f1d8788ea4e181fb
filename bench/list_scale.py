#!/usr/bin/env python3
# list_scale.py: list pages at a million stored jobs. Fills a fresh gpured (SQLite) with N small
# jobs in batches of 100k (POST /v1/jobs with a JSON array), then times GET /v1/jobs pages: the
# first, filtered by status, op or both, one tenant's, and one 500 pages deep (its cursor from the page before),
# each the median of 20. Prints a table and writes list_scale-<host>-<date>.json under
# GPURED_BENCH_OUT (default bench/results). Not a test: it measures.
#   bench/list_scale.py path/to/gpured [jobs, default 1000000]
import json
import os
import statistics
import sys
import time
import urllib.request

from store_load import save, serving

BIN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
BATCH = 100000
OPS = ["sum", "min", "max", "argmax"]


def get(url):
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
    return (time.monotonic() - t0) * 1e3, json.loads(body)


def fill(url):
    t0 = time.monotonic()
    for b in range(0, N, BATCH):
        body = json.dumps([{"op": OPS[i % 4], "dtype": "int32", "data": [i, 1, 2], "device": "cpu"}
                           for i in range(b, min(N, b + BATCH))]).encode()
        req = urllib.request.Request(url + "/v1/jobs", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Prefer": "wait=600"})
        with urllib.request.urlopen(req, timeout=900) as r:
            assert r.status == 200, r.status
            r.read()
        print("  %d jobs stored and ended (%.0f s)" % (min(N, b + BATCH), time.monotonic() - t0), flush=True)
    return time.monotonic() - t0


def main():
    rows = []
    with serving(BIN, [{"GPURED_QUEUE_CAPACITY": str(BATCH), "GPURED_MAX_BODY_BYTES": str(1 << 30)}]) as (urls, dirs):
        url = urls[0]
        filled = fill(url)
        _, page = get(url + "/v1/jobs?limit=100")
        cursor = page.get("next_cursor")
        for _ in range(499):  # 500 pages deep
            _, page = get(url + "/v1/jobs?limit=100&cursor=" + cursor)
            cursor = page.get("next_cursor")
        cases = [("first page", "/v1/jobs?limit=100"), ("status=succeeded", "/v1/jobs?limit=100&status=succeeded"),
                 ("op=argmax", "/v1/jobs?limit=100&op=argmax"),
                 ("op=argmax&status=succeeded", "/v1/jobs?limit=100&op=argmax&status=succeeded"),
                 ("status=failed (none)", "/v1/jobs?limit=100&status=failed"),
                 ("tenant=default", "/v1/jobs?limit=100&tenant=default"),
                 ("tenant=default&status=succeeded", "/v1/jobs?limit=100&tenant=default&status=succeeded"),
                 ("500 pages deep", "/v1/jobs?limit=100&cursor=" + cursor),
                 ("one job", "/v1/jobs/" + page["jobs"][0]["id"])]
        print("%-32s %8s %8s %6s" % ("list", "p50_ms", "max_ms", "jobs"))
        for name, path in cases:
            ts, got = [], None
            for _ in range(20):
                t, got = get(url + path)
                ts.append(t)
            n = len(got.get("jobs", [])) if "jobs" in got else 1
            rows.append(dict(list=name, path=path, p50_ms=statistics.median(ts), max_ms=max(ts), jobs=n))
            print("%-32s %8.2f %8.2f %6d" % (name, statistics.median(ts), max(ts), n), flush=True)
        size = sum(os.path.getsize(os.path.join(dirs[0], f)) for f in os.listdir(dirs[0]) if f.startswith("gpured.db"))
    print("filled in %.0f s; store %.0f MB" % (filled, size / 1e6))
    save("list_scale", {"jobs": N, "fill_s": filled, "db_bytes": size, "cores": os.cpu_count(), "rows": rows})


if __name__ == "__main__":
    main()
