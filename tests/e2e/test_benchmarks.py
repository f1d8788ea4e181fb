# test_benchmarks.py: POST /v1/benchmarks runs the device's variants side by side: every row
# ran and matched the CPU reference; bad requests are problems naming the member at fault.
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
            and op in a["ops"] and dtype in a["dtypes"] and None in a["axes"]]


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
    L.check_stop(srv)


L.run_suite(body)
