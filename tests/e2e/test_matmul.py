# test_matmul.py: matmul jobs (C = alpha * A @ B + beta * C) against numpy in float64 with a
# bound that scales with k * eps: 1x1x1, odd shapes, tile multiples +-1, alpha/beta combinations,
# operands from datasets (c not read when beta is 0), every variant the device lists, the product
# kept as a dataset (record, .npy through /result and /v1/datasets, chained into a reduction),
# values inline up to 4096 elements, every bad request (with /healthz after each), operand
# datasets held against DELETE only while a job uses them, kill -9 with queued products.
import io
import re

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

O.with_debian_python("numpy")
import numpy as np  # noqa: E402 (after the interpreter is settled)

INLINE_MAX = 4096  # GR_RESULT_INLINE_MAX (server/job.h)
NP = {"float32": "<f4", "float64": "<f8"}
EPS = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}
TF32_EPS = 2.0 ** -11  # TF32 keeps 10 mantissa bits: each input rounded within 2^-11
DS_ID = re.compile(r"^d_[0-9a-f]{16}$")
WAIT = {"Prefer": "wait=60"}


def gen(shape, dtype, rng):
    return rng.standard_normal(size=shape).astype(NP[dtype])


def upload(srv, a):
    """a as a dataset through a .npy body; its id."""
    buf = io.BytesIO()
    np.save(buf, a)
    r = srv.req("POST", "/v1/datasets", buf.getvalue(), headers={"Content-Type": "application/x-npy"})
    if not CHECK.eq(r.status, 201, "upload of a %s %s dataset" % (a.shape, a.dtype)):
        return None
    return r.json()["id"]


def operand(x, ds=None):
    return {"dataset": ds} if ds else {"data": x.tolist()}


def submit(srv, body, headers=WAIT):
    body = dict(body, device=L.DEVICE)
    return srv.req("POST", "/v1/jobs", body, headers=headers, timeout=120)


def within(got, a, b, c, alpha, beta, dtype, tf32=False):
    """got is alpha a b + beta c (c None: beta 0) within (k + 2) rounding errors of each term's
    magnitude, computed in float64 from the values as sent."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = alpha * (a64 @ b64)
    scale = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if c is not None and beta != 0:
        want = want + beta * c.astype(np.float64)
        scale = scale + abs(beta) * np.abs(c.astype(np.float64))
    eps = EPS[dtype] + (2 * TF32_EPS if tf32 else 0)
    tol = 2 * (a.shape[1] + 2) * eps * scale + 1e-300
    if got.shape != want.shape:
        return False, "shape %s, expected %s" % (got.shape, want.shape)
    err = np.abs(got.astype(np.float64) - want)
    bad = np.argwhere(~(err <= tol))
    if len(bad):
        i = tuple(bad[0])
        return False, "%d elements off, first at %s: got %r want %r (tol %g)" % (len(bad), i, got[i], want[i], tol[i])
    return True, ""


def product(srv, job_id, dtype):
    """The product through /result as .npy."""
    r = srv.req("GET", "/v1/jobs/%s/result" % job_id, headers={"Accept": "application/x-npy"})
    if not CHECK.eq(r.status, 200, "GET /result as .npy of %s" % job_id):
        return None
    arr = np.load(io.BytesIO(r.body))
    CHECK.eq(arr.dtype.str, NP[dtype], "the .npy product's dtype")
    return arr


def run_case(srv, what, dtype, a, b, c=None, alpha=1.0, beta=0.0, ds=(None, None, None), algorithm=None,
             send_dtype=True):
    """One product end to end; the job, or None. send_dtype False: the datasets give it."""
    body = {"op": "matmul", "a": operand(a, ds[0]), "b": operand(b, ds[1])}
    if send_dtype:
        body["dtype"] = dtype
    if c is not None:
        body["c"] = operand(c, ds[2])
    if alpha != 1.0:
        body["alpha"] = alpha
    if beta != 0.0:
        body["beta"] = beta
    if algorithm:
        body["algorithm"] = algorithm
    r = submit(srv, body)
    if not CHECK.eq(r.status, 200, "%s: POST (Prefer: wait) status, body %r" % (what, r.body[:300])):
        return None
    job = r.json()
    if not CHECK.eq(job.get("status"), "succeeded", "%s: status (error %r)" % (what, job.get("error"))):
        return None
    m, n = a.shape[0], b.shape[1]
    res = job["result"]
    CHECK.eq(job["op"], "matmul", what + ": op")
    CHECK.eq(job["dtype"], dtype, what + ": dtype")
    CHECK.eq(job["shape"], [m, n], what + ": the job's shape")
    CHECK.eq(res.get("shape"), [m, n], what + ": result.shape")
    CHECK.ok(DS_ID.match(str(res.get("dataset"))), what + ": result.dataset is a dataset id: %r" % res.get("dataset"))
    CHECK.ok(isinstance(job.get("gflops"), float) and job["gflops"] > 0, what + ": gflops %r" % job.get("gflops"))
    CHECK.ok(job["gbps"] is None, what + ": gbps is null for a product")
    for stage in ("h2d", "kernel", "d2h", "total", "overlap"):
        CHECK.ok(isinstance(job["timings_ms"].get(stage), (int, float)), what + ": timings_ms." + stage)
    CHECK.eq(job["a"]["shape"], list(a.shape), what + ": a's shape in the job")
    if algorithm:
        CHECK.eq(job["algorithm"], algorithm, what + ": the variant that ran")
    tf32 = job["algorithm"] == "cublas_tf32"
    got = product(srv, job["id"], dtype)
    if got is not None:
        ok, why = within(got, a, b, c, alpha, beta, dtype, tf32)
        CHECK.ok(ok, "%s: the .npy product: %s" % (what, why))
    if m * n <= INLINE_MAX:
        vals = res.get("values")
        if CHECK.ok(isinstance(vals, list), what + ": values inline for %d elements" % (m * n)) and got is not None:
            CHECK.ok(np.array_equal(np.array(vals, dtype=np.float64), got.astype(np.float64)),
                     what + ": inline values equal the dataset's")
    else:
        CHECK.ok("values" not in res, what + ": no values inline for %d elements" % (m * n))
    return job


def shapes_and_scalars(srv):
    rng = np.random.default_rng(5)
    sizes = [(1, 1, 1), (17, 33, 9), (2, 1, 3), (1, 40, 1)]
    for t in (16, 32, 64, 128):
        sizes += [(t - 1, t + 1, t), (t + 1, t, t - 1), (t, t, t)]
    for dtype in ("float32", "float64"):
        for m, k, n in sizes:
            a, b = gen((m, k), dtype, rng), gen((k, n), dtype, rng)
            run_case(srv, "%s %dx%dx%d" % (dtype, m, k, n), dtype, a, b)
        m, k, n = 19, 23, 29
        a, b, c = gen((m, k), dtype, rng), gen((k, n), dtype, rng), gen((m, n), dtype, rng)
        for alpha, beta in ((2.5, 0.0), (-1.0, 0.5), (0.0, 1.0), (1.0, -2.0), (0.0, 0.0), (1.0, 0.0)):
            run_case(srv, "%s alpha %g beta %g" % (dtype, alpha, beta), dtype, a, b, c, alpha, beta)
        run_case(srv, "%s alpha 3 without c" % dtype, dtype, a, b, alpha=3.0)


def inline_threshold(srv):
    """64 x 64 = 4096 elements come inline too, 65 x 64 only as the dataset."""
    rng = np.random.default_rng(6)
    for m in (64, 65):
        a, b = gen((m, 8), "float32", rng), gen((8, 64), "float32", rng)
        run_case(srv, "%d x 64 product" % m, "float32", a, b)


def on_datasets(srv):
    rng = np.random.default_rng(7)
    for dtype in ("float32", "float64"):
        m, k, n = 129, 257, 65
        a, b, c = gen((m, k), dtype, rng), gen((k, n), dtype, rng), gen((m, n), dtype, rng)
        ids = [upload(srv, x) for x in (a, b, c)]
        if None in ids:
            return
        run_case(srv, "%s all operands datasets (dtype from them)" % dtype, dtype, a, b, c, 1.5, -0.5, ds=ids,
                 send_dtype=False)
        run_case(srv, "%s a dataset, b inline" % dtype, dtype, a, b, ds=(ids[0], None, None))
        run_case(srv, "%s a inline, b and c datasets" % dtype, dtype, a, b, c, 1.0, 2.0, ds=(None, ids[1], ids[2]))
        # beta 0: c is not read (BLAS), so its NaN must not reach the product
        cn = c.copy()
        cn[3, 4] = np.nan
        nan_id = upload(srv, cn)
        if nan_id:
            job = run_case(srv, "%s beta 0 with a NaN in c" % dtype, dtype, a, b, cn, 2.0, 0.0, ds=(ids[0], ids[1], nan_id))
            if job:
                CHECK.eq(job["c"].get("dataset"), nan_id, "the job names its c dataset")
        # the job's holds end with it: the operands can be deleted now
        for i in ids + [nan_id]:
            CHECK.eq(srv.req("DELETE", "/v1/datasets/%s" % i).status, 204, "DELETE operand dataset %s after its jobs" % i)


def streamed(srv):
    """A product large enough to go by row blocks on a GPU (m k >= 2^22), m not a multiple of the
    blocks, from datasets, with c."""
    rng = np.random.default_rng(12)
    a, b, c = gen((2100, 2000), "float32", rng), gen((2000, 300), "float32", rng), gen((2100, 300), "float32", rng)
    ids = [upload(srv, x) for x in (a, b, c)]
    if None not in ids:
        job = run_case(srv, "2100x2000x300 float32 (streamed on a GPU)", "float32", a, b, c, 0.75, 1.5, ds=ids)
        if job and L.DEVICE != "cpu":
            CHECK.ok(job["timings_ms"]["h2d"] > 0 and job["timings_ms"]["d2h"] > 0, "a GPU product times its copies")


def chained(srv):
    """The product's dataset: its record, its .npy, and a reduction job on it."""
    rng = np.random.default_rng(8)
    a, b = gen((70, 30), "float64", rng), gen((30, 90), "float64", rng)
    job = run_case(srv, "product to chain", "float64", a, b)
    if not job:
        return
    ds = job["result"]["dataset"]
    rec = srv.get_json("/v1/datasets/%s" % ds)
    CHECK.eq((rec.get("dtype"), rec.get("shape"), rec.get("bytes")), ("float64", [70, 90], 70 * 90 * 8),
             "the product dataset's record")
    r = srv.req("GET", "/v1/datasets/%s/data" % ds)
    prod = np.load(io.BytesIO(r.body)) if r.status == 200 else None
    if not CHECK.ok(prod is not None and prod.shape == (70, 90), "the product dataset's .npy"):
        return
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds, "axis": 1, "device": L.DEVICE}, headers=WAIT)
    if CHECK.eq(r.status, 200, "a sum over the product's rows: %r" % r.body[:200]):
        vals = np.array(r.json()["result"]["values"], dtype=np.float64)
        scale = np.abs(prod).sum(axis=1)
        CHECK.ok(np.all(np.abs(vals - prod.sum(axis=1)) <= 1e-12 * scale), "the chained sum against numpy")
    lst = srv.get_json("/v1/jobs?op=matmul&limit=5")
    CHECK.ok(lst["jobs"] and all(j["op"] == "matmul" for j in lst["jobs"]), "?op=matmul lists matmul jobs only")


def algorithms(srv):
    """Every matmul variant /v1/algorithms lists for the device, on every dtype it covers."""
    algos = srv.get_json("/v1/algorithms")["algorithms"]
    dev = "cpu" if L.DEVICE == "cpu" else "gpu:0"
    mm = [x for x in algos if x["device"] == dev and x["ops"] == ["matmul"]]
    want = {"cpu_naive", "cpu_tiled"} if dev == "cpu" else {"naive", "tiled16", "tiled32", "regtile", "cublas", "cublas_tf32"}
    CHECK.eq({x["name"] for x in mm}, want, "matmul variants listed for %s" % dev)
    auto = [x for x in algos if x["device"] == dev and x["name"] == "auto"]
    CHECK.ok(auto and "matmul" in auto[0]["ops"], "auto lists matmul among its ops")
    CHECK.ok(all("matmul" not in x["ops"] for x in algos
                 if x["device"] == dev and x["name"] not in want and x["name"] != "auto"),
             "no reduction variant claims matmul")
    rng = np.random.default_rng(9)
    for x in mm:
        for dtype in x["dtypes"]:
            for m, k, n in ((33, 129, 31), (128, 64, 128)):
                a, b = gen((m, k), dtype, rng), gen((k, n), dtype, rng)
                c = gen((m, n), dtype, rng)
                run_case(srv, "%s %s %dx%dx%d" % (x["name"], dtype, m, k, n), dtype, a, b, c, 1.25, -0.75,
                         algorithm=x["name"])
        if "float64" not in x["dtypes"]:
            r = submit(srv, {"op": "matmul", "dtype": "float64", "a": {"data": [[1]]}, "b": {"data": [[1]]},
                             "algorithm": x["name"]})
            bad(srv, "%s on float64" % x["name"], r, 422, "algorithm")


def bad(srv, what, r, status, field=None, needles=()):
    L.check_problem(what, r, status, field)
    if needles and r.status == status:
        detail = r.json().get("detail", "")
        for s in needles:
            CHECK.ok(s in detail, "%s: detail %r names %r" % (what, detail, s))
    CHECK.eq(srv.req("GET", "/healthz").status, 200, what + ": /healthz afterwards")


def bad_requests(srv):
    one = {"data": [[1.0]]}
    a23 = {"data": [[1, 2, 3], [4, 5, 6]]}
    b45 = {"data": [[0] * 5] * 4}
    b32 = {"data": [[1, 2], [3, 4], [5, 6]]}
    base = {"op": "matmul", "dtype": "float32"}
    cases = [
        ("a's columns are not b's rows", dict(base, a=a23, b=b45), 422, "b", ("2 x 3", "4 x 5")),
        ("c of the wrong shape", dict(base, a=a23, b=b32, c={"data": [[1, 2, 3]]}), 422, "c", ("1 x 3", "2 x 2")),
        ("beta without c", dict(base, a=a23, b=b32, beta=0.5), 422, "beta", ("2 x 2",)),
        ("1-D a", dict(base, a={"data": [1, 2]}, b=b32), 422, "a", ()),
        ("1-D b", dict(base, a=one, b={"data": [3]}), 422, "b", ()),
        ("int32 dtype", dict(base, dtype="int32", a=one, b=one), 422, "dtype", ("float32 or float64",)),
        ("unknown dtype", dict(base, dtype="half", a=one, b=one), 400, "dtype", ()),
        ("no dtype with inline operands", {"op": "matmul", "a": one, "b": one}, 400, "dtype", ()),
        ("no b", dict(base, a=one), 400, "b", ()),
        ("no a", dict(base, b=one), 400, "a", ()),
        ("a not an object", dict(base, a=[[1]], b=one), 400, "a", ()),
        ("a with data and dataset", dict(base, a={"data": [[1]], "dataset": "d_0000000000000001"}, b=one), 400, "a", ()),
        ("a with neither", dict(base, a={}, b=one), 400, "a", ()),
        ("a with an unknown member", dict(base, a={"data": [[1]], "rows": 1}, b=one), 400, "a", ()),
        ("ragged rows", dict(base, a={"data": [[1, 2], [3]]}, b=one), 422, "a", ()),
        ("empty a", dict(base, a={"data": []}, b=one), 422, "a", ()),
        ("a string element", dict(base, a={"data": [["1"]]}, b=one), 400, "a", ()),
        ("a float32 overflow", dict(base, a={"data": [[1e39]]}, b=one), 422, "a", ()),
        ("3-D a", dict(base, a={"data": [[[1]]]}, b=one), 422, "a", ()),
        ("alpha a string", dict(base, a=one, b=one, alpha="2"), 400, "alpha", ()),
        ("beta null", dict(base, a=one, b=one, c=one, beta=None), 400, "beta", ()),
        ("data with matmul", dict(base, a=one, b=one, data=[1]), 422, "data", ()),
        ("axis with matmul", dict(base, a=one, b=one, axis=0), 422, "axis", ()),
        ("a with a reduction", {"op": "sum", "dtype": "float32", "data": [1], "a": one}, 422, "a", ()),
        ("unknown variant", dict(base, a=one, b=one, algorithm="fastest"), 400, "algorithm", ()),
        ("a reduction's variant", dict(base, a=one, b=one, algorithm="cpu_seq"), 400, "algorithm", ()),
        ("unknown dataset", dict(base, a={"dataset": "d_00000000000000ff"}, b=one), 404, "a", ()),
        ("malformed dataset id", dict(base, a={"dataset": "x"}, b=one), 404, "a", ()),
        ("dataset id a number", dict(base, a={"dataset": 5}, b=one), 400, "a", ()),
    ]
    for what, body, status, field, needles in cases:
        bad(srv, what, submit(srv, body, headers={}), status, field, needles)
    bad(srv, "matmul as a one-shot binary job",
        srv.req("POST", "/v1/jobs?op=matmul&dtype=float32", b"\0\0\0\0",
                headers={"Content-Type": "application/octet-stream"}), 422, "op")
    bad(srv, "matmul body as text/plain",
        srv.req("POST", "/v1/jobs", dict(base, a=one, b=one), headers={"Content-Type": "text/plain"}), 415)
    rng = np.random.default_rng(10)
    v1 = upload(srv, gen((6,), "float32", rng))
    f64 = upload(srv, gen((3, 2), "float64", rng))
    if v1 and f64:
        bad(srv, "a 1-D dataset operand", submit(srv, dict(base, a={"dataset": v1}, b=one), headers={}), 422, "a")
        bad(srv, "a float64 dataset in a float32 product", submit(srv, dict(base, a=a23, b={"dataset": f64}), headers={}),
            422, "b", ("float64", "float32"))
        bad(srv, "datasets of two dtypes",
            submit(srv, {"op": "matmul", "a": {"dataset": upload(srv, gen((2, 3), "float32", rng))}, "b": {"dataset": f64}},
                   headers={}), 422, "b")
        # a product over --max-dataset-bytes (4 GiB by default) is refused before it runs
        tall, wide = upload(srv, gen((70000, 1), "float32", rng)), upload(srv, gen((1, 20000), "float32", rng))
        bad(srv, "a 5.6 GB product", submit(srv, {"op": "matmul", "a": {"dataset": tall}, "b": {"dataset": wide}},
                                            headers={}), 422, "b", ("70000 x 20000", "--max-dataset-bytes"))
        # refused jobs hold nothing: all can be deleted
        for i in (v1, f64, tall, wide):
            CHECK.eq(srv.req("DELETE", "/v1/datasets/%s" % i).status, 204, "DELETE %s after refused jobs" % i)


def crash_with_queued(srv):
    """kill -9 with products accepted (one slow in front): after the restart each one runs and
    matches; their operand datasets are held until then."""
    rng = np.random.default_rng(11)
    n = 700 if L.DEVICE == "cpu" else 2048
    big_a, big_b = gen((n, n), "float64", rng), gen((n, n), "float64", rng)
    ids = [upload(srv, big_a), upload(srv, big_b)]
    if None in ids:
        return
    small = [(gen((5, 7), "float32", rng), gen((7, 3), "float32", rng), gen((5, 3), "float32", rng)) for _ in range(3)]
    s_id = upload(srv, small[0][1])
    jobs = []
    r = submit(srv, {"op": "matmul", "a": {"dataset": ids[0]}, "b": {"dataset": ids[1]}}, headers={})
    if CHECK.eq(r.status, 202, "the slow product is accepted"):
        jobs.append((r.json()["id"], big_a, big_b, None, 1.0, 0.0, "float64"))
    for i, (a, b, c) in enumerate(small):
        body = {"op": "matmul", "dtype": "float32", "a": operand(a), "b": operand(b, s_id if i == 0 else None),
                "c": operand(c), "alpha": 0.5, "beta": 2.0}
        r = submit(srv, body, headers={})
        if CHECK.eq(r.status, 202, "small product %d accepted" % i):
            jobs.append((r.json()["id"], a, b, c, 0.5, 2.0, "float32"))
    srv.kill9()
    mark = len(srv.log)
    srv.start()
    requeued = [l for l in srv.log[mark:] if "re-queued" in l]
    if L.STORE == "sqlite":  # on PostgreSQL the restart is a new replica: it claims them once their lease runs out
        CHECK.ok(requeued or L.DEVICE != "cpu", "the restart re-queued the products (log: %r)" % requeued)
    for job_id, a, b, c, alpha, beta, dtype in jobs:
        r = srv.req("GET", "/v1/jobs/%s?wait=60" % job_id, timeout=90)
        job = r.json() if r.status == 200 else {}
        while job.get("status") in ("queued", "running"):
            job = srv.req("GET", "/v1/jobs/%s?wait=60" % job_id, timeout=90).json()
        if CHECK.eq(job.get("status"), "succeeded", "job %s after kill -9 (error %r)" % (job_id, job.get("error"))):
            got = product(srv, job_id, dtype)
            if got is not None:
                ok, why = within(got, a, b, c, alpha, beta, dtype)
                CHECK.ok(ok, "job %s's product after the restart: %s" % (job_id, why))
    for i in ids + [s_id]:
        CHECK.eq(srv.req("DELETE", "/v1/datasets/%s" % i).status, 204, "DELETE %s once its jobs ended" % i)


def main():
    srv = L.start_suite()
    bad_requests(srv)
    shapes_and_scalars(srv)
    inline_threshold(srv)
    on_datasets(srv)
    streamed(srv)
    chained(srv)
    algorithms(srv)
    crash_with_queued(srv)
    L.check_stop(srv)


if __name__ == "__main__":
    L.run_suite(main)
