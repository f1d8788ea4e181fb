#!/usr/bin/env python3
"""axes.py: reductions over the axes of a 4-D array on a GPU, through the real service, beside CuPy
and the memory ceiling measured in the same run (issue #36's targets).

A float32 (64, 64, 256, 256) array (1 GiB; AX_SHAPE=a,b,c,d for another) is uploaded as a dataset
and cached on the GPU. For sum, max, mean, var, nansum and argmax (single axes), or the ops named in
AX_OPS (arg ops over single axes only), over every single axis
and every pair of axes, each job is run AX_REPEATS times (default 5) after one that fills the
cache; its median kernel time (every pass: pairs that are not adjacent take two, the second on
the first's outputs on the device) gives GB/s of the input read, against the ceiling and CuPy,
which leaves its result on the device too. The results' copy to the host (d2h, in the same
median job) is shown apart. CuPy runs the same op on the same array (median of 10, CUDA events)
where the image has it. The ceiling is the device copy the server measures at start-up (read +
write). Prints a table and writes JSON. Not a test: it measures, it does not judge.
  bench/axes.py path/to/gpured out.json
"""
import io
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_plane as dp  # noqa: E402 (its Server and job)

import numpy as np  # noqa: E402

SHAPE = tuple(int(x) for x in os.environ.get("AX_SHAPE", "64,64,256,256").split(","))
REPEATS = int(os.environ.get("AX_REPEATS", 5))
# the targets' ops by default; AX_OPS=a,b,... for others (any reduction gpured has)
OPS = tuple(os.environ.get("AX_OPS", "sum,max,mean,var,nansum,argmax").split(","))


def one_axis(op):
    """argmin, argmax and their nan forms take one axis (or none)."""
    return "arg" in op


def cupy_ms(cp, x, op, axes):
    """CuPy's median time for op over axes, or None where CuPy has no such function."""
    f = getattr(cp, op, None)
    if f is None:
        return None
    run = lambda: f(x, axis=axes[0] if one_axis(op) else axes)  # noqa: E731
    run()
    times = []
    for _ in range(10):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return statistics.median(times)


def main(work):
    try:
        import cupy as cp
    except ImportError:
        cp = None
    a = np.random.default_rng(36).standard_normal(size=SHAPE, dtype=np.float32)
    nbytes = a.nbytes
    path = os.path.join(work, "a.npy")
    np.save(path, a)
    s = dp.Server(work, "--max-dataset-bytes", str(2 * nbytes + (1 << 20)))
    dev = s.call("GET", "/v1/devices")[1]
    dev = dev["gpus"][0] if dp.DEVICE != "cpu" else {**dev["cpu"], "ceiling_gbps": 0}
    up = json.loads(subprocess.run(["curl", "-sf", "-X", "POST", "-T", path, "-H", "Content-Type: application/x-npy",
                                    f"http://127.0.0.1:{s.port}/v1/datasets"], capture_output=True, check=True).stdout)
    dp.log(f"{dev['name']}: {SHAPE} float32 uploaded as {up['id']}")
    x = cp.asarray(a) if cp else None
    rows = []
    axes_sets = [(d,) for d in range(len(SHAPE))] + list(itertools.combinations(range(len(SHAPE)), 2))
    flat, _ = dp.job(s, {"op": "sum", "dataset": up["id"], "device": dp.DEVICE})  # fills the cache
    for op in OPS:
        for axes in axes_sets:
            if one_axis(op) and len(axes) > 1:
                continue
            stages = []
            for _ in range(REPEATS + 1):
                j, _ = dp.job(s, {"op": op, "dataset": up["id"], "axis": list(axes), "device": dp.DEVICE})
                stages.append(j["timings_ms"])
            k = statistics.median(t["kernel"] for t in stages[1:])
            d = statistics.median(t["d2h"] for t in stages[1:])
            c = cupy_ms(cp, x, op, axes) if cp else None
            row = {"op": op, "axes": list(axes), "kernel_ms": k, "d2h_ms": d, "gbps": nbytes / (k * 1e6),
                   "cupy_ms": c, "cupy_gbps": nbytes / (c * 1e6) if c else None, "vs_cupy": c / k if c else None,
                   "pct_of_ceiling": 100 * nbytes / (k * 1e6) / dev["ceiling_gbps"] if dev["ceiling_gbps"] else None}
            rows.append(row)
            dp.log(f"{op} {axes}: {row['gbps']:.0f} GB/s" + (f", CuPy {row['cupy_gbps']:.0f}" if c else ""))
    s.stop()
    res = {"benchmark": "axes", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "shape": SHAPE,
           "device": dev, "rows": rows}
    with open(dp.OUT, "w") as f:
        json.dump(res, f, indent=1)
    print(f"device {dev['name']}: copy ceiling {dev['ceiling_gbps']:.0f} GB/s; {SHAPE} float32, {nbytes >> 20} MiB")
    print(f"{'op':13} {'axes':8} {'kernel GB/s':>11} {'% ceiling':>9} {'d2h ms':>7} {'CuPy GB/s':>9} {'x CuPy':>7}")
    for r in rows:
        pct = f"{r['pct_of_ceiling']:.0f}" if r["pct_of_ceiling"] else "-"
        cg = f"{r['cupy_gbps']:.0f}" if r["cupy_gbps"] else "-"
        vs = f"{r['vs_cupy']:.2f}" if r["vs_cupy"] else "-"
        print(f"{r['op']:13} {str(tuple(r['axes'])):8} {r['gbps']:11.0f} {pct:>9} {r['d2h_ms']:7.3f} {cg:>9} {vs:>7}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    dp.BIN, dp.OUT = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        main(work)
