# test_python_client.py: the Python client (clients/python, package gpured) against the real server.
# Every op on every dtype, small arrays (sent as JSON) and larger ones (the one-shot binary body, or
# an uploaded dataset past --max-body-bytes), axis 0/1, ties, against NumPy; matmul; a 24 MB upload
# with progress, reduced (results kept as datasets too), downloaded, deleted; jobs: submit, wait,
# result, timings, cancel, paging, batches; errors as gpured.Error; 429 retried after Retry-After
# with one Idempotency-Key (one job made), and a POST whose answer is lost retried to a replay;
# tokens; the asyncio twin; events (GET /v1/events): in seq order, filtered, replayed after an id,
# job.watch() race-free and ending, a stream closed from another thread, and one resumed across a
# restart on the same port with the events made while it was away (by another gpured on the same
# store) replayed exactly once; and the package installed into a venv, driven through gpured-cli
# (events --json printing events until Ctrl-C).
import asyncio
import hashlib
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

CLIENT_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python")
sys.path.insert(0, os.path.abspath(CLIENT_SRC))
O.with_debian_python("numpy")
O.with_debian_python("requests")
try:
    import numpy as np
    import requests  # noqa: F401  (the client's one dependency beside NumPy)
    import gpured
except ImportError as e:
    print("FAIL: the Python client needs python3-numpy and python3-requests (Debian packages): %s" % e)
    sys.exit(1)

MAX_BODY = 1 << 20  # the main server's --max-body-bytes: larger one-shot arrays go as datasets
# the large upload: 1 GiB-class, at the size a 2-core CI machine affords in seconds (MiB)
BIG_MIB = int(os.environ.get("GPURED_TEST_BIG_UPLOAD_MIB", "512"))
JSON_T, RAW_T, NPY_T = "application/json", "application/octet-stream", "application/x-npy"
NO_JOB, NO_DATASET = "j_" + "0" * 16, "d_" + "0" * 16


class Seen:
    """Every HTTP response a client got (its on_response hook): what was sent and answered."""

    def __init__(self):
        self.rows = []

    def __call__(self, r):
        q = r.request
        self.rows.append(dict(method=q.method, path=q.path_url.split("?")[0], query=q.path_url,
                              ctype=q.headers.get("Content-Type"), key=q.headers.get("Idempotency-Key"),
                              status=r.status_code, replayed=r.headers.get("Idempotent-Replayed"),
                              location=r.headers.get("Location")))

    def mark(self):
        return len(self.rows)

    def since(self, mark, method=None):
        """The responses since mark (of this method). A DELETE answered 409 is left out: the client
        deletes a dataset it uploaded for a job once it sees the job end, and tries again after a
        409 (on PostgreSQL the job's end can be read just before its hold on the dataset goes)."""
        return [r for r in self.rows[mark:] if (method is None or r["method"] == method)
                and not (r["method"] == "DELETE" and r["status"] == 409)]


def client(base, seen=None, **kw):
    return gpured.Client(base, on_response=seen, **kw)


def raises(what, fn, status, field=None, detail=None, kind=gpured.Error):
    """fn() raises gpured.Error (of class kind) with this status (one of a tuple), field and words
    in its detail."""
    try:
        got = fn()
    except gpured.Error as e:
        CHECK.ok(isinstance(e, kind), "%s: a %s, not a %s (%s)" % (what, kind.__name__, type(e).__name__, e))
        want = status if isinstance(status, tuple) else (status,)
        CHECK.ok(e.status in want, "%s: status %r, expected %s (%s)" % (what, e.status, want, e))
        CHECK.ok(isinstance(e, Exception) and e.detail and e.title and e.type and e.problem.get("status") == e.status,
                 "%s: the problem's members on the error: %r" % (what, e.problem))
        if field:
            CHECK.eq(e.field, field, what + ": field")
        if detail:
            CHECK.ok(detail in e.detail and detail in str(e), "%s: %r not in the detail %r" % (what, detail, e.detail))
        return e
    CHECK.ok(False, "%s: no gpured.Error raised (returned %r)" % (what, got))
    return None


def timed_out(what, fn, seconds):
    """fn() raises gpured.Timeout, also a TimeoutError, within about seconds (not long after)."""
    t0 = time.monotonic()
    try:
        got = fn()
    except gpured.Timeout as e:
        took = time.monotonic() - t0
        CHECK.ok(isinstance(e, TimeoutError) and e.status is None, "%s: a TimeoutError too (%r)" % (what, e))
        CHECK.ok(seconds * 0.9 <= took <= seconds + 1.5, "%s: raised after %.2f s, for %g s" % (what, took, seconds))
        return
    CHECK.ok(False, "%s: no gpured.Timeout raised (returned %r)" % (what, got))


def many(srv, c, seen):
    """gpured.as_completed and gpured.wait: jobs yielded as they end, those ended already first,
    through one event stream (no GET per job while waiting), and Timeout where they cannot end."""
    ended = c.submit("sum", [1, 2], device=L.DEVICE, wait=30)
    blocker = L.blocker(srv, 3)
    CHECK.eq(blocker.status, 202, "a benchmark holding the CPU")
    behind = [c.submit("sum", [i, 1], device="cpu") for i in range(6)]  # end one after another, after it
    mark = seen.mark()
    order = [j.id for j in gpured.as_completed([behind[5], ended] + behind[:5], timeout=60)]
    CHECK.eq(order[0], ended.id, "as_completed: the job ended already first")
    CHECK.eq(sorted(order), sorted([ended.id] + [j.id for j in behind]), "as_completed: every job once")
    CHECK.ok(all(j.done and j.result() == j.doc["result"]["value"] for j in behind), "each yielded job ended, with its result")
    gets = [r for r in seen.since(mark, "GET") if r["path"].startswith("/v1/jobs/")]
    CHECK.ok(len(gets) <= len(behind), "no more than one GET per job, as it ends (%d)" % len(gets))
    CHECK.eq(len([r for r in seen.since(mark, "GET") if r["path"] == "/v1/events"]), 1, "one event stream")
    blocker = L.blocker(srv, 3)
    queued = [c.submit("max", [i, 2], device="cpu") for i in range(3)]
    done, left = gpured.wait(queued + [ended], timeout=0.5)
    CHECK.eq((done, left), ({ended}, set(queued)), "wait(timeout=0.5) behind a blocker: (done, not_done)")
    done, left = gpured.wait(queued, return_when=gpured.FIRST_COMPLETED, timeout=60)
    CHECK.ok(len(done) >= 1 and done | left == set(queued), "wait(FIRST_COMPLETED): %d done" % len(done))
    done, left = gpured.wait(queued, timeout=60)
    CHECK.eq((done, left), (set(queued), set()), "wait(): all of them")
    blocker = L.blocker(srv, 3)
    stuck = c.submit("min", [1], device="cpu")
    try:
        list(gpured.as_completed([stuck], timeout=0.5))
        CHECK.ok(False, "as_completed of a job behind a blocker, timeout 0.5: Timeout")
    except gpured.Timeout as e:
        CHECK.ok(stuck.id in str(e), "as_completed raises Timeout naming the job: %s" % e)
    stuck.wait(60)


def errors_and_deadlines(srv, c):
    """Each error class a caller can catch, and deadlines that hold for a whole call: jobs behind a
    blocker on the CPU cannot end in time."""
    failed = gpured.Job(c, {"id": NO_JOB, "status": "failed", "op": "sum", "dtype": "int32", "error": {
        "type": "https://gpured.dev/problems/store-full", "title": "Insufficient Storage", "status": 507,
        "detail": "no room for the result"}})
    e = raises("the result of a failed job", failed.result, 507, None, "no room for the result", kind=gpured.JobFailed)
    CHECK.ok(e is not None and (e.job_id, e.job_status) == (NO_JOB, "failed"), "JobFailed of a failed job: %r" % e)
    t0 = time.monotonic()
    e = raises("a service that is not there", lambda: gpured.Client("http://127.0.0.1:9").sum([1]), None,
               kind=gpured.Unavailable)
    CHECK.ok(time.monotonic() - t0 < 1.0 and e is not None and isinstance(e, ConnectionError) and
             "connection refused" in str(e) and "\n" not in str(e), "said at once, in one line: %r" % e)
    blocker = L.blocker(srv, 8)
    CHECK.eq(blocker.status, 202, "a benchmark holding the CPU")
    queued = c.submit("sum", [1, 2], device="cpu")
    timed_out("job.result(timeout=1) behind the blocker", lambda: queued.result(timeout=1), 1)
    timed_out("c.sum(timeout=1.5) behind the blocker", lambda: c.sum([1, 2], device="cpu", timeout=1.5), 1.5)
    timed_out("c.matmul(timeout=1) behind the blocker",
              lambda: c.matmul(np.ones((2, 2)), np.ones((2, 2)), device="cpu", timeout=1), 1)
    timed_out("Client(timeout=0.5).sum behind the blocker",
              lambda: client(srv.base, timeout=0.5).sum([1, 2], device="cpu"), 0.5)
    queued.cancel()


# ---------------------------------------------------------------- reductions against NumPy

def gen(op, dtype, shape, rng):
    if op in ("argmin", "argmax"):  # few distinct values: many ties
        a = rng.integers(-2, 3, size=shape)
        return (a + 0.5 if dtype.startswith("float") else a).astype(dtype)
    if op == "prod":
        a = rng.choice([1, 1, 1, -1], size=shape)
        a.flat[rng.choice(a.size, size=min(12, a.size), replace=False)] = 2
        return (a * rng.uniform(0.99, 1.01, size=shape) if dtype.startswith("float") else a).astype(dtype)
    if dtype == "int32":
        a = rng.integers(-1000, 1000, size=shape).astype(dtype)
    elif dtype == "int64":
        a = rng.integers(-2 ** 40, 2 ** 40, size=shape).astype(dtype)
    else:
        a = rng.uniform(-1000, 1000, size=shape).astype(dtype)
    if op in ("nansum", "nanmin", "nanmax", "count_nonzero"):  # zeros, and NaNs (whole lanes too)
        a.flat[rng.choice(a.size, size=a.size // 8, replace=False)] = 0
        if dtype.startswith("float"):
            a.flat[rng.choice(a.size, size=a.size // 8, replace=False)] = np.nan
            if a.ndim == 2:
                a[-1] = np.nan
    return a


def reference(op, a, axis, ties):
    """NumPy's answer in the service's result types (int64, or float64 for floats and means)."""
    wide = a if op == "count_nonzero" else a.astype(np.int64 if a.dtype.kind == "i" and op != "mean" else np.float64)
    x, ax = (wide.ravel(), 0) if axis is None else (wide, axis)
    if op in ("argmin", "argmax"):
        f = getattr(np, op)
        return f(x, axis=ax) if ties == "first" else (x.shape[ax] - 1) - f(np.flip(x, axis=ax), axis=ax)
    return getattr(np, op)(x, axis=ax)


def check_value(what, op, a, axis, ties, got):
    want = reference(op, a, axis, ties)
    int_result = op in ("argmin", "argmax", "count_nonzero") or (a.dtype.kind == "i" and op != "mean")
    with np.errstate(all="ignore"), warnings.catch_warnings():  # all-NaN slices
        warnings.simplefilter("ignore")
        own = np.int64 if op in ("argmin", "argmax") else np.asarray(getattr(np, op)(a, axis=axis)).dtype
    CHECK.eq(np.asarray(got).dtype, np.dtype(own), what + ": dtype, NumPy's")
    single = np.asarray(got).dtype == np.float32  # NumPy's dtype for float32: the float64 answer rounded
    got = np.asarray(got).astype(want.dtype)[()]
    CHECK.eq(np.shape(got), np.shape(want), what + ": shape")
    if axis is None:
        CHECK.ok(isinstance(got, np.generic), "%s: a NumPy scalar, got %r" % (what, type(got)))
    if np.shape(got) != np.shape(want):
        return
    if int_result or op in ("min", "max", "nanmin", "nanmax"):
        CHECK.ok(np.array_equal(got, want, equal_nan=not int_result), "%s: %r, expected %r" % (what, got, want))
        return
    x = np.abs(a.astype(np.float64))
    x, ax = (x.ravel(), 0) if axis is None else (x, axis)
    n, eps = x.shape[ax], np.finfo(a.dtype if a.dtype.kind == "f" else np.float64).eps
    scale = np.abs(want) if op == "prod" else np.nansum(x, axis=ax) / (n if op == "mean" else 1)
    ok = np.abs(np.asarray(got) - want) <= 2 * n * eps * scale + 1e-300 + (np.abs(want) * 2.0 ** -23 if single else 0)
    CHECK.ok(bool(np.all(ok)), "%s: %r, expected %r" % (what, got, want))


def reductions(c, seen, rng):
    """Each op, dtype, size (JSON / one-shot binary; binary for NaNs), axis and ties, against NumPy."""
    for dtype in L.DTYPES:
        for shape, form in (((24,), JSON_T), ((4, 6), JSON_T), ((2000,), RAW_T), ((40, 50), RAW_T)):
            for op in L.OPS:
                a = gen(op, dtype, shape, rng)
                for axis in ((None, 0, 1) if len(shape) == 2 else (None,)):
                    for ties in (("first", "last") if op.startswith("arg") else (None,)):
                        what = "%s %s %s axis %s%s" % (op, dtype, list(shape), axis, " ties " + ties if ties else "")
                        kw = {"ties": ties} if ties else {}
                        mark = seen.mark()
                        check_value(what, op, a, axis, ties, getattr(c, op)(a, axis=axis, device=L.DEVICE, **kw))
                        sent = form if np.isfinite(a).all() else RAW_T  # JSON has no NaN
                        CHECK.eq([r["ctype"] for r in seen.since(mark, "POST")], [sent], what + ": sent as")

    # past --max-body-bytes: uploaded as a dataset for the job, which is deleted after it
    a = gen("sum", "float32", (600, 500), rng)
    before = [d.id for d in c.datasets()]
    mark = seen.mark()
    check_value("sum of 1.2 MB, over --max-body-bytes", "sum", a, 1, None, c.sum(a, axis=1, device=L.DEVICE))
    CHECK.eq([(r["method"], r["path"][:12], r["ctype"], r["status"]) for r in seen.since(mark) if r["method"] != "GET"],
             [("POST", "/v1/datasets", NPY_T, 201), ("POST", "/v1/jobs", JSON_T, 200),
              ("DELETE", "/v1/datasets", None, 204)],
             "an array over --max-body-bytes: uploaded, used, deleted")
    CHECK.eq([d.id for d in c.datasets()], before, "no dataset left behind by the upload for a job")

    # values that are not finite go binary (JSON has no literal for them) and come back as such
    mark = seen.mark()
    got = c.sum(np.array([[1.0, np.inf], [2.0, 3.0]]), axis=1, device=L.DEVICE)
    CHECK.ok(np.array_equal(got, [np.inf, 5.0]), "a sum with an infinity: %r" % (got,))
    CHECK.eq([r["ctype"] for r in seen.since(mark, "POST")], [RAW_T], "non-finite values sent binary")
    CHECK.eq(c.max([3, 9, 2], dtype="int32", device=L.DEVICE), 9, "a list cast to dtype")


def matmuls(c, seen, rng):
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((4, 6))
    mark = seen.mark()
    got = c.matmul(a, b, device=L.DEVICE)
    CHECK.ok(got.dtype == np.float64 and got.shape == (5, 6) and np.allclose(got, a @ b, rtol=1e-12, atol=1e-12),
             "matmul float64 5x4 @ 4x6: %r" % (got,))
    CHECK.eq([r["ctype"] for r in seen.since(mark, "POST")], [JSON_T], "a small matmul: operands inline")

    def f32_close(got, want, k):
        tol = 4 * k * np.finfo(np.float32).eps * want[1]
        return got.dtype == np.float32 and got.shape == want[0].shape and bool(np.all(np.abs(got - want[0]) <= tol))

    def ref(a, b, cc=None, alpha=1.0, beta=0.0):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        want = alpha * a64 @ b64 + (beta * cc.astype(np.float64) if cc is not None else 0)
        return want, abs(alpha) * np.abs(a64) @ np.abs(b64) + (abs(beta) * np.abs(cc) if cc is not None else 0) + 1e-30

    before = set(d.id for d in c.datasets())
    a, b, cc = (rng.standard_normal(s).astype(np.float32) for s in ((70, 60), (60, 50), (70, 50)))
    mark = seen.mark()
    got = c.matmul(a, b, cc, alpha=0.5, beta=2.0, device=L.DEVICE)
    CHECK.ok(f32_close(got, ref(a, b, cc, 0.5, 2.0), 60), "matmul float32 70x60 @ 60x50 with c, alpha, beta")
    ups = [r for r in seen.since(mark) if r["path"].startswith("/v1/datasets")]
    CHECK.eq([(r["method"], r["status"]) for r in ups], [("POST", 201)] * 3 + [("DELETE", 204)] * 3,
             "larger operands uploaded as datasets and deleted after the job")
    CHECK.eq(sorted(r["path"] for r in ups if r["method"] == "DELETE"),
             sorted(r["location"] or "" for r in ups if r["method"] == "POST"),
             "the datasets deleted are those uploaded")

    a, b = rng.standard_normal((90, 64)).astype(np.float32), rng.standard_normal((64, 80)).astype(np.float32)
    ds = c.upload(a)
    job = c.submit("matmul", a=ds, b=b, device=L.DEVICE)
    got = job.result()
    CHECK.ok(f32_close(got, ref(a, b), 64), "matmul float32 of a dataset, 90x80 product (> 4096: downloaded)")
    kept = job.doc["result"].get("dataset")
    CHECK.ok("values" not in job.doc["result"] and kept,
             "the 90x80 product is kept as a dataset only: %r" % job.doc["result"])
    CHECK.ok(kept and np.array_equal(c.dataset(kept).download(), got), "the product's dataset holds the result")
    after = set(d.id for d in c.datasets())
    products = {j.doc["result"]["dataset"] for j in itertools.islice(c.jobs(op="matmul"), 2)}
    CHECK.eq(after - before, {ds.id, kept} | products, "datasets left: the uploaded operand and the two products")
    raises("matmul of 2x3 @ 2x3", lambda: c.matmul(np.ones((2, 3)), np.ones((2, 3)), device=L.DEVICE),
           422, "b", "columns")


# ---------------------------------------------------------------- datasets

def datasets(c, seen, rng):
    a = rng.uniform(-1, 1, size=(6000, 1000)).astype(np.float32)  # 24 MB
    sent = []
    t0 = time.monotonic()
    ds = c.upload(a, progress=lambda done, total: sent.append((done, total)))
    took = time.monotonic() - t0
    total = sent[-1][1] if sent else 0
    CHECK.ok(len(sent) >= 20 and all(t == total for _, t in sent) and sent[-1][0] == total and total > a.nbytes
             and all(x[0] < y[0] for x, y in zip(sent, sent[1:])),
             "upload progress: rising to (total, total), total the .npy's bytes: %r ... %r" % (sent[:2], sent[-2:]))
    CHECK.eq((ds.dtype, ds.shape, ds.nbytes, ds.sha256),
             ("float32", (6000, 1000), a.nbytes, hashlib.sha256(a.tobytes()).hexdigest()),
             "the uploaded dataset's record")
    print("uploaded 24 MB in %.2f s" % took, flush=True)
    CHECK.ok(ds.id in [d.id for d in c.datasets(page=2)], "the dataset in the paged list")
    CHECK.eq(len(list(c.datasets(limit=1))), 1, "c.datasets(limit=1): at most one")
    CHECK.eq(c.dataset(ds.id).doc, ds.doc, "c.dataset(id)")

    check_value("sum of the dataset", "sum", a, None, None, c.sum(ds, device=L.DEVICE))
    check_value("max of the dataset's columns", "max", a, 0, None, c.max(ds, axis=0, device=L.DEVICE))
    mark = seen.mark()
    check_value("argmax of the dataset's 6000 rows (kept as datasets)", "argmax", a, 1, "first",
                c.argmax(ds, axis=1, device=L.DEVICE))
    check_value("mean of the dataset's 6000 rows by id (kept as a dataset)", "mean", a, 1, None,
                c.mean(ds.id, axis=1, device=L.DEVICE))
    CHECK.eq([r["query"].split("/")[-1] for r in seen.since(mark, "GET") if r["path"].endswith("/result")],
             ["result?part=indices", "result?part=values"], "results over 4096 outputs fetched as .npy")

    got = []
    back = ds.download(progress=lambda done, total: got.append((done, total)))
    CHECK.ok(back.dtype == a.dtype and np.array_equal(back, a), "the download equals the upload")
    CHECK.ok(len(got) >= 20 and got[-1][0] == got[-1][1] > a.nbytes,
             "download progress ends at the total: %r" % got[-1:])
    ds.delete()
    raises("the deleted dataset", lambda: c.dataset(ds.id), 404)
    raises("a job on the deleted dataset", lambda: c.sum(ds, device=L.DEVICE), 404)
    CHECK.ok(ds.id not in [d.id for d in c.datasets()], "the deleted dataset is not listed")
    small = c.upload(np.float64(2.5))  # API.md: shape [] for a 0-D .npy
    back = small.download()
    CHECK.eq((small.shape, back.shape, back.dtype, float(back)), ((), (), np.float64, 2.5),
             "a 0-D array uploaded and downloaded as 0-D")
    CHECK.eq(c.upload(np.zeros(3, np.uint16)).dtype, "int32", "an upload of uint16 is stored widened, as int32")


# ---------------------------------------------------------------- jobs

def large_upload(c):
    """BIG_MIB of int32 streamed from the array's own memory, stored whole (its sha256 the
    array's), summed on the server (exactly: int64) against NumPy, downloaded equal, deleted."""
    n = (BIG_MIB << 20) // 4
    a = np.arange(n, dtype=np.int32)
    a %= 1021
    sent = []
    t0 = time.monotonic()
    ds = c.upload(a, progress=lambda done, total: sent.append(done))
    took = time.monotonic() - t0
    CHECK.eq((ds.shape, ds.nbytes, ds.sha256), ((n,), a.nbytes, hashlib.sha256(a.data).hexdigest()),
             "the %d MiB dataset's record" % BIG_MIB)
    CHECK.ok(len(sent) >= 100 and sent[-1] > a.nbytes, "progress of the large upload: %d calls, last %r"
             % (len(sent), sent[-1:]))
    print("uploaded %d MiB in %.2f s (%.2f GB/s, not a benchmark)" % (BIG_MIB, took, a.nbytes / took / 1e9), flush=True)
    got = c.sum(ds, device=L.DEVICE)
    CHECK.ok(isinstance(got, np.int64) and got == a.sum(dtype=np.int64), "sum of the large dataset: %r" % got)
    back = ds.download()
    CHECK.ok(back.shape == a.shape and np.array_equal(back, a), "the large download equals the upload")
    del back
    ds.delete()
    raises("the deleted large dataset", lambda: c.dataset(ds.id), 404)


def jobs(srv, c, seen, rng):
    blocker = L.blocker(srv, 6)  # holds the CPU's worker: a job for the CPU waits behind it (3 s ran 1.8 on CI)
    CHECK.eq(blocker.status, 202, "a benchmark holding the CPU")
    a = gen("prod", "float64", (30,), rng)
    queued = c.submit("sum", a, device="cpu")
    t0 = time.monotonic()
    queued.wait(1)
    CHECK.ok(not queued.done and queued.status == "queued" and time.monotonic() - t0 >= 0.9,
             "job.wait(1) behind the blocker: still queued after a second (%s)" % queued.doc["status"])
    queued.cancel()
    CHECK.eq((queued.status, c.job(queued.id).status), ("canceled", "canceled"), "job.cancel()")
    e = raises("the result of a canceled job", queued.result, 409, kind=gpured.JobFailed)
    CHECK.ok(e is not None and (e.job_id, e.job_status) == (queued.id, "canceled"), "JobFailed names the job: %r" % e)
    CHECK.ok(queued.id in [j.id for j in c.jobs(status="canceled")], "c.jobs(status='canceled') lists it")
    queued.delete()  # it has ended: deleted now
    CHECK.ok(queued.deleted, "job.delete() of a canceled job: deleted")
    raises("the job job.delete() deleted", lambda: c.job(queued.id), 404)

    job = c.submit("prod", a, device="cpu")
    CHECK.eq((job.doc["status"], job.timings), ("queued", None), "a job behind the blocker: queued, no timings yet")
    check_value("job.result() of a queued job", "prod", a, None, None, job.result())
    t = job.timings
    CHECK.ok(isinstance(t, dict) and all(t.get(k, -1) >= 0 for k in ("queue", "h2d", "kernel", "d2h", "total"))
             and t["queue"] > 100, "job.timings once it ran behind the blocker (queue > 100 ms): %r" % t)
    CHECK.ok(job.done and job.status == "succeeded" and job.doc["id"] == job.id, "job.status, job.doc")
    CHECK.eq(c.job(job.id).doc["result"], job.doc["result"], "c.job(id)")
    mark = seen.mark()
    job2 = c.submit("argmax", a, device=L.DEVICE, ties="last", wait=30)
    CHECK.eq(job2.doc["status"], "succeeded", "submit(wait=30): ended in its answer")
    CHECK.eq(len(seen.since(mark)), 1, "submit(wait=...) is one request")
    check_value("job.result() argmax", "argmax", a, None, "last", job2.result())
    CHECK.eq(float(job2.result("values")), float(a.max()), "job.result('values') of an argmax")
    raises("job.result('indices') of a sum", lambda: job.result("indices"), 409)
    # keepdims: NumPy's shape, inline JSON and the one-shot binary body (more than 4096 outputs: kept)
    for rows in (3, 5000):
        x = rng.random((rows, 4))
        for op, axis in (("sum", None), ("max", 0), ("argmin", 1), ("mean", -1), ("min", (0, 1))):
            got = getattr(c, op)(x, axis, keepdims=True, device=L.DEVICE)
            want = getattr(np, op)(x, axis=axis if op != "argmin" else 1, keepdims=True)
            CHECK.ok(isinstance(got, np.ndarray) and got.shape == want.shape and np.allclose(got, want),
                     "%s of %dx4 axis %r keepdims: shape %r, NumPy's %r" % (op, rows, axis, getattr(got, "shape", got),
                                                                           want.shape))
    # N-D arrays: any axes, as NumPy (inline JSON, the one-shot body, an uploaded dataset; kept)
    for shape in ((3, 4, 5), (2, 3, 2, 4, 2), (5000, 2, 3)):
        x = rng.random(shape)
        ds = c.upload(x)
        for op, axis, keep in (("sum", (0, 2), False), ("max", -1, True), ("argmax", 1, False), ("mean", None, True),
                               ("nansum", (1, 2), True), ("var", (0, 2), False), ("std", -1, True),
                               ("nanmean", (0, 1), False), ("nanvar", 1, True), ("nanargmin", 0, False),
                               ("ptp", (0, 2), False)):
            extra = {"ddof": 1} if op in ("var", "std", "nanvar") else {}
            for src, name in ((x, "an array"), (ds, "its dataset")):
                got = getattr(c, op)(src, axis, keepdims=keep, device=L.DEVICE, **extra)
                want = getattr(np, op)(x, axis=axis, keepdims=keep, **extra)
                CHECK.ok(np.shape(got) == np.shape(want) and np.allclose(got, want),
                         "%s of %s %r axis %r keepdims %s: shape %r, NumPy's %r" % (
                             op, name, shape, axis, keep, np.shape(got), np.shape(want)))
        ds.delete()
    z = np.array([[0, 1], [0, 0], [np.nan, 2]])
    for op, axis in (("any", 1), ("all", None), ("all", 0)):
        got, want = getattr(c, op)(z, axis), getattr(np, op)(z, axis=axis)
        CHECK.ok(np.asarray(got).dtype == bool and np.array_equal(got, want),
                 "c.%s(axis=%r): NumPy's bools %r, got %r" % (op, axis, want, got))
    raises("an unknown job", lambda: c.job(NO_JOB), 404, None, NO_JOB, kind=gpured.NotFound)
    raises("a sum of an unknown dataset", lambda: c.sum(NO_DATASET, device=L.DEVICE), 404)
    # the dtypes the service does not take are widened, every value exact; uint64 is refused here
    for dt in ("bool", "int8", "uint8", "int16", "uint16", "uint32", "float16"):
        for n in (5, 1000):  # inline JSON, and the one-shot binary body
            v = (rng.integers(0, 2, n) if dt == "bool" else rng.integers(0, 100, n)).astype(dt)
            for op in ("sum", "max", "argmax"):
                got = getattr(c, op)(v, device=L.DEVICE)
                want = getattr(np, op)(v.astype(np.float64 if dt == "float16" else np.int64))
                CHECK.ok(got == want, "%s of %d %s values, widened: %r, NumPy %r" % (op, n, dt, got, want))
    try:
        c.sum(np.arange(3, dtype=np.uint64), device=L.DEVICE)
        CHECK.ok(False, "a uint64 array is refused")
    except TypeError as e:
        CHECK.ok("uint64" in str(e) and "astype" in str(e), "uint64 refused, saying how to convert: %s" % e)
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    a_ds = rng.random((3, 4))
    ds = c.upload(a_ds)
    for axis in (-1, -2):
        CHECK.ok(np.array_equal(c.sum(m, axis=axis, device=L.DEVICE), m.sum(axis=axis)), "axis=%d as NumPy's" % axis)
        CHECK.ok(np.array_equal(c.argmax(ds, axis=axis, device=L.DEVICE), a_ds.argmax(axis=axis)),
                 "axis=%d of a dataset as NumPy's" % axis)
    raises("a bad axis", lambda: c.sum(np.ones((2, 3)), axis=2, device=L.DEVICE), (400, 422), "axis")
    # no litter: results the service kept as datasets go once downloaded, unless keep=True
    before = {d.id for d in c.datasets()}
    big = rng.random((5000, 2))  # 5000 outputs: over the inline limit
    CHECK.ok(np.array_equal(c.argmax(big, axis=1, device=L.DEVICE), big.argmax(axis=1)), "argmax(axis=1), 5000 rows")
    CHECK.ok(np.allclose(c.mean(big, axis=-1, device=L.DEVICE), big.mean(axis=1)), "mean(axis=-1), 5000 rows")
    CHECK.ok(np.array_equal(c.matmul(np.ones((2, 3)), np.ones((3, 2)), device=L.DEVICE), np.full((2, 2), 3.0)), "matmul")
    CHECK.eq({d.id for d in c.datasets()}, before, "no dataset left by kept results once downloaded")
    c.matmul(np.ones((2, 3)), np.ones((3, 2)), device=L.DEVICE, keep=True)
    CHECK.eq(len({d.id for d in c.datasets()} - before), 1, "matmul(keep=True) leaves its product's dataset")
    raises("an axis past the first", lambda: c.sum(np.ones((2, 3)), axis=-3, device=L.DEVICE), (400, 422), "axis")

    # a batch: one POST with a JSON array, no Idempotency-Key; a large item goes as a dataset
    items = [dict(op=op, data=np.nan_to_num(gen(op, dt, (5, 7), rng)), axis=ax, device=L.DEVICE)  # JSON: no NaN
             for op, dt, ax in zip(L.OPS, itertools.cycle(L.DTYPES), itertools.cycle((None, 0, 1)))]
    items.append(dict(op="min", data=gen("min", "int64", (50, 20), rng), axis=1, device=L.DEVICE))
    mark = seen.mark()
    batch = c.submit_many(items)
    posts = seen.since(mark, "POST")
    CHECK.eq([(r["path"], r["ctype"], r["key"]) for r in posts],
             [("/v1/datasets", NPY_T, posts[0]["key"]), ("/v1/jobs", JSON_T, None)],
             "submit_many: the large item uploaded, then one batch POST without a key")
    CHECK.eq(len(batch), len(items), "submit_many: a job per item")
    for i, (it, j) in enumerate(zip(items, batch)):
        check_value("batch item %d %s" % (i, it["op"]), it["op"], it["data"], it["axis"], "first", j.result())
    CHECK.eq([r["method"] for r in seen.since(mark) if r["path"].startswith("/v1/datasets")], ["POST", "DELETE"],
             "the batch's uploaded item deleted once its job ended")
    raises("a batch with a bad item",
           lambda: c.submit_many([dict(op="sum", data=[1]), dict(op="sum", data=[1], device="tpu")]), (400, 422),
           "[1].device")

    bench = c.benchmark("sum", "float32", 1 << 14, repeats=2, device=L.DEVICE)
    rows = bench.result().get("rows")
    CHECK.ok(bench.doc.get("kind") == "benchmark" and rows and all(r["matched"] for r in rows),
             "c.benchmark: a table of matched rows: %r" % rows)
    devs = c.devices()
    CHECK.ok(devs.get("cpu", {}).get("id") == "cpu" and isinstance(devs.get("gpus"), list), "c.devices(): %r" % devs)
    CHECK.ok(any(al["name"] == "cpu_seq" for al in c.algorithms()), "c.algorithms() names cpu_seq")
    c.job(blocker.json()["id"]).wait(60)


def async_client(srv, rng):
    arrays = [gen("sum", "int64", (300 + i,), rng) for i in range(8)]
    b = rng.standard_normal((20, 30))

    async def concurrent(ac, ds):
        """No thread held per call: 32 waits on jobs held behind a blocker are long polls on the
        loop, and quick calls made meanwhile answer at once."""
        blocker = await asyncio.to_thread(L.blocker, srv, 4)  # holds the CPU's worker
        CHECK.eq(blocker.status, 202, "a benchmark holding the CPU")
        held = [await ac.submit("max", [i, 1], device="cpu") for i in range(32)]
        threads = threading.active_count()
        waits = [asyncio.ensure_future(ac.wait(j, 30)) for j in held]
        streams = [ac.events(job=held[0].id, status="running,succeeded") for _ in range(8)]
        for st in streams:
            await st.__aenter__()

        async def statuses(job):
            return [x async for x in ac.watch(job, timeout=30)]
        watched = asyncio.ensure_future(statuses(held[1]))
        await asyncio.sleep(0.5)  # every wait sent, held by the service
        t0 = time.monotonic()
        quick = await asyncio.gather(ac.job(held[0].id), ac.devices(), ac.dataset(ds.id))
        took = time.monotonic() - t0
        CHECK.ok(not any(w.done() for w in waits) and took < 1.0,
                 "AsyncClient: 3 quick calls behind 32 pending waits answered in %.3f s" % took)
        CHECK.eq(threading.active_count(), threads, "AsyncClient: the waits, 8 event streams and a watch hold no thread")
        CHECK.eq(quick[0].doc["status"], "queued", "the job behind the blocker is queued")
        ended = await asyncio.gather(*waits)
        CHECK.eq([j.doc.get("result") for j in ended], [{"value": max(i, 1), "dtype": "int64"} for i in range(32)],
                 "AsyncClient: the 32 waits end with their jobs")
        for k, st in enumerate(streams):
            told = [await asyncio.wait_for(st.__anext__(), 10) for _ in range(2)]
            CHECK.eq([(e.id, e.status) for e in told], [(held[0].id, "running"), (held[0].id, "succeeded")],
                     "AsyncClient: stream %d's events" % k)
            await st.aclose()
        # a keep-alive read while the job has just ended gives its end at once (JobWatch)
        CHECK.ok(await watched in (["queued", "running", "succeeded"], ["queued", "succeeded"]),
                 "AsyncClient.watch: queued, (running,) succeeded: %r" % watched.result())

    async def body():
        async with gpured.AsyncClient(srv.base) as ac:
            sums = await asyncio.gather(*(ac.sum(x, device=L.DEVICE) for x in arrays))
            CHECK.eq([int(s) for s in sums], [int(x.sum()) for x in arrays], "AsyncClient: 8 sums at once")
            ds = await ac.upload(b)
            CHECK.ok(np.array_equal(await ac.download(ds), b), "AsyncClient: upload and download")
            job = await ac.submit("argmin", ds, axis=0, device=L.DEVICE)
            await ac.wait(job, 30)
            CHECK.ok(np.array_equal(await ac.result(job), b.argmin(axis=0)), "AsyncClient: submit, wait, result")
            listed = []
            async for j in ac.jobs(page=2):
                listed.append(j.id)
                if len(listed) == 5:
                    break
            CHECK.eq(listed[0], job.id, "AsyncClient.jobs: newest first")
            got = await ac.nanstd(ds, 1, ddof=1, device="auto")
            CHECK.ok(np.allclose(got, np.nanstd(b.astype(np.float64), axis=1, ddof=1)), "AsyncClient.nanstd: %r" % got)
            CHECK.eq(len(listed), 5, "AsyncClient.jobs: across pages")
            await concurrent(ac, ds)
            await ac.delete(ds)
            try:
                await ac.dataset(ds.id)
                CHECK.ok(False, "AsyncClient: the deleted dataset is still there")
            except gpured.Error as e:
                CHECK.eq(e.status, 404, "AsyncClient: gpured.Error from a coroutine")
    asyncio.run(body())


# ---------------------------------------------------------------- retries and idempotency

class LossyProxy:
    """A TCP relay to a server. A connection accepted while `drops` > 0 passes its request on
    but never its answer: the client's connection closes once the server has answered."""

    def __init__(self, port):
        self.port_up = port
        self.drops = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.base = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            down, _ = self.sock.accept()
            up = socket.create_connection(("127.0.0.1", self.port_up))
            drop, self.drops = self.drops > 0, max(0, self.drops - 1)
            threading.Thread(target=self._pipe, args=(down, up, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, down, drop), daemon=True).start()

    @staticmethod
    def _pipe(src, dst, drop):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data or drop:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def count(srv, what):
    return len(srv.get_json("/v1/%s?limit=1000" % what)[what])


def posts_429(srv):
    text = srv.req("GET", "/metrics").body.decode()
    name = 'gpured_http_requests_total{route="/v1/jobs",method="POST",code="429"}'
    line = [x for x in text.splitlines() if x.startswith(name)]
    return int(float(line[0].split()[-1])) if line else 0


def retries():
    """A tenant quota of 2 (--queue-capacity 2), taken by a benchmark on the CPU and a job queued
    behind it: POST /v1/jobs answers 429 with Retry-After: 1 until the benchmark ends."""
    srv = L.Server(args=["--queue-capacity", "2"], name="gpured-q2").start()
    seen = Seen()
    # a blocker is sized by timing smaller runs, and CI's other tests can make it end well before
    # its time (3 s once ran 1.8 s): the two refused tries count only if it still ran after them,
    # else they are tried again behind a longer one
    for seconds in (6, 12, 24):
        blocker = L.blocker(srv, seconds)
        filler = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1], "device": "cpu"})
        CHECK.eq((blocker.status, filler.status), (202, 202), "the quota taken")
        jobs0, refused0 = count(srv, "jobs"), posts_429(srv)
        mark = seen.mark()
        t0 = time.monotonic()
        try:
            got, err = client(srv.base, seen, retries=1).sum([1, 2], device=L.DEVICE), None
        except gpured.Error as e:
            got, err = None, e
        took = time.monotonic() - t0
        if srv.get_json("/v1/jobs/" + blocker.json()["id"])["status"] == "running":
            break
        print("the %d s blocker ended within %.1f s of the quota taken: again with a longer one" % (seconds, took))
        srv.get_json("/v1/jobs/%s?wait=60" % filler.json()["id"])
    CHECK.ok(isinstance(err, gpured.LimitExceeded) and err.status == 429,
             "a POST refused 429 twice (retries=1): a LimitExceeded, %r, %r" % (err, got))
    tries = seen.since(mark, "POST")
    CHECK.eq([r["status"] for r in tries], [429, 429], "retries=1: two tries, each answered 429")
    CHECK.ok(took >= 0.95, "the retry waited Retry-After: 1 (took %.2f s)" % took)
    CHECK.ok(tries[0]["key"] and len({r["key"] for r in tries}) == 1, "one Idempotency-Key on every try: %r" % tries)
    CHECK.eq(posts_429(srv) - refused0, 2, "the server counted two refused POSTs")
    CHECK.eq(count(srv, "jobs"), jobs0, "no job made by the refused POSTs")

    mark = seen.mark()
    t0 = time.monotonic()
    got = client(srv.base, seen, retries=40).sum([1, 2, 3], device=L.DEVICE)  # the blocker's end
    tries = seen.since(mark, "POST")
    CHECK.eq(got, 6, "a POST retried until the quota had room: its result")
    CHECK.ok(len(tries) >= 2 and all(r["status"] == 429 for r in tries[:-1]) and tries[-1]["status"] in (200, 202),
             "429s then accepted: %r" % [r["status"] for r in tries])
    CHECK.ok(tries[0]["key"] and len({r["key"] for r in tries}) == 1, "one Idempotency-Key on every retry")
    CHECK.ok(time.monotonic() - t0 >= 0.95, "it waited for room")
    CHECK.eq(count(srv, "jobs"), jobs0 + 1, "the retried POSTs made exactly one job")

    # the answer lost on the way back: the retry with the same key replays the job made
    proxy = LossyProxy(srv.port)
    for what, call, kind in (("a job", lambda c: c.submit("sum", [1, 2, 3], device=L.DEVICE), "jobs"),
                             ("a dataset", lambda c: c.upload(np.arange(5000.0)), "datasets")):
        before = count(srv, kind)
        proxy.drops = 1
        mark = seen.mark()
        made = call(client(proxy.base, seen, retries=3))
        answers = seen.since(mark, "POST")
        CHECK.eq([(r["status"] in (200, 201, 202), r["replayed"]) for r in answers], [(True, "true")],
                 "%s whose first answer was lost: one answer, a replay" % what)
        CHECK.eq(count(srv, kind), before + 1, "%s whose first answer was lost: made once" % what)
        CHECK.ok(made.id in [x["id"] for x in srv.get_json("/v1/%s?limit=1000" % kind)[kind]],
                 "%s: the one made" % what)
    L.check_stop(srv)


def tokens(rng):
    tok_a, tok_b = "alice-" + os.urandom(16).hex(), "bob-" + os.urandom(16).hex()
    folder = tempfile.mkdtemp(prefix="gpured-pyclient-tokens-")
    path = os.path.join(folder, "tokens")
    with open(path, "w") as f:
        f.write("# TENANT TOKEN\nalice %s\nbob %s\n" % (tok_a, tok_b))
    srv = L.Server(args=["--tokens-file", path], name="gpured-tokens").start()
    seen = Seen()
    alice, bob = client(srv.base, seen, token=tok_a), client(srv.base, token=tok_b)
    CHECK.eq(alice.sum([1, 2, 3], device=L.DEVICE), 6, "a client with a token")
    raises("no token", lambda: client(srv.base).sum([1], device=L.DEVICE), 401)
    raises("a wrong token", lambda: client(srv.base, token="x" * 32).job(NO_JOB), 401)
    raises("no token, listing", lambda: list(client(srv.base).jobs()), 401)

    ids = [alice.submit(op, gen(op, "int32", (9,), rng), device=L.DEVICE).id for op in L.OPS]
    mark = seen.mark()
    listed = [j.id for j in alice.jobs(page=2)]
    want = [j["id"] for j in L.http(srv.base, "GET", "/v1/jobs?limit=1000",
                                    headers={"Authorization": "Bearer " + tok_a}).json()["jobs"]]
    CHECK.eq(listed, want, "alice's jobs, paged 2 at a time, as one page of 1000 lists them")
    CHECK.eq(listed[:len(ids)], ids[::-1], "newest first")
    CHECK.ok(len(seen.since(mark, "GET")) >= 4, "8 jobs, 2 per page: 4 pages or more fetched")
    CHECK.eq(list(bob.jobs()), [], "bob sees none of alice's jobs")
    raises("alice's job asked by bob", lambda: bob.job(ids[0]), 404)
    dss = [alice.upload(np.arange(n, dtype=np.int32)) for n in (3, 4, 5)]
    CHECK.eq([d.id for d in alice.datasets(page=2)], [d.id for d in dss[::-1]], "alice's datasets, paged 2 at a time")
    CHECK.eq([j.id for j in alice.jobs(limit=5, page=2)], listed[:5], "alice.jobs(limit=5): at most 5, across pages")
    CHECK.eq(alice.sum(dss[2], device=L.DEVICE), 10, "a job on alice's dataset")
    raises("alice's dataset used by bob", lambda: bob.sum(dss[2], device=L.DEVICE), 404)
    L.check_stop(srv)
    shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- events

class Collect:
    """Iterates an event stream on a thread of its own, keeping what it gives: the stored events
    in events, the running events (told live, never stored) in runs, each with how many stored
    events came before it."""

    def __init__(self, stream):
        self.stream, self.events, self.runs, self.error, self.ended = stream, [], [], None, False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for ev in self.stream:
                if ev.status == "running":
                    self.runs.append((ev, len(self.events)))
                else:
                    self.events.append(ev)
        except Exception as e:  # noqa: BLE001  (reported by the checks)
            self.error = e
        self.ended = True

    def _wait(self, ready, timeout):
        end = time.monotonic() + timeout
        while not ready() and time.monotonic() < end and not self.ended:
            time.sleep(0.02)
        return ready()

    def until(self, n, what, timeout=20):
        """Wait until n events are in; a check that fails if they are not in time."""
        return CHECK.ok(self._wait(lambda: len(self.events) >= n, timeout), "%s: %d events in %ds, expected %d "
                        "(error %r)" % (what, len(self.events), timeout, n, self.error))

    def until_event(self, id, status, timeout=20):
        """Wait until the event of id with status is in; a check that fails if it is not in time."""
        return CHECK.ok(self._wait(lambda: any(e.id == id and e.status == status for e in self.events[:]), timeout),
                        "%s %s: its event in %ds (error %r)" % (id, status, timeout, self.error))

    def jobs(self, start=0):
        return [(e.id, e.status) for e in self.events[start:] if e.kind == "job"]


class StreamsSeen:
    """The /v1/events responses a client got (its on_response hook): status, Last-Event-ID sent."""

    def __init__(self):
        self.rows = []

    def __call__(self, r):
        if r.request.path_url.startswith("/v1/events"):
            self.rows.append((r.status_code, r.request.headers.get("Last-Event-ID")))


def both(ids):
    return [(i, s) for i in ids for s in ("queued", "succeeded")]


def ended(jobs):
    for j in jobs:
        j.wait(30)
    return [j.id for j in jobs]


def rising(evs):
    seqs = [e.seq for e in evs]
    return len(seqs) > 0 and all(a < b for a, b in zip(seqs, seqs[1:]))


class ScriptedSSE:
    """A loopback server answering each connection with the next script's bytes (sent piece by
    piece), keeping each request's head: what the real server does not send (multi-line data,
    CR line ends, a gap, an event cut in half, a body without chunks) for the client to parse."""

    def __init__(self, scripts):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.base = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.heads = []
        threading.Thread(target=self._serve, args=(scripts,), daemon=True).start()

    def _serve(self, scripts):
        for head, pieces in scripts:
            conn, _ = self.sock.accept()
            with conn:
                got = b""
                while b"\r\n\r\n" not in got:
                    got += conn.recv(4096) or b"\r\n\r\n"
                self.heads.append(got.decode())
                conn.sendall(head)
                for piece in pieces:
                    time.sleep(0.05)
                    conn.sendall(piece)
        self.sock.close()


def sse_parsing():
    chunk = lambda b: b"%x\r\n%s\r\n" % (len(b), b)
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    fake = ScriptedSSE([
        (ok + b"Transfer-Encoding: chunked\r\n\r\n", [chunk(x) for x in (
            b"retry: 100\n\n: keep-alive\r\n\r\n",
            b'id: 1\r\nevent: job\r\ndata: {"seq": 1, "kind": "job",\r\ndata:  "id": "j_1", "status": "queued",\r',
            b'\ndata: "tenant": "t", "at": "2026-11-23T18:00:00Z"}\r\nunknown: field\r\n\r\n',
            b'event: gap\rdata: {"after": 0, "oldest": 5}\r\r',
            b'id: 6\nevent: job\ndata: {"seq": 6, "kind": "job", "id": "j_6"')]),  # cut: no end chunk
        (ok + b"Connection: close\r\n\r\n",  # no chunks: the body ends when the connection does
         [b'id: 6\nevent: job\ndata: {"seq": 6, "kind": "job", "id": "j_6", "status": "succeeded", ',
          b'"tenant": "t", "at": "2026-11-23T18:00:01Z"}\n\n']),
        (b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/problem+json\r\nContent-Length: 46\r\n\r\n"
         b'{"title": "Unauthorized", "detail": "revoked"}', []),
    ])
    got, err = [], None
    t0 = time.monotonic()
    stream = gpured.Client(fake.base).events()
    try:
        for ev in stream:
            got.append(ev)
    except gpured.Error as e:
        err = e
    took = time.monotonic() - t0
    CHECK.eq(got, [gpured.Event(1, "job", "j_1", "queued", "t", "2026-11-23T18:00:00Z"),
                   gpured.Event(4, "gap", after=0, oldest=5),
                   gpured.Event(6, "job", "j_6", "succeeded", "t", "2026-11-23T18:00:01Z")],
             "SSE parsed: multi-line data, CRLF and CR line ends split across reads, comments, unknown fields, "
             "a gap; an event cut short dropped, then given whole after the reconnection")
    lids = [[h.split(": ", 1)[1].strip() for h in head.split("\r\n") if h.lower().startswith("last-event-id")]
            for head in fake.heads]
    CHECK.eq(lids, [[], ["4"], ["6"]], "Last-Event-ID sent on reconnecting: the gap's position, then the last event's")
    CHECK.ok(err is not None and err.status == 401 and err.detail.endswith("said: revoked") and "token=" in err.detail,
             "a reconnection refused 401 raises from the iteration, naming token= and the service's words: %r" % err)
    CHECK.ok(0.2 <= took < 1.5 and stream.retry == 0.1, "retry: 100 honoured, twice (%.2f s)" % took)


def events():
    """A gpured of its own on a fixed port (restarted on it below), its store fresh."""
    port, data = L.free_port(), tempfile.mkdtemp(prefix="gpured-pyclient-events-")
    srv = L.Server(data_dir=data, args=["--port", str(port), "--bind", "127.0.0.1", "--data-dir", data],
                   flags=False, name="gpured-events").start()
    streams = StreamsSeen()
    c = client(srv.base, streams)
    every = Collect(c.events())
    CHECK.eq(streams.rows, [(200, None)], "c.events() subscribed before returning, with no Last-Event-ID")
    ids = ended([c.submit("sum", [i, 1], device=L.DEVICE) for i in range(3)])
    every.until(6, "queued and succeeded of 3 jobs")
    CHECK.eq(sorted(every.jobs()), sorted(both(ids)), "each job's queued and succeeded events, nothing else")
    CHECK.ok(rising(every.events), "seq rises: %r" % [e.seq for e in every.events])
    for i in ids:
        CHECK.eq([s for j, s in every.jobs() if j == i], ["queued", "succeeded"], "job %s: queued, then succeeded" % i)
    for e in every.events:
        CHECK.ok(isinstance(e, gpured.Event) and e.kind == "job" and e.tenant == "default" and L.RFC3339.match(e.at)
                 and e.data.get("seq") == e.seq and e.after is None, "an Event's members: %r %r" % (e, e.data))
    CHECK.eq(every.stream.last_id, every.events[-1].seq, "stream.last_id: the last event's seq")

    # filters and replays: streams read at once on threads, each until its timeout
    mid = every.events[1].seq
    t0 = time.monotonic()
    replay, one, done, dsets = (Collect(c.events(timeout=1, **kw)) for kw in (
        dict(kind="job", after=mid), dict(job=ids[1], after=0), dict(status=["succeeded", "failed"], kind="job", after=0),
        dict(kind="dataset")))
    ds = c.upload(np.arange(3, dtype=np.int32))
    ds.delete()
    for x in (replay, one, done, dsets):
        x.thread.join(10)
    CHECK.ok(all(x.ended and x.error is None for x in (replay, one, done, dsets)) and time.monotonic() - t0 < 4,
             "the iterations end at their timeouts (%.1f s)" % (time.monotonic() - t0))
    CHECK.eq([(e.seq, e.id, e.status) for e in replay.events],
             [(e.seq, e.id, e.status) for e in every.events[2:] if e.kind == "job"],
             "after=: exactly the events after that id, replayed")
    CHECK.eq(one.jobs(), both(ids[1:2]), "job=: that job's events only")
    # sorted: on a GPU the jobs run on several lanes, so they may end in another order
    CHECK.eq(sorted(done.jobs()), sorted((i, "succeeded") for i in ids), "status=[succeeded, failed], kind=job")
    CHECK.eq([(e.kind, e.id, e.status) for e in dsets.events],
             [("dataset", ds.id, "created"), ("dataset", ds.id, "deleted")], "kind=dataset: the upload and its delete")
    raises("events(kind='jobs')", lambda: c.events(kind="jobs"), 400, "kind")
    raises("events(status='done')", lambda: c.events(status="done"), 400, "status")

    # job.watch(): subscribed before the job is read, ended after its final status. Benchmarks
    # (about 0.6 s each here, unloaded) hold the CPU's worker, jobs for the CPU queued behind
    # them; those not yet begun are canceled once the checks are done.
    blockers = [c.benchmark("sum", "float32", 1 << 23, repeats=8, device="cpu", wait=False) for _ in range(12)]
    late, timed, canceled = (c.submit("sum", [7, i], device="cpu") for i in range(3))
    watched = []
    waiter = threading.Thread(target=lambda: watched.extend(late.watch(timeout=30)), daemon=True)
    waiter.start()
    t0 = time.monotonic()
    got = list(timed.watch(timeout=0.5))
    took = time.monotonic() - t0
    CHECK.ok(got == ["queued"] and not timed.done and 0.5 <= took < 2.5,
             "watch(timeout=0.5) of a queued job: ['queued'], then ends with the job not done: %r, %.2f s" % (got, took))
    gone = []
    w = canceled.watch()
    follower = threading.Thread(target=lambda: gone.extend(w), daemon=True)
    follower.start()
    time.sleep(0.3)
    c.job(canceled.id).cancel()  # through another handle
    follower.join(10)
    CHECK.eq(gone, ["queued", "canceled"], "watch() of a job canceled meanwhile: queued, canceled, the end")
    CHECK.ok(canceled.done and canceled.doc["status"] == "canceled", "job.doc fetched at the end: %r" % canceled)
    CHECK.eq(c.job(late.id).doc["status"], "queued", "the blockers held the CPU through the checks above")
    for b in blockers:
        try:
            b.cancel()
        except gpured.Error as e:
            CHECK.eq(e.status, 409, "a blocker canceled, or begun already")
    waiter.join(30)
    # running is given when its event comes before a keep-alive that finds the job ended (JobWatch)
    CHECK.ok(watched in (["queued", "running", "succeeded"], ["queued", "succeeded"]),
             "watch() of a job queued behind the blockers: queued, (running,) succeeded, the end: %r" % watched)
    # every's own thread may still be reading: its running event comes before (or with) its end
    every.until_event(late.id, "succeeded")
    told = [(e, k) for e, k in every.runs if e.id == late.id]
    CHECK.ok(len(told) == 1 and (told[0][0].op, told[0][0].device, told[0][0].error) == ("sum", "cpu", None),
             "its running event, with its op and device: %r" % told)
    if told:
        ev, k = told[0]
        mine = [i for i, e in enumerate(every.events) if e.id == late.id]
        CHECK.ok(len(mine) == 2 and mine[0] < k <= mine[1], "between its queued event and its end: %d in %r" % (k, mine))
        CHECK.ok(ev.data.get("seq") is None and every.events[k - 1].seq <= ev.seq < every.events[k].seq,
                 "no seq of its own: Event.seq is the stream's position then (%r)" % ev)
    CHECK.ok(late.done and late.doc.get("result") == {"value": 7, "dtype": "int64"}, "job.doc with its result at the end: %r" % late.doc)
    fast = c.submit("max", [3, 9, 2], device=L.DEVICE, wait=30)
    CHECK.eq(list(fast.watch()), ["succeeded"], "watch() of a job that has ended: its final status only")
    quick = c.submit("min", [3, 9, 2], device=L.DEVICE)
    got = list(quick.watch(timeout=30))
    CHECK.ok(got in (["queued", "running", "succeeded"], ["queued", "succeeded"], ["running", "succeeded"],
                     ["succeeded"]),
             "watch() of a fast job: its status when read, each change, the final one: %r" % got)

    # close() from another thread ends an iteration blocked on a quiet stream (keep-alive: 15 s)
    quiet = Collect(c.events())
    time.sleep(0.2)
    t0 = time.monotonic()
    quiet.stream.close()
    quiet.thread.join(5)
    CHECK.ok(quiet.ended and quiet.error is None and time.monotonic() - t0 < 2,
             "close() from another thread: the blocked iteration ends at once (%.2f s, %r)"
             % (time.monotonic() - t0, quiet.error))

    # a restart: the stream ends, reconnects to the same port, resumes after its last event
    n, last = len(every.events), every.stream.last_id
    CHECK.eq(srv.stop(), 0, "gpured stops with a stream open")
    env = {"GPURED_STORE": srv.env["GPURED_STORE"]} if L.STORE == "postgresql" else None
    other = L.Server(data_dir=data, env=env, name="gpured-events-b").start()  # the same store, another port
    # one after the other: two at once may interleave their events on a GPU
    away = [ended([client(other.base).submit("sum", [i, 2], device=L.DEVICE)])[0] for i in range(2)]
    L.check_stop(other)
    srv.start()
    CHECK.eq(srv.port, port, "gpured restarted on its port")
    every.until(n + 4, "the events made while away, replayed")
    new = ended([c.submit("sum", [5, 5], device=L.DEVICE)])
    every.until(n + 6, "then the new job's")
    time.sleep(0.3)
    CHECK.eq(every.jobs(n), both(away) + both(new), "after the restart: the events made while away, then the new "
             "job's; none lost, none twice")
    CHECK.ok(rising(every.events), "seq rises across the restart: %r" % [e.seq for e in every.events])
    CHECK.eq((every.stream.connects, streams.rows[-1]), (2, (200, str(last))),
             "one reconnection, sending Last-Event-ID: the last event before the stop")
    CHECK.ok(every.error is None and not every.ended, "the stream goes on: %r" % every.error)
    every.stream.close()
    every.thread.join(5)
    CHECK.ok(every.ended, "closed")

    async def body():
        async with gpured.AsyncClient(srv.base) as ac:
            async with ac.events(kind="job", status=["queued", "succeeded"]) as evs:
                job = await ac.submit("sum", [1, 2, 3], device=L.DEVICE)
                got = [await asyncio.wait_for(evs.__anext__(), 10) for _ in range(2)]
                CHECK.eq([(e.id, e.status) for e in got], both([job.id]), "AsyncClient.events: async for")
            job = await ac.submit("sum", [4, 5], device=L.DEVICE, wait=30)
            CHECK.eq([s async for s in ac.watch(job, timeout=10)], ["succeeded"], "AsyncClient.watch")
            evs = ac.events()
            try:
                await asyncio.wait_for(evs.__anext__(), 0.5)
                CHECK.ok(False, "AsyncClient.events: an event on a quiet stream")
            except asyncio.TimeoutError:
                CHECK.ok(evs.closed, "a cancelled __anext__ closes the stream")
    asyncio.run(body())
    L.check_stop(srv)
    shutil.rmtree(data, ignore_errors=True)


# ---------------------------------------------------------------- installed: gpured-cli

def builder():
    """A python3 that can build the package without the network and run it: this one, or
    Debian's. It builds with flit_core (Debian: flit); the venv sees the interpreter's numpy and
    requests (--system-site-packages). None if neither."""
    probe = "import flit_core.buildapi, numpy, requests"
    for py in (sys.executable, "/usr/bin/python3"):
        if os.access(py, os.X_OK) and subprocess.run([py, "-c", probe], capture_output=True).returncode == 0:
            return py
    return None


def see_builders_packages(python, venv_python):
    """A venv made by a venv's python sees the base interpreter's packages, not that venv's
    (where numpy may be): a .pth file adds the builder's own."""
    where = "import site, sysconfig; print('\\n'.join(%s))"
    theirs = subprocess.run([python, "-c", where % "site.getsitepackages()"], capture_output=True, text=True).stdout
    mine = subprocess.run([venv_python, "-c", where % "[sysconfig.get_paths()['purelib']]"],
                          capture_output=True, text=True).stdout.strip()
    with open(os.path.join(mine, "builder-site.pth"), "w") as f:
        f.write(theirs)


def cli(srv, c, rng):
    tmp = tempfile.mkdtemp(prefix="gpured-pyclient-cli-")
    here = os.path.abspath(CLIENT_SRC)  # the installed package is run, not this one
    env = dict(os.environ, GPURED_URL=srv.base, PYTHONPATH=os.pathsep.join(
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != here))
    python = builder()
    CHECK.ok(python is not None, "a python3 that builds the package offline (Debian: flit, python3-numpy, "
             "python3-requests)")
    if python:
        src, venv = os.path.join(tmp, "src"), os.path.join(tmp, "venv")
        shutil.copytree(CLIENT_SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
        tree = lambda: sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
        before = tree()
        p = subprocess.run([python, "-m", "venv", "--system-site-packages", venv],
                           capture_output=True, text=True)
        CHECK.eq(p.returncode, 0, "python3 -m venv --system-site-packages: %s" % p.stderr[-500:])
        see_builders_packages(python, os.path.join(venv, "bin", "python"))
        p = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--no-build-isolation", "--no-deps",
                            "--no-index", src], capture_output=True, text=True, cwd=tmp, env=env)
        CHECK.eq(p.returncode, 0, "pip install of the client: %s" % (p.stdout + p.stderr)[-1500:])
        CHECK.eq(tree(), before, "the install leaves the source tree as it was: no build/ or *.egg-info")
        py = os.path.join(venv, "bin", "python")
        p = subprocess.run([py, "-c", "import gpured, os; print(gpured.__file__); "
                            "print(os.path.exists(os.path.join(os.path.dirname(gpured.__file__), 'py.typed')))"],
                           capture_output=True, text=True, cwd=tmp, env=env)
        CHECK.ok(p.stdout.startswith(venv) and p.stdout.split()[-1:] == ["True"],
                 "gpured imported from the venv, with py.typed: %r" % (p.stdout + p.stderr))
        run_cli, run_m = [os.path.join(venv, "bin", "gpured-cli")], [py, "-m", "gpured"]
    else:  # failed above; the commands still run, from the source tree
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (here, env["PYTHONPATH"])))
        run_cli = run_m = [sys.executable, "-m", "gpured"]

    def run(args, cmd=None, want=0):
        p = subprocess.run((cmd or run_cli) + args, capture_output=True, text=True, cwd=tmp, env=env, timeout=120)
        CHECK.eq(p.returncode, want, "gpured-cli %s: exit code (stderr %r)" % (" ".join(args), p.stderr[-500:]))
        return p

    p = run(["ls", "--json", "--limit", "5"])
    try:
        listed = [j["id"] for j in json.loads(p.stdout)]
    except ValueError:
        listed = p.stdout
    CHECK.eq(listed, [j.id for j in itertools.islice(c.jobs(), 5)], "gpured-cli ls --json: the 5 newest jobs")

    a = rng.standard_normal((300, 200))
    np.save(os.path.join(tmp, "a.npy"), a)
    p = run(["upload", "a.npy"])
    dsid = p.stdout.split()[0] if p.stdout else ""
    CHECK.ok(dsid.startswith("d_") and "upload [" in p.stderr and "100%" in p.stderr,
             "gpured-cli upload: the dataset, a progress bar on stderr: %r / %r" % (p.stdout, p.stderr[-200:]))
    p = run(["--json", "get", dsid])
    CHECK.eq(json.loads(p.stdout or "{}").get("shape"), [300, 200], "gpured-cli --json get d_...")
    p = run(["download", dsid, "back.npy"])
    CHECK.ok(np.array_equal(np.load(os.path.join(tmp, "back.npy")), a) and "100%" in p.stderr,
             "gpured-cli download: the values, with a progress bar: %r" % p.stderr[-200:])
    p = run(["--json", "submit", "sum", "--dataset", dsid, "--wait"], cmd=run_m)
    doc = json.loads(p.stdout or "{}")
    CHECK.ok(doc.get("status") == "succeeded" and abs(doc["result"]["value"] - a.sum()) < 1e-9 * np.abs(a).sum(),
             "python3 -m gpured --json submit sum --dataset --wait: %r" % doc.get("result"))
    p = run(["--url", srv.base, "submit", "max", "--data", "[3, 9, 2]", "--dtype", "int32", "--device", L.DEVICE])
    jid = p.stdout.split()[0] if p.stdout else ""
    p = run(["--json", "wait", jid, "--timeout", "30"])
    CHECK.eq(json.loads(p.stdout or "{}").get("result"), {"value": 9, "dtype": "int32"}, "gpured-cli submit, then wait --json")
    run(["download", jid, "max.npy", "-q"])
    got = np.load(os.path.join(tmp, "max.npy"))
    CHECK.ok(got.shape == () and got.dtype == np.int32 and got == 9, "gpured-cli download of a job's result: %r" % got)
    p = run(["--json", "rm", dsid, jid])
    CHECK.eq(json.loads(p.stdout or "[]"), [{"id": dsid, "deleted": True}, {"id": jid, "deleted": True}],
             "gpured-cli rm of a dataset and a finished job")
    raises("the dataset gpured-cli rm deleted", lambda: c.dataset(dsid), 404)
    raises("the finished job gpured-cli rm deleted", lambda: c.job(jid), 404)
    p = run(["get", NO_JOB], want=1)
    CHECK.ok("404" in p.stderr and NO_JOB in p.stderr, "gpured-cli get of an unknown job: %r" % p.stderr)
    cli_more(c, run, run_cli, env, tmp)
    cli_events(c, run_cli, env, tmp)
    shutil.rmtree(tmp, ignore_errors=True)


def cli_more(c, run, run_cli, env, tmp):
    """gpured-cli result, devices, algorithms, benchmark and cleanup; the errors a shell user meets."""
    p = run(["submit", "argmax", "--data", "[[1, 5], [7, 2]]", "--axis", "1", "--device", L.DEVICE, "--wait"])
    jid = p.stdout.split()[0] if p.stdout else ""
    CHECK.eq(run(["--json", "result", jid]).stdout.strip(), "[1, 0]", "gpured-cli result of an argmax: its indices")
    CHECK.eq(run(["result", jid, "--part", "values"]).stdout.strip(), "[5 7]", "gpured-cli result --part values")
    p = run(["--json", "submit", "sum", "--data", "[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]", "--axis", "0,-1", "--device",
             L.DEVICE, "--wait"])
    CHECK.eq((json.loads(p.stdout or "{}").get("result") or {}).get("values"), [14, 22],
             "gpured-cli submit of 3-D data, --axis 0,-1")
    CHECK.eq(json.loads(run(["--json", "devices"]).stdout or "{}").get("cpu"), c.devices()["cpu"], "gpured-cli devices")
    CHECK.ok("cpu cpu_seq sum" in run(["algorithms"]).stdout, "gpured-cli algorithms: a line per variant")
    p = run(["benchmark", "sum", "float32", "4096", "--device", "cpu", "--repeats", "2", "--algorithms", "cpu_seq"])
    CHECK.ok(p.stdout.startswith("cpu_seq") and "gbps matched" in p.stdout, "gpured-cli benchmark: %r" % p.stdout)
    kept = c.submit("argmax", np.ones((5000, 2)), axis=1, device=L.DEVICE).wait(30)
    p = run(["--json", "cleanup", "--kept"])
    CHECK.ok(json.loads(p.stdout or "{}").get("deleted", 0) >= 1,
             "gpured-cli cleanup --kept deletes the jobs whose results were kept: %r" % p.stdout[:300])
    raises("the job cleanup deleted", lambda: c.job(kept.id), 404)
    old = c.submit("sum", [1, 2], device=L.DEVICE).wait(30)
    CHECK.ok(c.cleanup(older_than=0)["deleted"] >= 1, "Client.cleanup(older_than=0): every finished job")
    raises("a job Client.cleanup deleted", lambda: c.job(old.id), 404)
    p = run(["submit", "sum", "--data", "[1, 2"], want=2)
    CHECK.ok(p.stderr.startswith("gpured-cli: --data is not JSON"), "a bad --data names the flag: %r" % p.stderr)
    t0 = time.monotonic()
    p = run(["--url", "http://127.0.0.1:9", "ls"], want=1)
    CHECK.ok(time.monotonic() - t0 < 5 and p.stderr.count("\n") == 1 and "connection refused" in p.stderr,
             "a dead URL: one line, at once: %r" % p.stderr)
    for _ in range(3):
        c.submit("sum", [1], device=L.DEVICE)
    head = subprocess.Popen(["head", "-c", "10"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    ls = subprocess.run(run_cli + ["ls", "--json", "--limit", "1000"], stdout=head.stdin, stderr=subprocess.PIPE,
                        text=True, cwd=tmp, env=env, timeout=60)
    head.stdin.close()
    head.wait()
    CHECK.ok(ls.returncode == 0 and ls.stderr == "", "gpured-cli ls | head: ends quietly (%d, %r)" % (ls.returncode,
                                                                                                   ls.stderr))


def cli_events(c, run_cli, env, tmp):
    """gpured-cli events: the events after --after replayed, then new ones, a line each, until Ctrl-C."""
    with c.events(kind="job", timeout=10) as s:
        c.submit("sum", [1, 2], device=L.DEVICE, wait=30)  # answered ended: its final event only
        head = next(iter(s), None)
    CHECK.ok(head is not None and head.status == "succeeded", "an event to start after: %r" % head)
    head = head.seq if head else 0
    before = ended([c.submit("sum", [3, 4], device=L.DEVICE)])

    def lines(args, n, then):
        """Run gpured-cli events, read n lines (calling then() after the first two), Ctrl-C it."""
        p = subprocess.Popen(run_cli + ["events"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=tmp, env=env)
        got = queue.Queue()
        threading.Thread(target=lambda: [got.put(x) for x in p.stdout], daemon=True).start()
        out = []
        try:
            while len(out) < n:
                out.append(got.get(timeout=20).rstrip("\n"))
                if len(out) == 2:
                    then()
        except queue.Empty:
            pass
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        CHECK.eq(rc, 0, "gpured-cli events %s: exit 0 at Ctrl-C (stderr %r)" % (" ".join(args), p.stderr.read()[-500:]))
        while not got.empty():
            out.append(got.get().rstrip("\n"))
        return out

    live = []
    # running events are told only if a job is seen running: left out, for lines known in advance
    out = lines(["--json", "--status", "queued,succeeded", "--after", str(head)], 4,
                lambda: live.extend(ended([c.submit("max", [5, 6], device=L.DEVICE)])))
    try:
        docs = [json.loads(x) for x in out]
    except ValueError:
        docs = []
    CHECK.eq([(d.get("kind"), d.get("id"), d.get("status")) for d in docs],
             [("job",) + x for x in both(before) + both(live)],
             "gpured-cli events --json --after: the events after it replayed, then the new ones: %r" % out)
    CHECK.ok(docs and all(sorted(d) == ["at", "device", "id", "kind", "op", "seq", "status", "tenant"] for d in docs)
             and all(a["seq"] < b["seq"] for a, b in zip(docs, docs[1:])), "one Event a line, seq rising: %r" % out)
    out = lines(["--kind", "job", "--status", "succeeded", "--after", str(head)], 2, lambda: None)
    words = [x.split() for x in out]
    CHECK.eq([(w[2:]) for w in words], [["job", i, "succeeded", "default"] for i in before + live],
             "gpured-cli events --status succeeded: SEQ AT KIND ID STATUS TENANT: %r" % out)
    CHECK.ok(all(w[0].isdigit() and L.RFC3339.match(w[1]) for w in words), "lines start with seq and at: %r" % out)


def main():
    t0 = time.monotonic()
    srv = L.start_suite(args=["--max-body-bytes", str(MAX_BODY)])
    seen = Seen()
    c = client(srv.base, seen, max_body_bytes=MAX_BODY)
    rng = np.random.default_rng(20261123)
    for name, part in (("reductions", lambda: reductions(c, seen, rng)), ("matmul", lambda: matmuls(c, seen, rng)),
                       ("datasets", lambda: datasets(c, seen, rng)), ("large upload", lambda: large_upload(c)),
                       ("jobs", lambda: jobs(srv, c, seen, rng)),
                       ("errors and deadlines", lambda: errors_and_deadlines(srv, c)),
                       ("as_completed and wait", lambda: many(srv, c, seen)),
                       ("AsyncClient", lambda: async_client(srv, rng)), ("retries", retries),
                       ("tokens", lambda: tokens(rng)), ("events", events), ("SSE parsing", sse_parsing),
                       ("gpured-cli", lambda: cli(srv, c, rng))):
        t = time.monotonic()
        part()
        print("%s: %.1f s" % (name, time.monotonic() - t), flush=True)
    L.check_stop(srv)
    print("the suite took %.1f s" % (time.monotonic() - t0), flush=True)


L.run_suite(main)
