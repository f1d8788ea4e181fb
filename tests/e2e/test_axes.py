# test_axes.py: arrays of 1 to 8 dimensions reduced over any axes, against numpy: random shapes,
# axis sets (ints, lists, negative) and keepdims for every op (var and std with ddof) and dtype,
# sent as nested JSON and one-shot .npy, each result's dtype NumPy's own;
# .npy datasets and one-shot .npy and raw bodies (?shape=&axis=) of 3-D and 4-D arrays; a 3-D
# result over the inline limit kept as a shaped .npy; "accumulate": "float64"; float32 and bool
# results kept in their dtypes; the refusals (9-D, ragged nesting, axes out of range or named
# twice, an arg op over two axes, ddof, accumulate, a job on bools) as 4xx problems naming the member.
import io
import itertools
import warnings

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

O.with_debian_python("numpy")
import numpy as np  # noqa: E402 (after the interpreter is settled)

NP = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}
WAIT = {"Prefer": "wait=60"}
EXACT = ("min", "max", "argmin", "argmax", "nanmin", "nanmax", "nanargmin", "nanargmax")
OPS = L.OPS + ["var", "std", "nanmean", "nanprod", "nanvar", "nanstd", "nanargmin", "nanargmax", "ptp", "any", "all"]
DDOF = ("var", "std", "nanvar", "nanstd")
REAL = ("mean", "var", "std", "nanmean", "nanvar", "nanstd")


def gen(op, dtype, shape, rng, nan):
    """Values op reduces without overflow; small integers tie often; with nan, some NaN for the
    nan-ops (a .npy carries them, JSON cannot)."""
    if dtype.startswith("int"):
        hi = 6 if op.endswith("prod") else 2 if op in ("any", "all") else 40 if "arg" in op or op == "count_nonzero" \
            else 1 << 24
        return rng.integers(-hi, hi, size=shape, endpoint=True).astype(NP[dtype])
    a = rng.standard_normal(size=shape) * (1.5 if op.endswith("prod") else 1000)
    if "arg" in op or op in ("count_nonzero", "any", "all"):  # zeros among them
        a = np.round(a / 400) * 1.5
    if nan and op.startswith("nan"):
        a[rng.random(size=shape) < 0.2] = np.nan
    if op.startswith("nanarg"):  # a lane of NaNs alone has no answer (refusals() checks it): every lane,
        for k in range(a.ndim):  # along any axis, holds its first element along it, a number
            a[(slice(None),) * k + (0,)] = 2.5
    return a.astype(NP[dtype])


def reference(op, dtype, a, axes, keepdims, ddof=0, acc=False):
    """(values, indices or None, NumPy's dtype of the values): the values computed in int64 or
    float64, for close() to hold the server's to; the dtype NumPy gives them on a itself."""
    is_int = (dtype.startswith("int") and op not in REAL) or op in ("count_nonzero", "any", "all")
    w = a.astype(np.int64 if dtype.startswith("int") else np.float64)
    if "arg" in op:
        ax = None if axes is None else axes[0]
        f = {"argmin": np.argmin, "argmax": np.argmax, "nanargmin": np.nanargmin, "nanargmax": np.nanargmax}[op]
        idx = np.asarray(f(w, axis=ax, keepdims=keepdims), dtype=np.int64)
        val = w.reshape(-1)[idx] if ax is None else np.take_along_axis(w, idx if keepdims else np.expand_dims(idx, ax), ax)
        return np.asarray(val if ax is None or keepdims else val.squeeze(ax)), idx, a.dtype
    f = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "mean": np.mean, "nansum": np.nansum,
         "nanmin": np.nanmin, "nanmax": np.nanmax, "count_nonzero": np.count_nonzero, "var": np.var, "std": np.std,
         "nanmean": np.nanmean, "nanprod": np.nanprod, "nanvar": np.nanvar, "nanstd": np.nanstd, "ptp": np.ptp,
         "any": np.any, "all": np.all}[op]
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # all-NaN lanes, ddof past the count
        warnings.simplefilter("ignore")
        extra = {"ddof": ddof} if op in DDOF else {}
        got = np.asarray(f(w, axis=axes, keepdims=keepdims, **extra))
        own = np.asarray(f(a, axis=axes, keepdims=keepdims, **dict(extra, dtype=np.float64) if acc else extra)).dtype
    return got.astype(np.int64 if is_int else np.float64), None, own


def close(op, got, want, a, axes):
    """Exact for integers and the extremes; else within float64 rounding of the magnitudes added,
    and a float32 result's own rounding."""
    if got.shape != want.shape:
        return False
    single = got.dtype == np.float32
    got = got.astype(want.dtype)
    if want.dtype == np.int64 or op in EXACT:
        return np.array_equal(got, want, equal_nan=want.dtype != np.int64)
    if op.endswith("prod"):
        scale = np.abs(want)
    elif op in DDOF:  # Welford against two passes: relative to the spread and the mean
        w = a.astype(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scale = (np.nanvar(w, axis=axes, keepdims=True) + np.nanmean(w, axis=axes, keepdims=True) ** 2)
        scale = np.nan_to_num(scale.reshape(want.shape))
        scale = np.sqrt(scale) if op.endswith("std") else scale
    else:
        scale = np.abs(np.nan_to_num(a.astype(np.float64))).sum(axis=axes, keepdims=True).reshape(want.shape)
        if op.endswith("mean"):
            scale = scale / (a.size // want.size)
    tol = 1e-9 * scale + 1e-300 + (np.abs(want) * 2.0 ** -23 if single else 0)
    return bool(np.all((np.abs(got - want) <= tol) | (np.isnan(got) & np.isnan(want)) |
                       (np.isinf(want) & (got == want))))


def as_array(v, want, dtype):
    """A result's "values" / "indices" (nested lists, or one number) as an array of dtype, shaped as want."""
    return np.array(v, dtype=dtype).reshape(want.shape)


def check(what, job, case, srv):
    """job (answered) holds NumPy's result for case: shape, values, indices, its .npy download."""
    op, dtype, a, axes, keepdims, ddof, acc = case
    if not CHECK.eq(job.get("status"), "succeeded", "%s: status (%r)" % (what, job.get("error"))):
        return
    want, idx, own = reference(op, dtype, a, axes, keepdims, ddof, acc)
    res = job["result"]
    CHECK.eq(res.get("dtype"), own.name, what + ": the result's dtype, NumPy's")
    if "dataset" in res:  # kept: its values from the download
        got = np.load(io.BytesIO(srv.req("GET", "/v1/jobs/%s/result" % job["id"],
                                         headers={"Accept": "application/x-npy"}).body))
    else:
        got = as_array(res["value"] if "value" in res else res["values"], want, own)
    CHECK.eq(res.get("shape", []), list(want.shape), what + ": result shape")
    CHECK.ok(close(op, got, want, a, axes), "%s: values %r, numpy's %r" % (what, got.ravel()[:6], want.ravel()[:6]))
    if idx is not None and "dataset" not in res:
        CHECK.ok(np.array_equal(as_array(res["index"] if "index" in res else res["indices"], idx, np.int64), idx),
                 what + ": indices as numpy's")
    r = srv.req("GET", "/v1/jobs/%s/result" % job["id"], headers={"Accept": "application/x-npy"})
    npy = np.load(io.BytesIO(r.body)) if r.status == 200 else None
    CHECK.ok(npy is not None and npy.shape == want.shape and npy.dtype == own and close(op, npy, want, a, axes),
             "%s: the .npy download has the values, the shape %r and the dtype %s" % (what, want.shape, own))


def random_cases(rng, n):
    """n random (op, dtype, shape, axis as sent, axes as numpy takes them, keepdims)."""
    for _ in range(n):
        op, dtype = OPS[rng.integers(len(OPS))], L.DTYPES[rng.integers(len(L.DTYPES))]
        ndim = int(rng.integers(1, 9))
        shape = tuple(int(d) for d in rng.integers(1, 4 if ndim > 4 else 6, size=ndim, endpoint=True))
        k = 1 if "arg" in op else int(rng.integers(1, ndim + 1))
        axes = sorted(int(x) for x in rng.choice(ndim, size=k, replace=False))
        sent = [x - ndim if rng.random() < 0.3 else x for x in axes]
        if rng.random() < 0.15:
            sent, axes = None, None
        elif len(sent) == 1 and rng.random() < 0.5:
            sent = sent[0]
        yield op, dtype, shape, sent, None if axes is None else tuple(axes), bool(rng.random() < 0.3)


def npy_of(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def random_jobs(srv):
    """Random N-D jobs: half as nested JSON, half as one-shot .npy bodies (NaN among them)."""
    rng = np.random.default_rng(36)
    cases, reqs = [], []
    for k, (op, dtype, shape, sent, axes, keepdims) in enumerate(random_cases(rng, 700)):
        as_npy = k % 2 == 1
        a = gen(op, dtype, shape, rng, as_npy)
        ddof = int(rng.integers(0, 3)) if op in DDOF else 0
        if as_npy:
            axis = "" if sent is None else ",".join(str(x) for x in np.atleast_1d(sent))
            q = "?op=%s&device=%s&keepdims=%s%s%s" % (op, L.DEVICE, str(keepdims).lower(),
                                                       "&axis=" + axis if axis else "",
                                                       "&ddof=%d" % ddof if ddof else "")
            reqs.append(dict(method="POST", path="/v1/jobs" + q, body=npy_of(a),
                             headers=dict(WAIT, **{"Content-Type": "application/x-npy"})))
        else:
            body = {"op": op, "dtype": dtype, "data": a.tolist(), "axis": sent, "keepdims": keepdims,
                    "device": L.DEVICE}
            reqs.append(dict(method="POST", path="/v1/jobs", headers=WAIT, body=dict(body, ddof=ddof) if ddof else body))
        cases.append(("%s %s %r axis %r keepdims %s ddof %d as %s" % (op, dtype, shape, sent, keepdims, ddof,
                                                                      ".npy" if as_npy else "JSON"),
                      (op, dtype, a, axes, keepdims, ddof, False)))
    for (what, case), r in zip(cases, srv.batch(reqs, parallel=8, timeout=120)):
        if CHECK.eq(r.status, 200, "%s: answered (%r)" % (what, r.body[:300])):
            check(what, r.json(), case, srv)
    print("%d random N-D jobs checked against numpy" % len(cases), flush=True)


def datasets_and_raw(srv):
    """A 4-D .npy dataset, every single axis and pair for sum, max, mean, nansum and argmax
    (single axes); a raw 3-D body with ?shape= and ?axis=; a 3-D result over the inline limit,
    kept as a (4097, 1, 2) dataset."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(size=(3, 4, 5, 6)).astype(np.float32)
    r = srv.req("POST", "/v1/datasets", npy_of(a), headers={"Content-Type": "application/x-npy"})
    if not CHECK.eq(r.status, 201, "a 4-D .npy dataset uploaded (%r)" % r.body[:200]):
        return
    ds = r.json()
    CHECK.eq(ds.get("shape"), [3, 4, 5, 6], "the dataset's record: its 4-D shape")
    back = np.load(io.BytesIO(srv.req("GET", "/v1/datasets/%s/data" % ds["id"]).body))
    CHECK.ok(back.shape == a.shape and np.array_equal(back, a), "the dataset's .npy download: the array as sent")
    axes_sets = [(d,) for d in range(4)] + list(itertools.combinations(range(4), 2))
    cases, reqs = [], []
    for op in ("sum", "max", "mean", "nansum", "argmax", "var", "ptp"):
        for axes in axes_sets:
            if op == "argmax" and len(axes) > 1:
                continue
            reqs.append(dict(method="POST", path="/v1/jobs", headers=WAIT,
                             body={"op": op, "dataset": ds["id"], "axis": list(axes), "device": L.DEVICE}))
            cases.append(("%s over %r of the 4-D dataset" % (op, axes), (op, "float32", a, axes, False, 0, False)))
    x = rng.integers(-1000, 1000, size=(6, 5, 7)).astype(np.int64)
    reqs.append(dict(method="POST", path="/v1/jobs?op=sum&dtype=int64&shape=6,5,7&axis=0,-1&device=" + L.DEVICE,
                     body=x.tobytes(), headers=dict(WAIT, **{"Content-Type": "application/octet-stream"})))
    cases.append(("a raw body, ?shape=6,5,7&axis=0,-1", ("sum", "int64", x, (0, 2), False, 0, False)))
    big = rng.standard_normal(size=(4097, 3, 2)).astype(np.float64)
    reqs.append(dict(method="POST", path="/v1/jobs?op=argmin&axis=1&keepdims=true&device=" + L.DEVICE,
                     body=npy_of(big), headers=dict(WAIT, **{"Content-Type": "application/x-npy"})))
    cases.append(("argmin over axis 1 of (4097, 3, 2), keepdims: kept", ("argmin", "float64", big, (1,), True, 0,
                                                                          False)))
    for (what, case), r in zip(cases, srv.batch(reqs, parallel=8, timeout=120)):
        if CHECK.eq(r.status, 200, "%s: answered (%r)" % (what, r.body[:300])):
            check(what, r.json(), case, srv)
    kept = r.json().get("result", {}) if r.status == 200 else {}
    CHECK.eq(kept.get("shape"), [4097, 1, 2], "the kept result's shape")
    for part, ds_key in (("values", "dataset"), ("indices", "indices_dataset")):
        rec = srv.get_json("/v1/datasets/" + kept.get(ds_key, "d_0"))
        CHECK.eq(rec.get("shape"), [4097, 1, 2], "the kept %s' dataset record: the result's shape" % part)
    idx = np.load(io.BytesIO(srv.req("GET", "/v1/datasets/%s/data" % kept.get("indices_dataset", "d_0")).body))
    CHECK.ok(np.array_equal(idx, big.argmin(axis=1, keepdims=True)), "the kept indices: numpy's, shaped")


def dtypes(srv):
    """"accumulate": "float64" (JSON and ?accumulate=) against NumPy's dtype=np.float64; float32
    results kept as float32 datasets; an any result kept as a bool dataset, which jobs refuse."""
    rng = np.random.default_rng(64)
    a = (rng.standard_normal(size=(5, 6, 7)) * 1000).astype(np.float32)
    cases, reqs = [], []
    for op in ("sum", "prod", "mean", "var", "nanstd", "nansum"):
        for axes in ((1,), (0, 2), None):
            x = a / 1000 if op == "prod" else a
            body = {"op": op, "dtype": "float32", "data": x.tolist(), "axis": None if axes is None else list(axes),
                    "accumulate": "float64", "device": L.DEVICE}
            reqs.append(dict(method="POST", path="/v1/jobs", headers=WAIT, body=body))
            cases.append(("%s over %r, accumulate float64" % (op, axes), (op, "float32", x, axes, False, 0, True)))
    reqs.append(dict(method="POST", path="/v1/jobs?op=mean&axis=0&accumulate=float64&device=" + L.DEVICE,
                     body=npy_of(a), headers=dict(WAIT, **{"Content-Type": "application/x-npy"})))
    cases.append(("?accumulate=float64 on a .npy body", ("mean", "float32", a, (0,), False, 0, True)))
    wide = (rng.standard_normal(size=(3, 4097)) * 1000).astype(np.float32)
    reqs.append(dict(method="POST", path="/v1/jobs?op=max&axis=0&device=" + L.DEVICE, body=npy_of(wide),
                     headers=dict(WAIT, **{"Content-Type": "application/x-npy"})))
    cases.append(("float32 max over axis 0 of (3, 4097): kept as float32", ("max", "float32", wide, (0,), False, 0, False)))
    flags = rng.integers(0, 2, size=(4097, 3)).astype(np.int32)
    reqs.append(dict(method="POST", path="/v1/jobs?op=any&axis=1&device=" + L.DEVICE, body=npy_of(flags),
                     headers=dict(WAIT, **{"Content-Type": "application/x-npy"})))
    cases.append(("any over axis 1 of (4097, 3): kept as bools", ("any", "int32", flags, (1,), False, 0, False)))
    answers = srv.batch(reqs, parallel=8, timeout=120)
    for (what, case), r in zip(cases, answers):
        if CHECK.eq(r.status, 200, "%s: answered (%r)" % (what, r.body[:300])):
            check(what, r.json(), case, srv)
    for r, dtype in zip(answers[-2:], ("float32", "bool")):
        ds = (r.json().get("result") or {}).get("dataset", "d_0") if r.status == 200 else "d_0"
        rec = srv.get_json("/v1/datasets/" + ds)
        CHECK.eq((rec.get("dtype"), rec.get("bytes")), (dtype, 4097 * (4 if dtype == "float32" else 1)),
                 "the kept %s result's dataset record" % dtype)
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds, "device": L.DEVICE})
    L.check_problem("a job on a kept bool result", r, 422, "dataset")
    CHECK.ok("bools" in r.json().get("detail", ""), "the detail says the dataset holds bools: %r" % r.body[:300])


def refusals(srv):
    """Bad N-D input: a 4xx problem naming the member."""
    def job(**kw):
        return dict({"op": "sum", "dtype": "float32", "device": L.DEVICE}, **kw)
    nine = [1.0]
    for _ in range(9):
        nine = [nine]
    cube = np.arange(24.0).reshape(2, 3, 4).tolist()
    cases = [
        ("9-D nesting", job(data=nine), 422, "data", "8-D"),
        ("ragged 3-D", job(data=[[[1, 2], [3, 4]], [[5, 6], [7]]]), 422, "data", "data[1][1]"),
        ("a number among 3-D rows", job(data=[[[1], [2]], [3, [4]]]), 422, "data", "data[1][0]"),
        ("axis 3 of 3-D", job(data=cube, axis=3), 422, "axis", "[2, 3, 4]"),
        ("axis -4 of 3-D", job(data=cube, axis=[0, -4]), 422, "axis", "-3 to 2"),
        ("axis 1 twice", job(data=cube, axis=[1, -2]), 422, "axis", "twice"),
        ("argmax over two axes", job(data=cube, axis=[0, 2], op="argmax"), 422, "axis", "one axis"),
        ("a 9-D shape", job(data=[1.0], shape=[1] * 9), 422, "shape", "1 to 8"),
        ("a shape that disagrees with the nesting", job(data=cube, shape=[2, 12]), 422, "shape", "[2, 3, 4]"),
        ("ddof with sum", job(data=cube, ddof=1), 422, "ddof", "var, std"),
        ("a negative ddof", job(data=cube, op="var", ddof=-1), 422, "ddof", "ddof"),
        ("accumulate with max", job(data=cube, op="max", accumulate="float64"), 422, "accumulate", "not max"),
        ("accumulate float32", job(data=cube, accumulate="float32"), 400, "accumulate", "float64"),
        ("accumulate of an int32 sum", job(data=[1, 2], dtype="int32", accumulate="float64"), 422, "accumulate",
         "int64"),
    ]
    for what, body, status, field, words in cases:
        r = srv.req("POST", "/v1/jobs", body)
        L.check_problem(what, r, status, field)
        CHECK.ok(words in r.json().get("detail", ""), "%s: the detail says %r: %r" % (what, words, r.body[:300]))
    nan_lane = np.array([[1.0, np.nan], [2.0, np.nan]])
    r = srv.req("POST", "/v1/jobs?op=nanargmax&axis=0&device=" + L.DEVICE, npy_of(nan_lane),
                headers=dict(WAIT, **{"Content-Type": "application/x-npy"}))
    CHECK.ok(r.status == 200 and r.json().get("status") == "failed" and r.json()["error"]["status"] == 422 and
             "all-NaN" in r.json()["error"].get("detail", ""),
             "nanargmax over a lane of NaNs alone: the job fails 422, as NumPy raises: %r" % r.body[:300])
    r = srv.req("POST", "/v1/datasets", npy_of(np.zeros((1,) * 9, dtype=np.float32)),
                headers={"Content-Type": "application/x-npy"})
    L.check_problem("a 9-D .npy dataset", r, 422)
    r = srv.req("POST", "/v1/jobs?op=sum&dtype=int32&shape=1,1,1,1,1,1,1,1,1", b"\0" * 4,
                headers={"Content-Type": "application/octet-stream"})
    L.check_problem("?shape= of 9 dimensions", r, 422, "shape")


def main():
    srv = L.start_suite()
    random_jobs(srv)
    datasets_and_raw(srv)
    dtypes(srv)
    refusals(srv)
    L.check_stop(srv)


if __name__ == "__main__":
    L.run_suite(main)
