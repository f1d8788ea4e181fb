# test_results.py: results over 4096 outputs become datasets: axis 0 and axis 1 at exactly 4096
# (inline) and 4097 (a dataset) for every op and dtype against numpy; the dataset's record,
# listing, sha256, .npy and raw downloads (read back by numpy) through /result and /v1/datasets;
# argmin/argmax indices as a second dataset; a job chained on a result dataset; deleting one
# (then /result is 404); a result that cannot be written (file size limit) fails the job cleanly;
# kill -9 right after jobs finished: every succeeded job's datasets are there and match. One
# server at a time.
import hashlib
import io
import os
import re
import sys
import tempfile

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

O.with_debian_python("numpy")
import numpy as np  # noqa: E402 (after the interpreter is settled)

INLINE_MAX = 4096  # GR_RESULT_INLINE_MAX (server/job.h)
NP = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}
DS_ID = re.compile(r"^d_[0-9a-f]{16}$")
WAIT = {"Prefer": "wait=60"}


def gen(op, dtype, shape, rng):
    """Values op can reduce along 2 or 3 elements without overflow; small integers tie often."""
    if dtype.startswith("int"):
        hi = 50 if op.startswith("arg") else (1 << 20 if op == "prod" else (1 << 62 if dtype == "int64" and op in ("min", "max") else 1 << 30))
        return rng.integers(-hi, hi, size=shape, endpoint=True).astype(NP[dtype])
    a = rng.standard_normal(size=shape) * 1000
    if op.startswith("arg"):
        a = np.round(a / 200) * 1.5  # few distinct values: ties, first wins
    return a.astype(NP[dtype])


def reference(op, dtype, a, axis):
    """(values, indices or None) as the server keeps them: int64 for integer results, else
    float64, computed in exact / float64 arithmetic."""
    if op == "count_nonzero":
        return np.count_nonzero(a, axis=axis).astype(np.int64), None
    is_int = dtype.startswith("int") and op != "mean"
    w = a.astype(np.int64 if is_int else np.float64)
    if op.startswith("arg"):
        idx = (w.argmin if op == "argmin" else w.argmax)(axis=axis)
        return np.take_along_axis(w, np.expand_dims(idx, axis), axis).squeeze(axis), idx.astype(np.int64)
    f = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "mean": np.mean, "nansum": np.nansum,
         "nanmin": np.nanmin, "nanmax": np.nanmax}[op]
    return f(w, axis=axis), None


def close(op, dtype, got, want, a, axis):
    """got, in the result's dtype (NumPy's), equals want: exactly for integers and min/max/arg,
    else within float64 rounding of the magnitudes summed (the backends may add in any order)
    and a float32 result's own rounding."""
    if got.shape != want.shape or got.dtype != (np.int64 if want.dtype == np.int64 and got.dtype == np.int64 else
                                                np.dtype(L.result_dtype(op, dtype))):
        return False
    single = got.dtype == np.float32
    got = got.astype(want.dtype)
    if want.dtype == np.int64 or op in ("min", "max", "argmin", "argmax", "nanmin", "nanmax"):
        return np.array_equal(got, want, equal_nan=want.dtype != np.int64)
    scale = np.abs(a.astype(np.float64)).sum(axis=axis) if op != "prod" else np.abs(want)
    if op == "mean":
        scale = scale / a.shape[axis]
    return bool(np.all(np.abs(got - want) <= 1e-9 * scale + 1e-300 + (np.abs(want) * 2.0 ** -23 if single else 0)))


def upload(srv, a):
    shape = ",".join(str(d) for d in a.shape)
    return srv.req("POST", "/v1/datasets?dtype=%s&shape=%s" % (a.dtype.name, shape), a.tobytes(),
                   headers={"Content-Type": "application/octet-stream"})


def result_data(srv, job_id, npy, part=None):
    """/result as .npy or raw, read by numpy; (Resp, array or None)."""
    accept = "application/x-npy" if npy else "application/octet-stream"
    r = srv.req("GET", "/v1/jobs/%s/result%s" % (job_id, "?part=" + part if part else ""), headers={"Accept": accept})
    if r.status != 200:
        return r, None
    return r, np.load(io.BytesIO(r.body)) if npy else r.body




def check_kept(srv, what, job, want, idx, op, dtype, a, axis):
    """job's result is kept as datasets holding want (and idx): the result object, /result as
    JSON, .npy and raw, the dataset's record and its own download. Returns its dataset ids."""
    res = job.get("result") or {}
    keys = {"dataset", "shape", "data", "dtype"} | ({"indices_dataset", "indices_data"} if idx is not None else set())
    if not CHECK.eq(set(res), keys, what + ": result members"):
        return []
    n = len(want)
    CHECK.eq(res["shape"], [n], what + ": result shape")
    CHECK.ok(DS_ID.match(res["dataset"] or ""), "%s: dataset id %r" % (what, res["dataset"]))
    CHECK.eq(res["data"], "/v1/datasets/%s/data" % res["dataset"], what + ": data link")
    r = srv.req("GET", "/v1/jobs/%s/result" % job["id"])
    CHECK.ok(r.status == 200 and r.json() == res, "%s: /result as JSON is the job's result: %r" % (what, r))
    rtype = np.dtype(L.result_dtype(op, dtype))
    CHECK.eq(res["dtype"], rtype.name, what + ": the result's dtype")
    parts = [("values", res["dataset"], want, rtype)]
    if idx is not None:
        CHECK.eq(res["indices_data"], "/v1/datasets/%s/data" % res["indices_dataset"], what + ": indices data link")
        parts.append(("indices", res["indices_dataset"], idx, np.dtype(np.int64)))
    for part, ds, ref, kind in parts:
        size = n * kind.itemsize
        w = "%s, %s" % (what, part)
        r, got = result_data(srv, job["id"], True, part if part == "indices" else None)
        if CHECK.eq(r.status, 200, w + ": /result as .npy") and got is not None:
            CHECK.ok(close(op, dtype, got, ref, a, axis), "%s: .npy values (%s %s) differ from numpy's" % (w, got.dtype, got.shape))
        r, raw = result_data(srv, job["id"], False, part if part == "indices" else None)
        CHECK.eq(r.headers.get("content-type"), "application/octet-stream", w + ": raw content type")
        if CHECK.eq(len(raw or b""), size, w + ": raw bytes"):
            got = np.frombuffer(raw, dtype=kind.newbyteorder("<")).astype(kind)
            CHECK.ok(close(op, dtype, got, ref, a, axis), w + ": raw values differ from numpy's")
        rec = srv.get_json("/v1/datasets/" + ds)
        CHECK.eq({k: rec.get(k) for k in ("id", "dtype", "shape", "bytes")},
                 {"id": ds, "dtype": kind.name, "shape": [n], "bytes": size},
                 w + ": the dataset's record")
        CHECK.eq(rec.get("sha256"), hashlib.sha256(raw or b"").hexdigest(), w + ": the record's sha256 (of the values)")
        CHECK.eq(rec.get("job"), job["id"], w + ": the record names its job")
        d = srv.req("GET", "/v1/datasets/%s/data" % ds)
        CHECK.ok(d.status == 200 and d.body[-size:] == raw and np.array_equal(np.load(io.BytesIO(d.body)), got),
                 w + ": GET /v1/datasets/{id}/data is the same .npy")
    return [p[1] for p in parts]


def around_threshold(srv):
    """Axis 1 (rows outputs) and axis 0 (columns outputs) with 4096 and 4097 outputs, every op and
    dtype: at most 4096 stay inline, more become datasets; values against numpy's."""
    rng = np.random.default_rng(4097)
    jobs = []
    for dtype in L.DTYPES:
        for op in L.OPS:
            for axis in (1, 0):
                for n in (INLINE_MAX, INLINE_MAX + 1):
                    shape = (n, 3) if axis == 1 else (2, n)
                    a = gen(op, dtype, shape, rng)
                    q = "?op=%s&axis=%d&device=%s" % (op, axis, L.DEVICE)
                    buf = io.BytesIO()
                    np.save(buf, a)
                    jobs.append(("%s %s axis %d, %d outputs" % (op, dtype, axis, n), op, dtype, axis, a,
                                 dict(method="POST", path="/v1/jobs" + q, body=buf.getvalue(),
                                      headers=dict(WAIT, **{"Content-Type": "application/x-npy"}))))
    rs = srv.batch([j[-1] for j in jobs], parallel=8, timeout=90)
    kept = {}
    for (what, op, dtype, axis, a, _), r in zip(jobs, rs):
        if not CHECK.eq(r.status, 200, what + ": answered within Prefer: wait (%r)" % r.body[:200]):
            continue
        job = r.json()
        L.check_job(what, job, op, dtype, a.shape, axis)
        want, idx = reference(op, dtype, a, axis)
        res = job.get("result") or {}
        if len(want) <= INLINE_MAX:
            keys = {"shape", "values", "indices", "dtype"} if idx is not None else {"shape", "values", "dtype"}
            if CHECK.eq(set(res), keys, what + ": inline result members") and \
                    CHECK.eq(res["shape"], [len(want)], what + ": inline result shape"):
                got = np.array(res["values"], dtype=res["dtype"])
                CHECK.ok(close(op, dtype, got, want, a, axis), what + ": inline values differ from numpy's")
                if idx is not None:
                    CHECK.eq(res["indices"], idx.tolist(), what + ": inline indices")
            _, got = result_data(srv, job["id"], True)
            CHECK.ok(got is not None and close(op, dtype, got, want, a, axis), what + ": inline result as .npy")
        else:
            for ds in check_kept(srv, what, job, want, idx, op, dtype, a, axis):
                kept[ds] = job["id"]
    print("%d jobs around the threshold checked, %d result datasets" % (len(rs), len(kept)), flush=True)
    return kept


def large_on_dataset(srv):
    """A result of 2^20 values (many of the writer's 1 MiB pieces) from a job on an uploaded
    dataset, then jobs chained on the result dataset. Returns (job id, result dataset, values)."""
    rng = np.random.default_rng(20)
    a = gen("sum", "float32", (1 << 20, 4), rng)
    up = upload(srv, a)
    if not CHECK.eq(up.status, 201, "upload of a (2^20, 4) float32 dataset"):
        return None
    src = up.json()["id"]
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": src, "axis": 1, "device": L.DEVICE}, headers=WAIT, timeout=90)
    if not CHECK.eq(r.status, 200, "sum along 2^20 rows (%r)" % r.body[:200]):
        return None
    job = r.json()
    want, _ = reference("sum", "float32", a, 1)
    ids = check_kept(srv, "2^20-row sum", job, want, None, "sum", "float32", a, 1)
    if not ids:
        return None
    ds = ids[0]
    got = np.load(io.BytesIO(srv.req("GET", "/v1/datasets/%s/data" % ds).body))
    # chained: reductions of the result dataset, whole and as a 2-D view
    for body, ref in (({"op": "max", "dataset": ds}, got.max()),
                      ({"op": "sum", "dataset": ds}, got.sum()),
                      ({"op": "argmin", "dataset": ds, "shape": [1024, 1024], "axis": 0}, None)):
        body["device"] = L.DEVICE
        r = srv.req("POST", "/v1/jobs", body, headers=WAIT, timeout=90)
        what = "chained %s on result dataset %s" % (body["op"], ds)
        if not CHECK.eq(r.status, 200, what + " (%r)" % r.body[:200]):
            continue
        c = r.json()
        CHECK.eq((c.get("status"), c.get("dtype"), c.get("dataset")), ("succeeded", "float32", ds), what + ": status, dtype, dataset")
        res = c.get("result") or {}
        if ref is None:
            v = got.reshape(1024, 1024)
            CHECK.ok(np.array_equal(np.array(res.get("values"), dtype=np.float32), v.min(axis=0)), what + ": values")
            CHECK.eq(res.get("indices"), v.argmin(axis=0).tolist(), what + ": indices")
        elif body["op"] == "max":
            CHECK.eq(np.float32(res.get("value")), ref, what + ": value")
        else:  # float32, as NumPy's sum of float32: the float64 sum rounded
            exact = float(np.sum(got, dtype=np.float64))
            CHECK.ok(abs(float(np.float32(res.get("value", 0))) - exact) <= 1e-9 * float(np.abs(got).sum()) + abs(exact) * 2.0 ** -23,
                     "%s: value %r != %r" % (what, res.get("value"), exact))
    return job["id"], ds, got


def deleted(srv, kept):
    """Result datasets are deletable; /result then says the values were deleted (404)."""
    by_job = {}
    for ds, job in kept.items():
        by_job.setdefault(job, []).append(ds)
    job = next((j for j, ds in by_job.items() if len(ds) == 2), None)  # an argmin/argmax result
    if not CHECK.ok(job, "an arg op's result was kept as two datasets"):
        return
    res = srv.get_json("/v1/jobs/%s/result" % job)
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + res["dataset"]).status, 204, "DELETE of a result dataset")
    for accept in (None, "application/x-npy", "application/octet-stream"):
        r = srv.req("GET", "/v1/jobs/%s/result" % job, headers={"Accept": accept} if accept else None)
        if L.check_problem("/result (Accept %s) once its dataset is deleted" % accept, r, 404):
            CHECK.ok("deleted" in r.json()["detail"], "the problem says the dataset was deleted: %r" % r.json()["detail"])
    r, idx = result_data(srv, job, True, "indices")
    CHECK.ok(r.status == 200 and idx is not None and idx.dtype == np.int64, "the indices dataset still answers (%r)" % r)
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + res["indices_dataset"]).status, 204, "DELETE of the indices dataset")
    L.check_problem("/result?part=indices once deleted", result_data(srv, job, True, "indices")[0], 404)
    CHECK.eq(srv.get_json("/v1/jobs/" + job).get("status"), "succeeded", "the job itself stays")
    for ds in by_job[job]:
        kept.pop(ds)
        CHECK.ok(ds not in L.dataset_ids(srv, 1000), "deleted %s is not listed" % ds)
        CHECK.ok(not os.path.exists(os.path.join(srv.data_dir, "datasets", ds + ".bin")), "deleted %s's file is gone" % ds)


def files_match_rows(srv, what):
    """Every dataset file has a row and every row a file; no .tmp left. On PostgreSQL, whose folder
    replicas share, a file without a row stays while a live replica names it under way in the store
    (a replica killed names its files until its lease has run out; the sweep then takes them)."""
    folder = os.path.join(srv.data_dir, "datasets")
    listed = sorted(d + ".bin" for d in L.dataset_ids(srv, 1000))
    named = {r[0] for r in L.store_rows(srv, "SELECT id FROM dataset_intents")} if L.STORE == "postgresql" else set()
    names = sorted(n for n in os.listdir(folder) if n[:-4] not in named)
    CHECK.eq(names, listed, what + ": dataset files are exactly the listed datasets")


def crash_after_finish(srv):
    """kill -9 right after jobs finished (one answered through Prefer: wait, others still
    running or just done): after the restart every succeeded job's datasets exist and hold
    numpy's answer; jobs cut short run again."""
    rng = np.random.default_rng(9)
    a = gen("argmax", "float64", (1 << 17, 5), rng)
    up = upload(srv, a)
    if not CHECK.eq(up.status, 201, "upload before the crash"):
        return
    src = up.json()["id"]
    want, idx = reference("argmax", "float64", a, 1)
    ids = []
    for k in range(6):
        r = srv.req("POST", "/v1/jobs", {"op": "argmax", "dataset": src, "axis": 1, "device": L.DEVICE},
                    headers=WAIT if k == 0 else None, timeout=90)
        CHECK.ok(r.status in (200, 202), "job %d before the crash: %r" % (k, r))
        ids.append(r.json().get("id"))
        if k == 0:
            CHECK.eq(r.json().get("status"), "succeeded", "the first job finished before the crash")
    srv.kill9()
    srv.start()
    for k, job in enumerate(ids):
        r = srv.req("GET", "/v1/jobs/%s?wait=60" % job, timeout=90)
        doc = r.json() if r.status == 200 else {}
        for _ in range(3):
            if doc.get("status") in L.TERMINAL:
                break
            doc = srv.get_json("/v1/jobs/%s?wait=60" % job)
        if CHECK.eq(doc.get("status"), "succeeded", "job %d after kill -9 and restart" % k):
            check_kept(srv, "job %d after kill -9" % k, doc, want, idx, "argmax", "float64", a, 1)
    files_match_rows(srv, "after kill -9")


def write_fails():
    """A result that cannot be written (RLIMIT_FSIZE below its size, SIGXFSZ ignored: writes
    fail with EFBIG as on a full disk) fails its job with a 5xx problem; nothing is left on disk,
    the server keeps going."""
    limit = 3 << 20
    tmp = tempfile.mkdtemp(prefix="gpured-fsize-")
    wrapper = os.path.join(tmp, "gpured-fsize")
    with open(wrapper, "w") as f:
        f.write("#!%s\n"
                "import os, resource, signal, sys\n"
                "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # kept across exec: write() fails instead\n"
                "resource.setrlimit(resource.RLIMIT_FSIZE, (%d, %d))\n"
                "os.execv(os.environ['GPURED_REAL_BIN'], [os.environ['GPURED_REAL_BIN']] + sys.argv[1:])\n"
                % (sys.executable, limit, limit))
    os.chmod(wrapper, 0o755)
    srv = L.Server(name="gpured-fsize", env={"GPURED_REAL_BIN": L.BIN})
    real, L.BIN = L.BIN, wrapper  # Server.start runs L.BIN
    try:
        srv.start()
    finally:
        L.BIN = real
    a = np.arange(1 << 19, dtype="<i4").reshape(1 << 19, 1)  # 2 MiB in; its sums are 4 MiB of int64
    up = upload(srv, a)
    if CHECK.eq(up.status, 201, "an upload under the file size limit"):
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": up.json()["id"], "axis": 1, "device": L.DEVICE},
                    headers=WAIT, timeout=90)
        job = r.json() if r.status == 200 else {}
        CHECK.eq(job.get("status"), "failed", "a job whose result cannot be written fails (%r)" % r)
        err = job.get("error") or {}
        CHECK.ok(isinstance(err.get("status"), int) and 500 <= err["status"] < 600 and "dataset" in err.get("detail", ""),
                 "its error is a 5xx problem about the result's dataset: %r" % err)
        L.check_problem("/result of the failed job", srv.req("GET", "/v1/jobs/%s/result" % job.get("id")), 409)
        files_match_rows(srv, "after a failed result write")
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "data": [[1, 2], [3, 4]], "axis": 1, "dtype": "int32",
                                     "device": L.DEVICE}, headers=WAIT)
    CHECK.ok(r.status == 200 and r.json().get("result") == {"shape": [2], "values": [3, 7], "dtype": "int64"}, "the server still runs jobs: %r" % r)
    L.check_stop(srv)
    os.unlink(wrapper)
    os.rmdir(tmp)


def main():
    srv = L.start_suite()
    kept = around_threshold(srv)
    big = large_on_dataset(srv)
    if big:
        kept[big[1]] = big[0]
    CHECK.ok(set(kept) <= set(L.dataset_ids(srv, 1000)), "every result dataset is listed in /v1/datasets")
    deleted(srv, kept)
    files_match_rows(srv, "before the crash")
    crash_after_finish(srv)
    if big:  # an earlier result dataset survived the crash too
        got = np.load(io.BytesIO(srv.req("GET", "/v1/datasets/%s/data" % big[1]).body))
        CHECK.ok(np.array_equal(got, big[2]), "the 2^20-value result dataset after the restart")
    L.check_stop(srv)
    write_fails()


if __name__ == "__main__":
    L.run_suite(main)
