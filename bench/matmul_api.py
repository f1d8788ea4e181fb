#!/usr/bin/env python3
"""matmul_api.py: matmul jobs through the real service on a GPU machine (issue #5), beside cuBLAS
measured by bench/bench_matmul in the same run: square products from datasets with algorithm auto,
kernel GFLOP/s (the job's own figure) over cuBLAS's, and the job's stages end to end (operands from
the page cache through staging, row-streamed when m*k >= 2^22, the product written back as a dataset).
Prints a table and writes JSON. Not a test: it measures, it does not judge.
  bench/matmul_api.py path/to/gpured path/to/bench_matmul.json out.json
"""
import array
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_plane as D  # noqa: E402 (one way to start a server and run a job)
from data_plane import Server, job  # noqa: E402

D.BIN, CUBLAS_JSON, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
SIZES = [int(x) for x in os.environ.get("MM_SIZES", "2048,4096,8192").split(",")]
DEVICE = os.environ.get("MM_DEVICE", "gpu")  # cpu: a smoke run of this script where there is no GPU


def upload(s, dtype, n, seed):
    """An n x n operand of small varied values (no NaN, no overflow), as a raw upload."""
    path = os.path.join(s.data, "operand.bin")
    block = array.array("f" if dtype == "float32" else "d", [((i * 7919 + seed) % 1000) / 1000 - 0.5
                                                             for i in range(min(n * n, 1 << 20))]).tobytes()
    with open(path, "wb") as f:
        for _ in range(n * n * (4 if dtype == "float32" else 8) // len(block)):
            f.write(block)
    r = subprocess.run(["curl", "-sf", "-X", "POST", "-T", path, "-H", "Content-Type: application/octet-stream",
                        f"http://127.0.0.1:{s.port}/v1/datasets?dtype={dtype}&shape={n},{n}"],
                       capture_output=True, check=True)
    os.unlink(path)
    return json.loads(r.stdout)["id"]


def main(work):
    ref = {(r["dtype"], r["m"]): r["gflops"] for r in json.load(open(CUBLAS_JSON))["kernels"]
           if r["variant"] == "cublas" and r["m"] == r["n"] == r["k"]}
    s = Server(work)
    s.data = work
    rows = []
    for dtype in ("float32", "float64"):
        for n in SIZES:
            ids = upload(s, dtype, n, 1), upload(s, dtype, n, 2)
            jobs = [job(s, {"op": "matmul", "dtype": dtype, "a": {"dataset": ids[0]}, "b": {"dataset": ids[1]},
                            "device": DEVICE})[0] for _ in range(4)][1:]  # the first warms the lane
            t = {k: statistics.median(j["timings_ms"][k] for j in jobs) for k in jobs[0]["timings_ms"]}
            gf = statistics.median(j["gflops"] for j in jobs)
            rows.append({"dtype": dtype, "n": n, "algorithm": jobs[0]["algorithm"], "gflops": gf,
                         "cublas_gflops": ref.get((dtype, n)), "vs_cublas": gf / ref[(dtype, n)] if ref.get((dtype, n))
                         else None, "timings_ms": t})
            for i in ids:
                s.call("DELETE", f"/v1/datasets/{i}")
    s.stop()
    with open(OUT, "w") as f:
        json.dump({"benchmark": "matmul_api", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "rows": rows}, f, indent=1)
    print(f"{'dtype':8} {'n':>5} {'algorithm':10} {'GFLOP/s':>9} {'cuBLAS':>9} {'ratio':>6} {'h2d':>8} {'kernel':>8} "
          f"{'d2h':>8} {'overlap':>8} {'total':>8}")
    for r in rows:
        t = r["timings_ms"]
        print(f"{r['dtype']:8} {r['n']:>5} {r['algorithm']:10} {r['gflops']:>9.0f} {r['cublas_gflops'] or 0:>9.0f} "
              f"{r['vs_cublas'] or 0:>6.3f} {t['h2d']:>8.2f} {t['kernel']:>8.2f} {t['d2h']:>8.2f} "
              f"{t.get('overlap', 0):>8.2f} {t['total']:>8.2f}")


work = tempfile.mkdtemp(prefix="matmul-api.", dir=".")
try:
    main(work)
finally:
    subprocess.run(["rm", "-rf", work])
