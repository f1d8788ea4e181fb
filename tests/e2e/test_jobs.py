# test_jobs.py: every op x dtype x axis (1-D, 2-D nested and flat+shape), keepdims, ties, each
# listed algorithm, Prefer: wait and the 202 + GET ?wait= path, all against a plain-Python reference.
import re
import struct
import time

import e2e_lib as L
from e2e_lib import CHECK


def make_case(what, op, dtype, flat, dims=None, nested=False, axis="omit", ties=None, algorithm=None):
    """A POST body and what to check it against. dims None: 1-D; (r, c): 2-D."""
    spec = {"op": op, "dtype": dtype, "device": L.DEVICE}
    if dims is None:
        spec["data"] = flat
        rows, shape = [flat], [len(flat)]
    else:
        rows, shape = L.reshape(flat, *dims), list(dims)
        if nested:
            spec["data"] = rows
        else:
            spec["data"], spec["shape"] = flat, list(dims)
    if axis != "omit":
        spec["axis"] = axis
    if ties:
        spec["ties"] = ties
    if algorithm:
        spec["algorithm"] = algorithm
    job_axis = None if axis == "omit" else axis
    ref_axis = None if dims is None else job_axis
    return dict(what=what, spec=spec, op=op, dtype=dtype, rows=rows, shape=shape, job_axis=job_axis,
                ref_axis=ref_axis, ties=ties or "first", algorithm=algorithm)


def check_case(c, job):
    L.check_job(c["what"], job, c["op"], c["dtype"], c["shape"], c["job_axis"], algorithm=c["algorithm"])
    if not isinstance(job, dict) or job.get("status") != "succeeded":
        return
    if "expect" in c:
        CHECK.eq(job.get("result"), c["expect"], c["what"] + ": result")
    else:
        L.check_result(c["what"], c["op"], c["dtype"], c["rows"], c["ref_axis"], c["ties"], job.get("result"),
                       len(c["shape"]), c["spec"].get("keepdims", False))
    CHECK.eq(job.get("keepdims"), c["spec"].get("keepdims", False), c["what"] + ": the job's keepdims")


PHASES = ["receive", "parse", "submit", "run", "store", "resume", "answer"]


def check_timing(what, r):
    """A submission's Server-Timing: its phases in order, none negative. (A job may end before
    its submission is done: then its run is 0 and counted in submit.)"""
    got = re.findall(r"(\w+);dur=(-?[0-9.]+)", r.headers.get("server-timing") or "")
    CHECK.eq([name for name, _ in got], PHASES, what + ": Server-Timing names the phases: %r" % r.headers.get("server-timing"))
    ms = dict((name, float(d)) for name, d in got)
    CHECK.ok(all(v >= 0 for v in ms.values()), what + ": no phase is negative: %r" % ms)


def run_waiting(srv, cases):
    """POST each case with Prefer: wait=5: 200, Preference-Applied, the finished job."""
    reqs = [dict(method="POST", path="/v1/jobs", body=c["spec"], headers={"Prefer": "wait=5"}) for c in cases]
    for c, r in zip(cases, srv.batch(reqs)):
        if not CHECK.eq(r.status, 200, c["what"] + ": POST with Prefer: wait=5 status (body %r)" % r.body[:300]):
            continue
        CHECK.eq(r.headers.get("preference-applied"), "wait=5", c["what"] + ": Preference-Applied")
        check_timing(c["what"], r)
        check_case(c, r.json())


def algorithm_entries(srv):
    body = srv.get_json("/v1/algorithms")
    algos = body.get("algorithms")
    if not CHECK.ok(isinstance(algos, list) and algos, "/v1/algorithms: no list: %r" % body):
        return []
    for a in algos:
        CHECK.ok(isinstance(a, dict) and all(k in a for k in ("device", "name", "description", "ops", "dtypes", "axes"))
                 and isinstance(a["description"], str) and a["description"],
                 "/v1/algorithms entry lacks members: %r" % a)
    mine = [a for a in algos if isinstance(a, dict) and str(a.get("device", "")).startswith(L.DEVICE)]
    names = {a.get("name") for a in mine}
    if L.DEVICE == "cpu":
        for want in ("cpu_seq", "cpu_omp_reduction", "cpu_omp_chunked", "cpu_omp_strided"):
            CHECK.ok(want in names, "/v1/algorithms lacks CPU variant %s (has %s)" % (want, sorted(names)))
    CHECK.ok(mine, "/v1/algorithms lists nothing for device %s" % L.DEVICE)
    return mine


def covers_axis(entry, axis):
    axes = entry.get("axes") or []
    return axis in axes or str(axis) in axes or (axis is None and ("null" in axes or "all" in axes))


def covers(entry, op, dtype):
    """Whether a /v1/algorithms entry (None: auto) covers op on dtype over the whole array."""
    return entry is None or (op in (entry.get("ops") or []) and dtype in (entry.get("dtypes") or [])
                             and covers_axis(entry, None))


def kept_keepdims(srv):
    """keepdims in a raw body's query, on a result kept as datasets: their shape is the kept one,
    and so is the .npy download's; a ?keepdims= that is not true or false is a 400."""
    rows = [[float((r * 7) % 11), float(r % 5)] for r in range(5000)]
    raw = struct.pack("<%dd" % (2 * len(rows)), *(x for row in rows for x in row))
    query = "/v1/jobs?op=argmax&dtype=float64&shape=5000,2&axis=1&device=%s&keepdims=" % L.DEVICE
    r = srv.req("POST", query + "true", raw, {"Content-Type": "application/octet-stream", "Prefer": "wait=10"})
    if not CHECK.eq(r.status, 200, "keepdims kept: status (%r)" % r.body[:200]):
        return
    job = r.json()
    res = job.get("result") or {}
    CHECK.eq((job.get("keepdims"), res.get("shape")), (True, [5000, 1]), "keepdims kept: the job and its result's shape")
    want = [[0 if row[0] >= row[1] else 1] for row in rows]
    for part, ds in (("indices", res.get("indices_dataset")), ("values", res.get("dataset"))):
        d = srv.get_json("/v1/datasets/%s" % ds) if ds else {}
        CHECK.eq(d.get("shape"), [5000, 1], "keepdims kept: the %s dataset's shape" % part)
        got = srv.req("GET", "/v1/jobs/%s/result?part=%s" % (job.get("id"), part), headers={"Accept": "application/x-npy"})
        CHECK.ok(got.status == 200 and b"'shape': (5000, 1)" in got.body[:128], "keepdims kept: the %s .npy's shape" % part)
        if part == "indices":
            CHECK.ok(list(struct.unpack("<5000q", got.body[-40000:])) == [w[0] for w in want],
                     "keepdims kept: the indices are NumPy's")
    r = srv.req("POST", query + "yes", raw, {"Content-Type": "application/octet-stream"})
    CHECK.ok(r.status == 400 and "keepdims" in r.body.decode(), "?keepdims=yes is a 400 naming it: %r" % r.body[:200])


def main():
    srv = L.start_suite()
    rng = L.rng_for("test_jobs")
    cases = []

    # every op x dtype, 1-D, a few sizes
    for op in L.OPS:
        for dt in L.DTYPES:
            for n in (1, 1000, 4099):
                cases.append(make_case("1-D %s %s n=%d" % (op, dt, n), op, dt, L.gen_data(op, dt, n, rng)))
            flat = L.gen_data(op, dt, 37, rng)
            cases.append(make_case("1-D %s %s axis null" % (op, dt), op, dt, flat, axis=None))
            cases.append(make_case("1-D %s %s axis 0" % (op, dt), op, dt, flat, axis=0))

    # 2-D: both forms, every axis, shapes in rotation
    shapes = [(3, 5), (64, 33), (1, 7), (7, 1), (257, 9), (2, 2)]
    k = 0
    for op in L.OPS:
        for dt in L.DTYPES:
            for axis in (None, 0, 1):
                for nested in (True, False):
                    r, c = shapes[k % len(shapes)]
                    k += 1
                    cases.append(make_case("2-D %s %s %dx%d axis %s %s" % (op, dt, r, c, axis, "nested" if nested else "flat+shape"),
                                           op, dt, L.gen_data(op, dt, r * c, rng), (r, c), nested, axis))

    # "axis" as NumPy takes it: negative from the end, a list of axes; the job says the axis it
    # reduced (null: the whole array; 1-D data's one axis stays 0, as an axis 0 there does)
    for op in L.OPS:
        for dt in ("int32", "float64"):
            for form, canonical in ((-1, 1), (-2, 0), ([0], 0), ([-1], 1), ([0, 1], None), ([1, -2], None)):
                c = make_case("2-D %s %s axis %r" % (op, dt, form), op, dt, L.gen_data(op, dt, 9 * 4, rng), (9, 4),
                              True, form)
                c["job_axis"] = c["ref_axis"] = canonical
                cases.append(c)
            c = make_case("1-D %s %s axis -1" % (op, dt), op, dt, L.gen_data(op, dt, 11, rng), axis=-1)
            c["job_axis"] = 0
            cases.append(c)

    # keepdims: the reduced axes stay as 1 (NumPy's shape), the values nested in it
    for op in L.OPS:
        for dt in ("int32", "float64"):
            for axis, canonical in ((None, None), (0, 0), (1, 1), (-1, 1), ([0, 1], None)):
                c = make_case("keepdims %s %s 2-D axis %r" % (op, dt, axis), op, dt, L.gen_data(op, dt, 5 * 3, rng),
                              (5, 3), True, axis)
                c["job_axis"] = c["ref_axis"] = canonical
                c["spec"]["keepdims"] = True
                cases.append(c)
            c = make_case("keepdims %s %s 1-D" % (op, dt), op, dt, L.gen_data(op, dt, 7, rng))
            c["spec"]["keepdims"] = True
            cases.append(c)

    # ties: first, last and the default, whole array and both axes
    for op in ("argmin", "argmax"):
        for dt in L.DTYPES:
            for ties in ("first", "last", None):
                cases.append(make_case("ties %s %s %s 1-D" % (ties, op, dt), op, dt, L.gen_ties(dt, 101, rng), ties=ties))
                for axis in (None, 0, 1):
                    cases.append(make_case("ties %s %s %s 2-D axis %s" % (ties, op, dt, axis), op, dt,
                                           L.gen_ties(dt, 30 * 11, rng), (30, 11), False, axis, ties))

    # an int32 sum past 2^31 must not wrap; integer literals in float data; a large input
    big = [2**31 - 1] * 1000 + [2**31 - 2] * 24
    cases.append(make_case("int32 sum beyond 2^31", "sum", "int32", big))
    cases.append(make_case("int32 sum below -2^31", "sum", "int32", [-2**31] * 1000))
    cases.append(make_case("float64 integer literals", "sum", "float64", [1, 2, 3, 4.5, -7]))
    cases.append(make_case("float32 integer literals", "max", "float32", [1, 2, 30, 4.5, -7]))
    for op, dt in (("sum", "float32"), ("argmax", "int32"), ("mean", "float64"), ("prod", "int64")):
        cases.append(make_case("large %s %s" % (op, dt), op, dt, L.gen_data(op, dt, 100003, rng)))
    extremes = [-2**63, 2**63 - 1, 0, -1, 1]
    for op in ("min", "max", "argmin", "argmax"):
        cases.append(make_case("int64 extremes %s" % op, op, "int64", extremes * 3))
        cases.append(make_case("int32 extremes %s" % op, op, "int32", [-2**31, 2**31 - 1, 0] * 3))

    # overflow past float64 is a non-finite result, sent as a string; float32 sums run in float64
    # and are rounded to float32, as NumPy's result (inf past its max) unless kept float64
    algos = algorithm_entries(srv)
    for entry in [None] + algos:
        name = entry["name"] if entry else None
        for op, data, want in (("sum", [1e308, 1e308], "Infinity"), ("sum", [-1e308] * 2 + [1.0] * 5000, "-Infinity"),
                               ("prod", [1e200, -1e200, 3.0], "-Infinity"), ("mean", [1e308, 1e308], "Infinity")):
            if covers(entry, op, "float64"):
                c = make_case("non-finite %s %s n=%d algo %s" % (op, want, len(data), name), op, "float64", data,
                              algorithm=name)
                c["expect"] = {"value": want, "dtype": "float64"}
                cases.append(c)
        if covers(entry, "sum", "float32"):
            c = make_case("float32 sum past the float32 max, algo %s" % name, "sum", "float32",
                          [L.f32(3e38), L.f32(3e38), 1.5], algorithm=name)
            c["expect"] = {"value": "Infinity", "dtype": "float32"}
            cases.append(c)
            c = make_case("float32 sum past the float32 max, accumulate float64, algo %s" % name, "sum", "float32",
                          [L.f32(3e38), L.f32(3e38), 1.5], algorithm=name)
            c["spec"]["accumulate"] = "float64"
            c["expect"] = {"value": L.f32(3e38) * 2 + 1.5, "dtype": "float64"}
            cases.append(c)

    # each algorithm the server lists for this device, explicitly, plus auto
    for a in algos:
        for op in L.OPS:
            if op not in (a.get("ops") or []):
                continue
            for dt in L.DTYPES:
                if dt not in (a.get("dtypes") or []):
                    continue
                name = a["name"]
                if covers_axis(a, None):
                    cases.append(make_case("algo %s %s %s 1-D" % (name, op, dt), op, dt,
                                           L.gen_data(op, dt, 5003, rng), algorithm=name))
                for axis in (0, 1):
                    if covers_axis(a, axis):
                        cases.append(make_case("algo %s %s %s 2-D axis %d" % (name, op, dt, axis), op, dt,
                                               L.gen_data(op, dt, 101 * 53, rng), (101, 53), False, axis, algorithm=name))
    for op in L.OPS:
        cases.append(make_case("algo auto %s" % op, op, "float64", L.gen_data(op, "float64", 999, rng), algorithm="auto"))

    t0 = time.time()
    run_waiting(srv, cases)
    print("%d jobs with Prefer: wait in %.1fs" % (len(cases), time.time() - t0), flush=True)

    kept_keepdims(srv)

    # without Prefer: 202 + Location, then GET ?wait=5 until it ends
    async_cases = [make_case("202 %s %s" % (op, dt), op, dt, L.gen_data(op, dt, 2000, rng), (40, 50), True, 1)
                   for op, dt in zip(L.OPS, L.DTYPES * 2)]
    reqs = [dict(method="POST", path="/v1/jobs", body=c["spec"]) for c in async_cases]
    pending = {}
    for c, r in zip(async_cases, srv.batch(reqs)):
        CHECK.eq(r.status, 202, c["what"] + ": POST without Prefer (body %r)" % r.body[:120])
        if r.status not in (200, 202):
            continue
        job = r.json()
        CHECK.ok("preference-applied" not in r.headers, c["what"] + ": Preference-Applied without Prefer")
        check_timing(c["what"], r)
        CHECK.ok(isinstance(job.get("id"), str) and L.JOB_ID.match(job["id"]), c["what"] + ": id %r" % job.get("id"))
        CHECK.ok(job.get("status") in ("queued", "running", "succeeded"), c["what"] + ": status at 202 %r" % job.get("status"))
        loc = r.headers.get("location", "")
        CHECK.ok(loc.endswith("/v1/jobs/%s" % job.get("id")), c["what"] + ": Location %r" % loc)
        pending[job.get("id")] = c
    deadline = time.time() + 60
    while pending and time.time() < deadline:
        ids = list(pending)
        for jid, r in zip(ids, srv.batch([dict(path="/v1/jobs/%s?wait=5" % jid) for jid in ids])):
            if not CHECK.eq(r.status, 200, "GET /v1/jobs/%s?wait=5" % jid):
                pending.pop(jid)
                continue
            job = r.json()
            if job.get("status") in L.TERMINAL:
                check_case(pending.pop(jid), job)
    CHECK.ok(not pending, "jobs never finished: %s" % sorted(pending))

    L.check_stop(srv)


if __name__ == "__main__":
    L.run_suite(main)
