#!/usr/bin/env python3
# store_commits.py: where one replica's store time goes under small jobs (store_load.py's load):
# SQLite, then one PostgreSQL replica with 1, 2, 4 and 8 writers and with 4 and the WAL's flush
# off (synchronous_commit=off, the user's choice). Each row reads the writers' commits from
# /metrics (gpured_store_commit_seconds) around the run: commits a second, jobs a commit, ms a
# commit, and how many writers were busy on average. Prints a table and writes
# store_commits-<host>-<date>.json under GPURED_BENCH_OUT (default bench/results). Not a test: it
# measures.
#   bench/store_commits.py path/to/gpured [seconds per run] [connections]
import os
import re
import sys
import time
import urllib.request

from store_load import load, save, serving

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import pg_cluster  # noqa: E402

BIN = sys.argv[1]
SECS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
CONNS = int(sys.argv[3]) if len(sys.argv) > 3 else 48
SETUPS = (("sqlite", 0, False), ("postgresql", 1, False), ("postgresql", 2, False), ("postgresql", 4, False),
          ("postgresql", 8, False), ("postgresql", 4, True))


def commits(url):
    """(commits so far, seconds they took) from url's /metrics."""
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    return tuple(float(re.search(r"^gpured_store_commit_seconds_%s (\S+)" % k, text, re.M).group(1))
                 for k in ("count", "sum"))


def run(cluster, store, writers, flush_off):
    env = {"GPURED_STORE_WRITERS": str(writers)} if writers else {}
    if store == "postgresql":
        env["GPURED_STORE"] = cluster.create_db("commits_%d" % time.monotonic_ns())
        if flush_off:
            env["GPURED_STORE"] += "?options=-c%20synchronous_commit%3Doff"
    with serving(BIN, [env]) as (urls, _):
        n0, s0 = commits(urls[0])
        t0 = time.monotonic()
        r = load([(urls[0], {"GPURED_DEVICE": "cpu"})], SECS, CONNS)
        n1, s1 = commits(urls[0])
        wall = time.monotonic() - t0
    n = max(n1 - n0, 1)
    r.update(store=store, writers=writers, synchronous_commit="off" if flush_off else "on" if writers else "-",
             commits_per_s=n / wall, jobs_per_commit=r["jobs_per_s"] * wall / n, ms_per_commit=(s1 - s0) * 1e3 / n,
             writers_busy=(s1 - s0) / wall)
    print("%-10s %7s %6s %9.0f %8.3f %8.3f %10.0f %9.1f %8.3f %7.2f" % (
        store, writers or "-", r["synchronous_commit"], r["jobs_per_s"], r["p50_ms"], r["p99_ms"], r["commits_per_s"],
        r["jobs_per_commit"], r["ms_per_commit"], r["writers_busy"]), flush=True)
    return r


def main():
    print("%-10s %7s %6s %9s %8s %8s %10s %9s %8s %7s" % ("store", "writers", "flush", "jobs/s", "p50_ms", "p99_ms",
                                                          "commits/s", "jobs/cmt", "ms/cmt", "busy"))
    cluster = pg_cluster.Cluster().start()
    try:
        rows = [run(cluster, *setup) for setup in SETUPS]
    finally:
        cluster.remove()
    save("store_commits", {"seconds": SECS, "connections": CONNS, "rows": rows})


if __name__ == "__main__":
    main()
