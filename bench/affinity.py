#!/usr/bin/env python3
# affinity.py: two hot datasets, each filling most of one GPU's dataset cache (the cache set to
# 1.5x one dataset), and jobs on both sent evenly. "process": one gpured on GPU 0 alone (its
# cache holding one dataset, then both), then one gpured owning two GPUs, where a job goes to the
# GPU caching its dataset. "replicas": two replicas (one GPU each when the machine has two, else
# both on GPU 0): first two plain gpured, each on its own SQLite store with both datasets
# uploaded to it, as a load balancer in front of independent replicas would see them; then two
# replicas on one PostgreSQL store, where a job goes to the replica whose GPU caches it. Prints
# jobs/s and the caches' hit rate (GET /v1/devices counters over the run) and writes
# affinity-<host>-<date>.json under GPURED_BENCH_OUT (default bench/results). Not a test: it
# measures.
#   bench/affinity.py path/to/gpured [seconds] [connections] [MiB per dataset] [process|replicas|all]
import json
import subprocess
import sys
import time
import urllib.request

import replicas_gpu as R
import store_load


def post(url, path, body, headers):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers=dict(headers, **{"Content-Type": "application/json"}))
    return json.loads(urllib.request.urlopen(req, timeout=300).read())


def counters(urls):
    """Summed cache hits and misses of every GPU of these replicas (each lists its own first)."""
    hits = misses = 0
    for u in urls:
        d = json.loads(urllib.request.urlopen(u + "/v1/devices", timeout=30).read())
        for g in d["gpus"]:
            hits += g["cache"]["hits"]
            misses += g["cache"]["misses"]
    return hits, misses


# Where the jobs ran and how long they queued, by dataset, replica, cache and epoch (2: offered
# by the replica that accepted it and claimed by another).
WHERE = ("SELECT doc::jsonb->>'dataset', doc::jsonb->>'replica', doc::jsonb->>'cache', epoch, count(*),"
         " round(percentile_cont(0.5) WITHIN GROUP (ORDER BY (doc::jsonb->'timings_ms'->>'queue')::float)::numeric, 2),"
         " round(percentile_cont(0.99) WITHIN GROUP (ORDER BY (doc::jsonb->'timings_ms'->>'queue')::float)::numeric, 2),"
         " round(max((doc::jsonb->'timings_ms'->>'queue')::float)::numeric, 2)"
         " FROM jobs WHERE status = 'succeeded' GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4")


def where(store):
    out = subprocess.run([R.pg_cluster._bin("psql"), "-X", "-At", "-F", " ", store, "-c", WHERE],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    print("  dataset replica cache epoch jobs queue_p50_ms queue_p99_ms queue_max_ms")
    for line in out:
        print("  " + line)
    return out


def run(name, shared, envs):
    with store_load.serving(R.BIN, envs, shared) as (urls, _):
        # shared: each dataset uploaded once; else each replica gets both
        ds = [[R.upload(urls[0]), R.upload(urls[0])]] * 2 if shared else [[R.upload(u), R.upload(u)] for u in urls]
        # replica k's first job is on dataset k, so its cache holds that one; one gpured runs one on each
        warm = [(u, ds[k][k]) for k, u in enumerate(urls)] if len(urls) > 1 else [(urls[0], d) for d in ds[0]]
        for u, d in warm:
            post(u, "/v1/jobs", {"op": "sum", "device": "gpu", "dataset": d}, {"Prefer": "wait=300"})
        if shared:
            time.sleep(3)  # announced (lease 3 s: every second)
        targets = [(u, {"GPURED_BENCH_BODY": '{"op":"sum","device":"gpu","dataset":"%s"}' % d})
                   for k, u in enumerate(urls) for d in ds[k]]
        h0, m0 = counters(urls)
        r = store_load.load(targets, R.SECS, R.CONNS, threads=2)
        h1, m1 = counters(urls)
        placed = where(envs[0]["GPURED_STORE"]) if shared else None
    looked = (h1 - h0) + (m1 - m0)
    r.update(setup=name, hits=h1 - h0, misses=m1 - m0, hit_rate=(h1 - h0) / looked if looked else None, placed=placed)
    print("%-44s %9.0f %9.3f %9.3f %8s %7d" % (name, r["jobs_per_s"], r["p50_ms"], r["p99_ms"],
                                              "%.3f" % r["hit_rate"] if looked else "-", r["errors"]), flush=True)
    for (u, env), each in zip(targets, r["each"]):
        print("  %s %s: %.0f jobs/s, p50 %.3f ms, p99 %.3f ms" % (u, env["GPURED_BENCH_BODY"][-22:-2], each["jobs_per_s"],
                                                           each["p50_ms"], each["p99_ms"]))
    return r


def main():
    names = R.gpus()
    which = sys.argv[5] if len(sys.argv) > 5 else "all"
    cache = str(R.MIB * 3 << 19)  # 1.5x one dataset: one fits, two do not
    print("GPUs: %s; datasets %d MiB each, cache %s bytes per GPU" % (names, R.MIB, cache))
    print("%-44s %9s %9s %9s %8s %7s" % ("setup", "jobs/s", "p50_ms", "p99_ms", "hit_rate", "errors"))
    rows = []
    if which in ("all", "process"):
        # one GPU: both datasets in one cache that holds one (they evict each other), then in one
        # that holds both (the GPU-bound rate two GPUs should double); then both GPUs in one gpured
        one = {"CUDA_VISIBLE_DEVICES": "0"}
        rows.append(run("1 gpured, 1 GPU, cache holds one", False, [dict(one, GPURED_GPU_CACHE_BYTES=cache)]))
        rows.append(run("1 gpured, 1 GPU, cache holds both", False,
                        [dict(one, GPURED_GPU_CACHE_BYTES=str(R.MIB * 5 << 19))]))
        if len(names) >= 2:
            rows.append(run("1 gpured, 2 GPUs, placement by cache", False,
                            [{"GPURED_GPU_CACHE_BYTES": cache, "CUDA_VISIBLE_DEVICES": "0,1"}]))
            print("2 GPUs / 1 GPU holding both: %.2fx" % (rows[-1]["jobs_per_s"] / rows[-2]["jobs_per_s"]))
    if which in ("all", "replicas"):
        env = [{"GPURED_GPU_CACHE_BYTES": cache, "GPURED_LEASE": "3"} for _ in range(2)]
        if len(names) >= 2:
            for k in range(2):
                env[k]["CUDA_VISIBLE_DEVICES"] = str(k)
        rows.append(run("2 plain replicas (SQLite each), both datasets", False, env))
        cluster = R.pg_cluster.Cluster().start()
        try:
            url = cluster.create_db("affinity")
            rows.append(run("2 replicas on PostgreSQL, affinity", True, [dict(e, GPURED_STORE=url) for e in env]))
        finally:
            cluster.remove()
    store_load.save("affinity", {"gpus": names, "seconds": R.SECS, "connections": R.CONNS, "dataset_mib": R.MIB,
                                 "cache_bytes": int(cache), "rows": rows})


if __name__ == "__main__":
    main()
