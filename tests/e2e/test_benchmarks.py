# test_benchmarks.py: POST /v1/benchmarks runs the device's variants side by side: every row
# ran and matched the reference (reductions: the CPU; products: the CPU up to n = 1024, else
# cuBLAS), GB/s or GFLOP/s beside the baseline; bad requests are problems naming the member at fault.
import json

import e2e_lib as L
from e2e_lib import CHECK

WAIT = {"Content-Type": "application/json", "Prefer": "wait=60"}


def post(srv, body):
    return srv.req("POST", "/v1/benchmarks", json.dumps(body), WAIT, timeout=120)


def variants(srv, op, dtype):
    algos = srv.get_json("/v1/algorithms")["algorithms"]
    dev = "cpu" if L.DEVICE == "cpu" else "gpu:0"
    return [a["name"] for a in algos if a["device"] == dev and a["name"] != "auto"
            and op in a["ops"] and dtype in a["dtypes"] and (op == "matmul" or None in a["axes"])]


def matmul(srv):
    """Every matmul variant of the device on n x n x n products: each row ran, matched the
    reference, its GFLOP/s is 2 n^3 over its median, and on a GPU its percentage of cuBLAS."""
    sizes = [(64, 5), (257, 3)] if L.DEVICE == "cpu" else [(1000, 3), (2048, 2)]
    for dtype in ("float32", "float64"):
        for n, repeats in sizes:
            what = "matmul benchmark %s n=%d" % (dtype, n)
            r = post(srv, {"op": "matmul", "dtype": dtype, "n": n, "algorithms": ["all"], "repeats": repeats,
                           "device": L.DEVICE})
            if not CHECK.eq(r.status, 200, what + ": status (body %r)" % r.body[:300]):
                continue
            job = r.json()
            res = job.get("result") or {}
            CHECK.eq(job.get("status"), "succeeded", what + ": status member")
            CHECK.eq((job.get("op"), job.get("kind"), job.get("repeats")), ("matmul", "benchmark", repeats),
                     what + ": op, kind, repeats")
            CHECK.eq(job.get("bytes"), 2 * n * n * L.DTYPE_SIZE[dtype], what + ": bytes (a and b)")
            CHECK.eq(res.get("reference"), "cpu_tiled" if n <= 1024 else "cublas", what + ": reference")
            rows = res.get("rows", [])
            CHECK.eq(sorted(x.get("algorithm") for x in rows), sorted(variants(srv, "matmul", dtype)),
                     what + ": one row per variant that covers it")
            cublas = [x for x in rows if x.get("algorithm") == "cublas"]
            if L.DEVICE == "gpu":
                CHECK.ok(len(cublas) == 1 and isinstance(cublas[0].get("gflops"), float), what + ": a cublas row ran")
                CHECK.eq(res.get("cublas_gflops"), cublas[0].get("gflops") if cublas else "no cublas row",
                         what + ": cublas_gflops is the cublas row's")
            else:
                CHECK.eq(res.get("cublas_gflops", "missing"), None, what + ": no cuBLAS on the CPU")
            for row in rows:
                name = "%s: %s" % (what, row.get("algorithm"))
                CHECK.eq(row.get("error"), None, name + ": error")
                CHECK.eq(row.get("matched"), True, name + ": answer matches the reference")
                ms, gf = row.get("median_ms"), row.get("gflops")
                if not CHECK.ok(isinstance(ms, float) and ms > 0 and isinstance(gf, float) and gf > 0,
                                name + ": median_ms %r, gflops %r" % (ms, gf)):
                    continue
                CHECK.ok(abs(gf - 2.0 * n ** 3 / (ms * 1e6)) <= 1e-9 * gf, name + ": gflops is 2 n^3 over the median")
                CHECK.ok("gbps" not in row and "pct_of_ceiling" not in row, name + ": no GB/s columns for a product")
                base = res.get("cublas_gflops")
                if L.DEVICE == "gpu" and isinstance(base, float):
                    CHECK.ok(abs(row.get("pct_of_cublas", -1) - 100 * gf / base) < 1e-6,
                             name + ": pct_of_cublas %r" % row.get("pct_of_cublas"))
                else:
                    CHECK.eq(row.get("pct_of_cublas", "missing"), None, name + ": pct_of_cublas without cuBLAS")
            got = srv.get_json("/v1/jobs/" + job["id"])
            CHECK.eq(got.get("result"), job.get("result"), what + ": GET gives the same table")

    # chosen variants, in order; without cublas among them there is no percentage
    names = variants(srv, "matmul", "float32")
    names = [x for x in names if x != "cublas"][:2]
    r = post(srv, {"op": "matmul", "dtype": "float32", "n": 100, "algorithms": names, "repeats": 2, "device": L.DEVICE})
    if CHECK.eq(r.status, 200, "matmul benchmark of chosen variants (body %r)" % r.body[:200]):
        res = r.json()["result"]
        CHECK.eq([x["algorithm"] for x in res["rows"]], names, "chosen matmul variants, in order")
        CHECK.eq(res.get("cublas_gflops", "missing"), None, "no cublas row: no cublas_gflops")
        CHECK.ok(all(x.get("pct_of_cublas", "missing") is None and x.get("matched") is True for x in res["rows"]),
                 "no cublas row: pct_of_cublas null, answers matched %r" % res["rows"])

    big = 1025 if L.DEVICE == "cpu" else 8193
    bad = [
        ({"op": "matmul", "dtype": "float32", "n": big, "repeats": 1}, 422, "n"),
        ({"op": "matmul", "dtype": "float64", "n": 1024 if L.DEVICE == "cpu" else 8192, "repeats": 100}, 422, "repeats"),
        ({"op": "matmul", "dtype": "float32", "n": 64, "algorithms": ["no_such_variant"]}, 400, "algorithms"),
        ({"op": "matmul", "dtype": "float32", "n": 64, "algorithms": variants(srv, "sum", "float32")[:1]}, 400,
         "algorithms"),  # a reduction variant is no matmul variant
        ({"op": "matmul", "dtype": "int32", "n": 64}, 422, "dtype"),
        ({"op": "matmul", "dtype": "int64", "n": 64, "algorithms": ["all"]}, 422, "dtype"),
        ({"op": "matmul", "dtype": "float32"}, 400, "n"),
        ({"op": "matmul", "dtype": "float32", "n": 64, "b": {"data": [[1]]}}, 400, "b"),
    ]
    if L.DEVICE == "gpu":  # cublas_tf32 covers float32 only
        bad.append(({"op": "matmul", "dtype": "float64", "n": 64, "algorithms": ["cublas_tf32"]}, 422, "algorithms"))
    for b, status, field in bad:
        b.setdefault("device", L.DEVICE)
        L.check_problem("benchmark %s" % json.dumps(b), post(srv, b), status, field)


def body():
    srv = L.start_suite()
    for op, dtype, n in [("sum", "float32", 1 << 20), ("max", "int32", 100003), ("argmax", "float64", 4097),
                         ("mean", "int64", 65537), ("sum", "int32", 1 << 16)]:
        what = "benchmark %s %s n=%d" % (op, dtype, n)
        r = post(srv, {"op": op, "dtype": dtype, "n": n, "repeats": 3, "device": L.DEVICE})
        if not CHECK.eq(r.status, 200, what + ": status (body %r)" % r.body[:300]):
            continue
        job = r.json()
        CHECK.eq(job.get("status"), "succeeded", what + ": status member")
        CHECK.eq(job.get("kind"), "benchmark", what + ": kind")
        CHECK.eq(job.get("bytes"), n * L.DTYPE_SIZE[dtype], what + ": bytes")
        rows = (job.get("result") or {}).get("rows", [])
        ceiling = (job.get("result") or {}).get("ceiling_gbps", "missing")
        if L.DEVICE == "gpu":  # measured at start-up; the CPU has none
            CHECK.ok(isinstance(ceiling, float) and ceiling > 100, what + ": ceiling_gbps %r" % ceiling)
        else:
            CHECK.eq(ceiling, None, what + ": ceiling_gbps on the CPU")
        CHECK.eq(sorted(x.get("algorithm") for x in rows), sorted(variants(srv, op, dtype)),
                 what + ": one row per variant that covers it")
        for row in rows:
            name = "%s: %s" % (what, row.get("algorithm"))
            CHECK.eq(row.get("error"), None, name + ": error")
            CHECK.eq(row.get("matched"), True, name + ": answer matches the reference")
            CHECK.ok(isinstance(row.get("median_ms"), float) and row["median_ms"] >= 0, name + ": median_ms")
            CHECK.ok(isinstance(row.get("gbps"), float) and row["gbps"] >= 0, name + ": gbps")
            if isinstance(ceiling, float) and isinstance(row.get("gbps"), float):
                CHECK.ok(abs(row.get("pct_of_ceiling", -1) - 100 * row["gbps"] / ceiling) < 1e-6,
                         name + ": pct_of_ceiling %r" % row.get("pct_of_ceiling"))
            else:
                CHECK.eq(row.get("pct_of_ceiling", "missing"), None, name + ": pct_of_ceiling without a ceiling")
        got = srv.get_json("/v1/jobs/" + job["id"])
        CHECK.eq(got.get("result"), job.get("result"), what + ": GET gives the same table")

    names = variants(srv, "sum", "float32")[:2]
    r = post(srv, {"op": "sum", "dtype": "float32", "n": 1000, "algorithms": names, "repeats": 2, "device": L.DEVICE})
    if CHECK.eq(r.status, 200, "benchmark of chosen variants (body %r)" % r.body[:200]):
        CHECK.eq([x["algorithm"] for x in r.json()["result"]["rows"]], names, "chosen variants, in order")
        CHECK.eq(r.json().get("algorithms"), names, "chosen variants echoed")

    bad = [
        ({"dtype": "float32", "n": 10}, 400, "op"),
        ({"op": "sum", "dtype": "float32"}, 400, "n"),
        ({"op": "sum", "dtype": "float32", "n": 0}, 422, "n"),
        ({"op": "sum", "dtype": "float32", "n": 1 << 40}, 422, "n"),
        ({"op": "sum", "dtype": "float32", "n": "10"}, 400, "n"),
        ({"op": "sum", "dtype": "float32", "n": 10, "repeats": 0}, 422, "repeats"),
        ({"op": "sum", "dtype": "float32", "n": 10, "repeats": 101}, 422, "repeats"),
        ({"op": "sum", "dtype": "float32", "n": 10, "algorithms": "all"}, 400, "algorithms"),
        ({"op": "sum", "dtype": "float32", "n": 10, "algorithms": []}, 400, "algorithms"),
        ({"op": "sum", "dtype": "float32", "n": 10, "algorithms": ["no_such_variant"]}, 400, "algorithms"),
        ({"op": "sum", "dtype": "float32", "n": 10, "data": [1]}, 400, "data"),
        ({"op": "sum", "dtype": "float32", "n": 10, "device": "tpu"}, 400, "device"),
    ]
    for b, status, field in bad:
        L.check_problem("benchmark %s" % json.dumps(b), post(srv, b), status, field)
    matmul(srv)
    L.check_stop(srv)


L.run_suite(body)
