#!/usr/bin/env python3
"""data_plane.py: the data plane on a GPU machine, through the real service (issue #4 and the lanes of #3).

1. host ingest: a 1 GiB float32 dataset in the page cache, --gpu-cache-bytes 0, sum on the GPU:
   GPU stage (h2d + kernel + d2h) beside the pinned H2D ceiling the server measured at start-up,
   through the staging ring (--pinned-bytes 0), then from the file kept page-locked (registered on
   its second read: each job's h2d is listed, the median is over the 3rd to 6th);
2. cached: the same dataset on a server with the default cache: the first job misses, then
   sequential jobs with Prefer: wait hit; kernel GB/s beside CUB's sum over 1 GiB (POST
   /v1/benchmarks, same run) and the HTTP round trip beside the kernel time, p50;
3. lanes: latency of small inline jobs while another client keeps 1 GiB host-ingest jobs running,
   --streams 1 (every small job waits behind a big one) vs 4.
Prints a table and writes JSON. Not a test: it measures, it does not judge.
  bench/data_plane.py path/to/gpured out.json
"""
import array
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BIN = OUT = None  # from argv when run; set by a script that imports Server and job
GIB = int(os.environ.get("DP_BYTES", 1 << 30))
DEVICE = os.environ.get("DP_DEVICE", "gpu")  # cpu: a smoke run of this script where there is no GPU
REF = "cub" if DEVICE != "cpu" else "cpu_seq"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Server:
    def __init__(self, data, *flags):
        self.p = subprocess.Popen([BIN, "serve", "--port", "0", "--data-dir", data, "--log-level", "warn",
                                   "--threads", str(os.cpu_count()), *flags], stderr=subprocess.PIPE, text=True)
        for line in self.p.stderr:
            if "listening on" in line:
                self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
                break
        threading.Thread(target=lambda: [None for _ in self.p.stderr], daemon=True).start()

    def call(self, method, path, body=None, headers=None, conn=None):
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        if not conn:
            c.close()
        return r.status, json.loads(data) if data else None

    def stop(self):
        self.p.terminate()
        self.p.wait()


def job(s, body, conn=None):
    t0 = time.perf_counter()
    st, j = s.call("POST", "/v1/jobs", json.dumps(body), {"Content-Type": "application/json", "Prefer": "wait=60"},
                   conn)
    rtt = (time.perf_counter() - t0) * 1e3
    assert st == 200 and j["status"] == "succeeded", (st, j)
    return j, rtt


def main(work):
    path = os.path.join(work, "values.f32")
    block = array.array("f", [((i * 7919) % 1000) / 8.0 for i in range(1 << 20)]).tobytes()
    with open(path, "wb") as f:
        for _ in range(GIB // len(block)):
            f.write(block)
    res = {"benchmark": "data_plane", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    # 1. host-resident dataset, no cache: through the ring, then page-locked
    s = Server(work, "--gpu-cache-bytes", "0", "--pinned-bytes", "0")
    devices = s.call("GET", "/v1/devices")[1]
    dev = devices["gpus"][0] if DEVICE != "cpu" else {**devices["cpu"], "h2d_gbps": 1, "ceiling_gbps": 1}
    log(f"server up on {dev['name']}; uploading {GIB} bytes")
    res["device"] = dev
    t0 = time.perf_counter()
    up = json.loads(subprocess.run(["curl", "-sf", "-X", "POST", "-T", path, "-H",
                                    "Content-Type: application/octet-stream",
                                    f"http://127.0.0.1:{s.port}/v1/datasets?dtype=float32&shape={GIB // 4}"],
                                   capture_output=True, check=True).stdout)
    res["upload_s"] = time.perf_counter() - t0
    ds = up["id"]
    log(f"uploaded in {res['upload_s']:.2f} s; host ingest jobs")
    for name, flags in (("host_ingest", ()), ("host_ingest_pinned", ("--gpu-cache-bytes", "0"))):
        if flags:
            s = Server(work, *flags)
        stages = []
        for _ in range(6):
            j, _ = job(s, {"op": "sum", "dataset": ds, "device": DEVICE})
            stages.append(j["timings_ms"])
        # the first warms the lane's buffers; page-locked, the first two go through the ring and registering
        timed = stages[2:] if flags else stages[1:]
        gpu_ms = statistics.median(t["h2d"] + t["kernel"] + t["d2h"] for t in timed)
        res[name] = {"h2d_ms_each": [t["h2d"] for t in stages], "h2d_ms_p50": statistics.median(t["h2d"] for t in timed),
                     "gpu_stage_ms_p50": gpu_ms, "gpu_stage_gbps": GIB / (gpu_ms * 1e6),
                     "pinned_h2d_gbps": dev["h2d_gbps"], "pct_of_pinned_h2d": 100 * GIB / (gpu_ms * 1e6) / dev["h2d_gbps"],
                     "pinned": s.call("GET", "/v1/devices")[1]["gpus"][0]["cache"] if DEVICE != "cpu" else None}
        s.stop()

    # 2. cached
    log("cached jobs")
    s = Server(work)
    first, _ = job(s, {"op": "sum", "dataset": ds, "device": DEVICE})
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    kern, rtt = [], []
    for _ in range(50):
        j, ms = job(s, {"op": "sum", "dataset": ds, "device": DEVICE}, conn)
        assert j["cache"] == ("hit" if DEVICE != "cpu" else None), j
        kern.append(j["timings_ms"]["kernel"])
        rtt.append(ms)
    st, b = s.call("POST", "/v1/benchmarks", json.dumps({"op": "sum", "dtype": "float32", "n": GIB // 4,
                                                          "algorithms": [REF], "repeats": 5,
                                                          "device": DEVICE}),
                   {"Content-Type": "application/json", "Prefer": "wait=60"})
    assert st == 200 and b["status"] == "succeeded", (st, b)
    rows = {r["algorithm"]: r for r in b["result"]["rows"]}
    k50 = statistics.median(kern)
    res["cached"] = {"first_cache": first["cache"], "first_h2d_ms": first["timings_ms"]["h2d"],
                     "kernel_ms_p50": k50, "kernel_gbps": GIB / (k50 * 1e6), "cub_sum_gbps": rows[REF]["gbps"],
                     "pct_of_cub": 100 * GIB / (k50 * 1e6) / rows[REF]["gbps"],
                     "pct_of_copy_ceiling": 100 * GIB / (k50 * 1e6) / dev["ceiling_gbps"],
                     "rtt_ms_p50": statistics.median(rtt), "rtt_minus_kernel_ms_p50": statistics.median(
                         r - k for r, k in zip(rtt, kern))}
    conn.close()
    s.stop()
    log("lanes")

    # 3. lanes: small jobs while 1 GiB host-ingest jobs keep the GPU busy
    res["lanes"] = []
    small = {"op": "sum", "dtype": "float32", "data": [float(i % 7) for i in range(1024)], "device": DEVICE}
    for streams in (1, 4):
        s = Server(work, "--streams", str(streams), "--gpu-cache-bytes", "0")
        stop = [False]

        def big():
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
            while not stop[0]:
                job(s, {"op": "sum", "dataset": ds, "device": DEVICE}, c)
        bg = threading.Thread(target=big)
        bg.start()
        time.sleep(0.2)
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        lat = sorted(job(s, small, conn)[1] for _ in range(200))
        stop[0] = True
        bg.join()
        res["lanes"].append({"streams": streams, "small_p50_ms": lat[100], "small_p99_ms": lat[197]})
        s.stop()

    with open(OUT, "w") as f:
        json.dump(res, f, indent=1)
    h, c = res["host_ingest"], res["cached"]
    print(f"device {dev['name']}: pinned H2D {dev['h2d_gbps']:.1f} GB/s, copy ceiling {dev['ceiling_gbps']:.0f} GB/s")
    print(f"upload 1 GiB (curl, durable): {res['upload_s']:.2f} s = {1 / res['upload_s']:.2f} GiB/s")
    for name in ("host_ingest", "host_ingest_pinned"):
        h = res[name]
        print(f"{name} 1 GiB sum: h2d {h['h2d_ms_p50']:.2f} ms, GPU stage {h['gpu_stage_ms_p50']:.2f} ms = "
              f"{h['gpu_stage_gbps']:.1f} GB/s = {h['pct_of_pinned_h2d']:.1f}% of pinned H2D; each job's h2d "
              + " ".join("%.1f" % x for x in h["h2d_ms_each"]))
    print(f"cached 1 GiB sum: kernel {c['kernel_ms_p50']:.3f} ms = {c['kernel_gbps']:.0f} GB/s = "
          f"{c['pct_of_cub']:.1f}% of CUB sum ({c['cub_sum_gbps']:.0f} GB/s); round trip p50 {c['rtt_ms_p50']:.3f} ms "
          f"(kernel + {c['rtt_minus_kernel_ms_p50']:.3f} ms)")
    for l in res["lanes"]:
        print(f"small jobs (1024 float32) beside 1 GiB host-ingest jobs, --streams {l['streams']}: "
              f"p50 {l['small_p50_ms']:.2f} ms, p99 {l['small_p99_ms']:.2f} ms")


if __name__ == "__main__":
    BIN, OUT = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="data-plane.", dir=".")
    try:
        main(work)
    finally:
        subprocess.run(["rm", "-rf", work])
