#!/usr/bin/env python3
# c1_probe.py: where one client's small job spends its time. One keep-alive connection sends N
# jobs in a row (1024 float32 summed, Prefer: wait=5), as JSON and as the one-shot binary body,
# to each device; prints the medians (and p90) of the round trip and of each phase the answer's
# Server-Timing names (receive, parse, submit, run, store, resume, answer: docs/API.md), the
# medians of the job's own timings_ms (queue, h2d, kernel, d2h, total: the device's stages within
# run) and of its launch_group, and writes c1-<host>-<date>.json under GPURED_BENCH_OUT (default
# bench/results). Not a test: it measures. GPURED_PROBE_VALUES=N sends N values a job instead of
# 1024. GPURED_PROBE_LOAD=63 runs wrk (bench/http_load.lua, same device and form) with that many
# connections beside the probe: where a job's time goes under load.
#   bench/c1_probe.py path/to/gpured [devices, e.g. cpu,gpu] [N]
import http.client
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import time
import urllib.parse

from store_load import save, serving

BIN = sys.argv[1]
DEVICES = (sys.argv[2] if len(sys.argv) > 2 else "cpu").split(",")
N = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
VALUES = [(i % 97) / 7.0 for i in range(int(os.environ.get("GPURED_PROBE_VALUES", "1024")))]
LOAD = int(os.environ.get("GPURED_PROBE_LOAD", "0"))


def forms(dev):
    """(name, path, body, headers) of each way to send the job."""
    wait = {"Prefer": "wait=5"}
    return [("json", "/v1/jobs", json.dumps({"op": "sum", "dtype": "float32", "data": VALUES, "device": dev}),
             dict(wait, **{"Content-Type": "application/json"})),
            ("binary", "/v1/jobs?op=sum&dtype=float32&device=" + dev, struct.pack("<%df" % len(VALUES), *VALUES),
             dict(wait, **{"Content-Type": "application/octet-stream"}))]


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def probe(url, path, body, headers):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port)
    trip, phases, stages = [], {}, {}
    for i in range(N):
        t0 = time.perf_counter()
        c.request("POST", path, body, headers)
        r = c.getresponse()
        doc = r.read()
        trip.append((time.perf_counter() - t0) * 1e3)
        assert r.status == 200, (r.status, path)
        for name, d in re.findall(r"(\w+);dur=([0-9.]+)", r.getheader("Server-Timing") or ""):
            phases.setdefault(name, []).append(float(d))
        doc = json.loads(doc)
        for name, d in dict(doc.get("timings_ms") or {}, launch_group=doc.get("launch_group", 1)).items():
            stages.setdefault(name, []).append(d)
    c.close()
    return trip, phases, stages


def main():
    rows = []
    for dev in DEVICES:
        with serving(BIN, [{"GPURED_THREADS": "16"}]) as (urls, _):
            for form, path, body, headers in forms(dev):
                probe(urls[0], path, body, headers)  # warm up (and the GPU's first launch)
                load = LOAD and subprocess.Popen(
                    ["wrk", "-t4", "-c%d" % LOAD, "-d600s", "-s", os.path.join(os.path.dirname(__file__), "http_load.lua"),
                     urls[0]], stdout=subprocess.DEVNULL,
                    env=dict(os.environ, GPURED_DEVICE=dev, GPURED_BENCH_FORM="binary" if form == "binary" else ""))
                time.sleep(1 if load else 0)
                trip, phases, stages = probe(urls[0], path, body, headers)
                if load:
                    load.terminate()
                    load.wait()
                med = {k: statistics.median(v) for k, v in phases.items()}
                row = dict(device=dev, form=form, n=N, round_trip_p50_ms=statistics.median(trip),
                           round_trip_p90_ms=pct(trip, 0.9), phases_p50_ms=med,
                           phases_p90_ms={k: pct(v, 0.9) for k, v in phases.items()},
                           server_p50_ms=statistics.median([sum(t) for t in zip(*phases.values())]))
                row["load_connections"] = LOAD
                row["job_timings_p50_ms"] = {k: statistics.median(v) for k, v in stages.items()}
                rows.append(row)
                print("%-4s %-6s round trip p50 %.3f ms (p90 %.3f); server p50 %.3f ms: %s; job's timings_ms p50: %s" % (
                    dev, form, row["round_trip_p50_ms"], row["round_trip_p90_ms"], row["server_p50_ms"],
                    ", ".join("%s %.3f" % kv for kv in med.items()),
                    ", ".join("%s %.4f" % kv for kv in row["job_timings_p50_ms"].items())), flush=True)
    save("c1", {"cores": os.cpu_count(), "rows": rows})


if __name__ == "__main__":
    main()
