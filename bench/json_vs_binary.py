#!/usr/bin/env python3
# json_vs_binary.py: one job's round trip (POST with Prefer: wait, sum of n float32 on the CPU) with
# its values as JSON numbers (as Python's json writes float32 values) against the same values as a
# raw little-endian body and as a .npy, for n from 1024 to 2^20: medians of 15 sequential jobs on
# one keep-alive connection. Prints a table and writes json_vs_binary-<host>-<date>.json under
# GPURED_BENCH_OUT (default bench/results). Not a test: it measures.
#   bench/json_vs_binary.py path/to/gpured
import array
import http.client
import json
import os
import random
import statistics
import struct
import sys
import time

from store_load import save, serving


def npy(values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + values.tobytes()


def main():
    with serving(sys.argv[1], [{"GPURED_MAX_BODY_BYTES": str(1 << 28)}]) as (urls, _):
        host, port = urls[0][7:].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        rows = []
        rng = random.Random(5)
        print("%8s %10s %10s %10s %12s %10s" % ("n", "json_ms", "raw_ms", "npy_ms", "json/raw", "json_MB"))
        for n in (1024, 4096, 16384, 65536, 262144, 1048576):
            values = array.array("f", [rng.uniform(-1000, 1000) for _ in range(n)])
            forms = {
                "json": ("/v1/jobs", "application/json",
                         json.dumps({"op": "sum", "dtype": "float32", "device": "cpu", "data": values.tolist()}).encode()),
                "raw": ("/v1/jobs?op=sum&dtype=float32&device=cpu", "application/octet-stream", values.tobytes()),
                "npy": ("/v1/jobs?op=sum&device=cpu", "application/x-npy", npy(values)),
            }
            r = {"n": n, "json_bytes": len(forms["json"][2])}
            for name, (path, ctype, body) in forms.items():
                ts = []
                for _ in range(15):
                    t0 = time.perf_counter()
                    conn.request("POST", path, body, {"Content-Type": ctype, "Prefer": "wait=60"})
                    resp = conn.getresponse()
                    resp.read()
                    assert resp.status == 200, (name, resp.status)
                    ts.append((time.perf_counter() - t0) * 1e3)
                r[name + "_ms"] = statistics.median(ts)
            r["json_over_raw"] = r["json_ms"] / r["raw_ms"]
            rows.append(r)
            print("%8d %10.3f %10.3f %10.3f %12.1f %10.2f" % (n, r["json_ms"], r["raw_ms"], r["npy_ms"], r["json_over_raw"],
                                                             r["json_bytes"] / 1e6), flush=True)
    save("json_vs_binary", {"cores": os.cpu_count(), "rows": rows})


if __name__ == "__main__":
    main()
