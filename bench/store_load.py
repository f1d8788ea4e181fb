#!/usr/bin/env python3
# store_load.py: small jobs (bench/http_load.lua: 1024 float32, Prefer: wait=5) through gpured on
# its SQLite file, then on one PostgreSQL store (a throwaway cluster, tests/pg_cluster.py) through
# 1, 2 and 3 replicas sharing it, wrk driving each replica with an equal share of the connections.
# With rounds above 1, SQLite and one PostgreSQL replica run in turn that many times, the last
# pair the table's (a host's rate drifts: a ratio is read from neighbouring runs). Prints a table
# and writes bench/results/store_load-<host>-<date>.json. Not a test: it measures.
#   bench/store_load.py [path/to/gpured] [seconds per run] [connections] [rounds]
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import pg_cluster  # noqa: E402

# the command line's (main); bench scripts that import this one read their own
BIN = SECS = CONNS = None


def start(binary, data, env):
    """A gpured on a free port with its data in data and env added; (process, base URL)."""
    log = open(os.path.join(data, "log-%d" % time.monotonic_ns()), "w+")
    p = subprocess.Popen([binary, "serve", "--port", "0", "--data-dir", data, "--log-level", "warn"], stderr=log,
                         env=dict(os.environ, **env))
    for _ in range(600):
        log.seek(0)
        m = re.search(r"listening on http://([0-9.]+:\d+)", log.read())
        if m:
            return p, "http://" + m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    raise RuntimeError("gpured did not start: " + log.read()[-2000:])


@contextlib.contextmanager
def serving(binary, envs, shared=True):
    """One gpured per env (added to the environment), all on one new data folder (shared) or each
    on its own; yields (urls, folders). They are stopped and the folders removed after."""
    dirs = [tempfile.mkdtemp(prefix="gpured-bench-")]
    dirs += dirs * (len(envs) - 1) if shared else [tempfile.mkdtemp(prefix="gpured-bench-") for _ in envs[1:]]
    servers = []
    try:
        for d, env in zip(dirs, envs):
            servers.append(start(binary, d, env))
        yield [u for _, u in servers], dirs
    finally:
        for p, _ in servers:
            p.terminate()
            p.wait(120)
        for d in set(dirs):
            shutil.rmtree(d, ignore_errors=True)


def save(name, doc):
    """Write doc (a date added) as <name>-<host>-<date>.json under GPURED_BENCH_OUT (default
    bench/results), say where, and return the path."""
    out = os.path.join(os.environ.get("GPURED_BENCH_OUT", os.path.join(HERE, "results")), "%s-%s-%s.json" % (
        name, socket.gethostname().split(".")[0], time.strftime("%Y%m%d", time.gmtime())))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(dict({"date": time.strftime("%Y-%m-%d", time.gmtime())}, **doc), f, indent=1)
    print("wrote " + out)
    return out


def load(targets, secs, conns, threads=2):
    """wrk on every (url, env) target at once, conns split between them (env: what http_load.lua
    reads, e.g. GPURED_BENCH_BODY): summed jobs/s, the worst p50 and p99."""
    per = max(1, conns // len(targets))
    procs = [subprocess.Popen(["wrk", "-t", str(min(per, threads)), "-c", str(per), "-d", "%ds" % secs, "--latency",
                               "-s", os.path.join(HERE, "http_load.lua"), u], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, **env)) for u, env in targets]
    rs = []
    for p in procs:
        out, _ = p.communicate()
        rs.append(json.loads(next(line[5:] for line in out.splitlines() if line.startswith("JSON "))))
    return {"jobs_per_s": sum(r["jobs_per_s"] for r in rs), "p50_ms": max(r["p50_ms"] for r in rs),
            "p99_ms": max(r["p99_ms"] for r in rs), "errors": sum(r["socket_errors"] + r["non_2xx"] for r in rs),
            "connections": per * len(targets),
            "each": [{k: r[k] for k in ("jobs_per_s", "p50_ms", "p99_ms")} for r in rs]}


def ran_on(url, replicas):
    """Which replica ran each of the newest 1000 jobs listed through url: {replica: count}, or {}
    for one gpured (its jobs name no replica)."""
    if replicas < 2:
        return {}
    page = json.loads(urllib.request.urlopen(url + "/v1/jobs?status=succeeded&limit=1000", timeout=60).read())
    count = {}
    for j in page["jobs"]:
        count[j.get("replica", "?")] = count.get(j.get("replica", "?"), 0) + 1
    return count


def run(store, n, cluster=None, through_one=False):
    """through_one: all the load goes to the first replica, as a sticky balancer would send it."""
    env = {}
    if cluster:
        env["GPURED_STORE"] = cluster.create_db("load_%d_%d_%d" % (n, through_one, time.monotonic_ns()))
    with serving(BIN, [env] * n) as (urls, _):
        r = load([(u, {"GPURED_DEVICE": "cpu"}) for u in (urls[:1] if through_one else urls)], SECS, CONNS)
        r["ran_on"] = ran_on(urls[0], n)
    r.update(store=store, replicas=n, through_one=through_one)
    print("%-10s %8s %10.0f %9.3f %9.3f %7d  %s" % (store, "%d%s" % (n, " via 1" if through_one else ""),
                                                    r["jobs_per_s"], r["p50_ms"], r["p99_ms"], r["errors"],
                                                    sorted(r["ran_on"].values(), reverse=True)), flush=True)
    return r


def main():
    global BIN, SECS, CONNS
    BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "gpured")
    SECS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    CONNS = int(sys.argv[3]) if len(sys.argv) > 3 else 48
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    print("%-10s %8s %10s %9s %9s %7s  %s" % ("store", "replicas", "jobs/s", "p50_ms", "p99_ms", "errors",
                                              "ran on (newest 1000 jobs)"))
    cluster = pg_cluster.Cluster().start()
    rows = []
    try:
        for _ in range(rounds - 1):
            rows += [run("sqlite", 1), run("postgresql", 1, cluster)]
            print("%-19s %10.3f" % ("ratio", rows[-1]["jobs_per_s"] / rows[-2]["jobs_per_s"]), flush=True)
        rows.append(run("sqlite", 1))
        rows += [run("postgresql", n, cluster) for n in (1, 2, 3)]
        rows.append(run("postgresql", 2, cluster, through_one=True))
    finally:
        cluster.remove()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    save("store_load", {"cpu": cpu, "cores": os.cpu_count(), "seconds": SECS, "connections": CONNS, "rows": rows})


if __name__ == "__main__":
    main()
