#!/usr/bin/env python3
# replicas_gpu.py: GPU-bound jobs on a cached dataset through one gpured owning every GPU, then
# on one PostgreSQL store (a throwaway cluster, tests/pg_cluster.py) and one data folder through
# one replica with one GPU, one with every GPU, and one replica per GPU (CUDA_VISIBLE_DEVICES);
# wrk drives each with an equal share of the connections. Prints a table and writes replicas_gpu-<host>-<date>.json under GPURED_BENCH_OUT
# (default bench/results). Not a test: it measures.
#   bench/replicas_gpu.py path/to/gpured [seconds] [connections] [MiB of the dataset]
import json
import os
import shutil
import struct
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import pg_cluster  # noqa: E402
import store_load  # noqa: E402

BIN = sys.argv[1]
SECS = int(sys.argv[2]) if len(sys.argv) > 2 else 15
CONNS = int(sys.argv[3]) if len(sys.argv) > 3 else 64
MIB = int(sys.argv[4]) if len(sys.argv) > 4 else 64


def gpus():
    """The GPUs to use, as (CUDA index, name): those CUDA_VISIBLE_DEVICES names (indices), else all;
    without nvidia-smi (a dry run of the script on the CPU) two stand-ins."""
    if not shutil.which("nvidia-smi"):
        return [("0", "none"), ("1", "none")]
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"], capture_output=True,
                         text=True)
    found = [tuple(f.strip() for f in line.split(",", 1)) for line in out.stdout.splitlines() if "," in line]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [g for g in found if visible is None or g[0] in visible.split(",")]


def upload(url):
    n = MIB << 18  # float32
    body = struct.pack("<%df" % 1024, *[(i % 97) / 7.0 for i in range(1024)]) * (n // 1024)
    req = urllib.request.Request(url + "/v1/datasets?dtype=float32&shape=%d" % n, data=body,
                                 headers={"Content-Type": "application/octet-stream"}, method="POST")
    return json.loads(urllib.request.urlopen(req, timeout=300).read())["id"]


def load(urls, ds):
    dev = os.environ.get("GPURED_DEVICE", "gpu")
    body = {"GPURED_BENCH_BODY": '{"op":"sum","device":"%s","dataset":"%s"}' % (dev, ds)}
    return store_load.load([(u, body) for u in urls], SECS, CONNS, threads=4)


def run(name, envs, through_one=False):
    """through_one: all the load goes to the first replica, as a sticky balancer would send it."""
    with store_load.serving(BIN, envs) as (urls, _):
        ds = upload(urls[0])
        load(urls, ds)  # warm: every GPU caches the dataset
        r = load(urls[:1] if through_one else urls, ds)
        r["ran_on"] = store_load.ran_on(urls[0], len(urls))
    r.update(setup=name, replicas=len(envs))
    print("%-34s %9.0f %9.3f %9.3f %7d  %s" % (name, r["jobs_per_s"], r["p50_ms"], r["p99_ms"], r["errors"],
                                             r["ran_on"]), flush=True)
    return r


def main():
    devices = gpus()
    names = [n for _, n in devices]
    print("GPUs: %s" % devices)
    print("%-34s %9s %9s %9s %7s  %s" % ("setup", "jobs/s", "p50_ms", "p99_ms", "errors", "ran on (last 1000)"))
    rows = [run("1 replica, %d GPUs, SQLite" % len(names), [{}])]
    cluster = pg_cluster.Cluster().start()
    try:
        url = cluster.create_db("replicas1")
        rows.append(run("1 replica, 1 GPU, PostgreSQL", [{"GPURED_STORE": url, "CUDA_VISIBLE_DEVICES": devices[0][0]}]))
        url = cluster.create_db("replicas")
        rows.append(run("1 replica, %d GPUs, PostgreSQL" % len(names), [{"GPURED_STORE": url}]))
        url = cluster.create_db("replicas2")
        each = [{"CUDA_VISIBLE_DEVICES": k} for k, _ in devices]
        rows.append(run("%d replicas, 1 GPU each, PostgreSQL" % len(names), [dict(e, GPURED_STORE=url) for e in each]))
        url = cluster.create_db("replicas3")
        rows.append(run("%d replicas, fed through one" % len(names), [dict(e, GPURED_STORE=url) for e in each],
                        through_one=True))
    finally:
        cluster.remove()
    store_load.save("replicas_gpu", {"gpus": names, "seconds": SECS, "connections": CONNS, "dataset_mib": MIB,
                                     "rows": rows})


if __name__ == "__main__":
    main()
