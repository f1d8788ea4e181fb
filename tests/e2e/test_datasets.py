# test_datasets.py: datasets end to end with real NumPy files: raw and .npy uploads of every
# dtype, 0-D to 2-D, read back (record, pages, .npy download read by numpy) equal to the source,
# sha256 equal to hashlib's; a table of hostile uploads, each answered with its status and leaving
# nothing on disk; 413 decided before the body is sent; a client gone half way; jobs on datasets
# (every op, both axes, shape views) and one-shot jobs with raw or .npy bodies against the
# plain-Python reference; results fetched as .npy or raw (read back by numpy) equal to their
# JSON; DELETE (409 while a job waits on the dataset); datasets and a queued dataset job survive
# a crash; large uploads' sha256 stored after their 201, also across a kill -9. One server at a
# time.
import hashlib
import io
import json
import os
import re
import socket
import struct
import time

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

O.with_debian_python("numpy")
import numpy as np  # noqa: E402 (after the interpreter is settled)

LIMIT = 1 << 20  # --max-dataset-bytes for this suite
BODY_LIMIT = 1 << 21  # --max-body-bytes: one-shot jobs' bodies are held in memory
DS_ID = re.compile(r"^d_[0-9a-f]{16}$")
NP = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}


def npy_bytes(a, **kw):
    buf = io.BytesIO()
    np.save(buf, a, **kw)
    return buf.getvalue()


def npy_preamble(header, major=1):
    """A .npy preamble around header text as given (the hostile table's bad headers)."""
    text = header.encode("latin-1")
    if major == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text
    return b"\x93NUMPY" + bytes([major, 0]) + struct.pack("<I", len(text)) + text


def gen(dtype, shape, rng):
    if dtype.startswith("int"):
        info = np.iinfo(NP[dtype])
        return rng.integers(info.min, info.max, size=shape, dtype=NP[dtype], endpoint=True)
    return (rng.standard_normal(size=shape) * 1000).astype(NP[dtype])


def upload(srv, body, ctype, query="", headers=None):
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return srv.req("POST", "/v1/datasets" + query, body, headers=h)


def upload_raw(srv, a):
    shape = ",".join(str(d) for d in a.shape)
    return upload(srv, a.tobytes(), "application/octet-stream", "?dtype=%s&shape=%s" % (a.dtype.name, shape))


def files(srv):
    return sorted(os.listdir(os.path.join(srv.data_dir, "datasets")))


def listed(srv):
    return L.dataset_ids(srv, 3)  # small pages: the walk crosses many cursors


def check_record(what, doc, a):
    CHECK.ok(isinstance(doc.get("id"), str) and DS_ID.match(doc["id"]), "%s: id %r" % (what, doc.get("id")))
    CHECK.eq(doc.get("dtype"), a.dtype.name, what + ": dtype")
    CHECK.eq(doc.get("shape"), list(a.shape), what + ": shape")
    CHECK.eq(doc.get("bytes"), a.nbytes, what + ": bytes")
    CHECK.eq(doc.get("sha256"), hashlib.sha256(a.tobytes()).hexdigest(), what + ": sha256 (hashlib's)")
    CHECK.ok(isinstance(doc.get("created_at"), str) and L.RFC3339.match(doc["created_at"]),
             "%s: created_at %r" % (what, doc.get("created_at")))
    CHECK.eq(sorted(doc), ["bytes", "created_at", "dtype", "id", "last_used_at", "sha256", "shape", "tenant"],
             what + ": members")
    CHECK.eq(doc.get("last_used_at"), None, what + ": a new upload was never used")
    CHECK.eq(doc.get("tenant"), "default", what + ": without tokens, the one tenant")


def check_download(srv, what, ds_id, a):
    r = srv.req("GET", "/v1/datasets/%s/data" % ds_id)
    if not CHECK.eq(r.status, 200, what + ": GET data"):
        return
    CHECK.eq(r.headers.get("content-type"), "application/x-npy", what + ": data content-type")
    CHECK.eq(int(r.headers.get("content-length", -1)), len(r.body), what + ": Content-Length")
    got = np.load(io.BytesIO(r.body), allow_pickle=False)
    CHECK.eq((got.dtype.str, got.shape), (a.dtype.str, a.shape), what + ": numpy reads back dtype and shape")
    CHECK.ok(got.tobytes() == a.tobytes(), what + ": numpy reads back the values bit for bit")
    pre = r.body[:10]
    CHECK.ok(pre[:8] == b"\x93NUMPY\x01\x00" and (10 + struct.unpack("<H", pre[8:10])[0]) % 64 == 0,
             what + ": a version 1.0 preamble, values aligned to 64")


def round_trips(srv):
    """Every dtype, raw and .npy, 1-D and 2-D (and a 0-D .npy): {id: array} of what was stored."""
    rng = np.random.default_rng(4)
    stored = {}
    for dtype in L.DTYPES:
        for shape in ((7,), (3, 5), (1, 1), (1000,)):
            a = gen(dtype, shape, rng)
            for how in ("raw", "npy"):
                what = "%s %s %s" % (how, dtype, shape)
                r = upload_raw(srv, a) if how == "raw" else upload(srv, npy_bytes(a), "application/x-npy")
                if not CHECK.eq(r.status, 201, what + ": upload (%r)" % r.body[:200]):
                    continue
                doc = r.json()
                check_record(what, doc, a)
                CHECK.eq(r.headers.get("location"), "/v1/datasets/" + doc["id"], what + ": Location")
                CHECK.eq(srv.get_json("/v1/datasets/" + doc["id"]), doc, what + ": GET record = the 201 body")
                check_download(srv, what, doc["id"], a)
                path = os.path.join(srv.data_dir, "datasets", doc["id"] + ".bin")
                CHECK.ok(os.path.getsize(path) == a.nbytes, what + ": the file holds the values only")
                stored[doc["id"]] = a
        a = gen(dtype, (), rng)
        r = upload(srv, npy_bytes(a), "application/x-npy")
        if CHECK.eq(r.status, 201, "0-D %s .npy upload" % dtype):
            check_record("0-D %s" % dtype, r.json(), a)
            check_download(srv, "0-D %s" % dtype, r.json()["id"], a)
            stored[r.json()["id"]] = a
    # a .npy that numpy writes with a version 2.0 header (a very long one) reads the same
    a = np.arange(6, dtype="<f8").reshape(2, 3)
    head = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }" + " " * 70000
    r = upload(srv, npy_preamble(head[:65000] + "\n", 2) + a.tobytes(), "application/x-npy")
    if CHECK.eq(r.status, 201, "version 2.0 .npy upload (%r)" % r.body[:200]):
        check_record("version 2.0 .npy", r.json(), a)
        stored[r.json()["id"]] = a
    ids = listed(srv)
    CHECK.eq(ids, sorted(stored, reverse=True), "GET /v1/datasets pages: every dataset once, newest first")
    return stored


def hostile_table(srv):
    good = np.arange(12, dtype="<f4").reshape(3, 4)
    good_npy = npy_bytes(good)
    big = np.zeros(LIMIT // 8 + 1, dtype="<f8")
    octet, xnpy = "application/octet-stream", "application/x-npy"
    head = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }\n"
    cases = [
        # (name, body, content type, query, extra headers, status, field)
        ("bad magic", b"\x93NUMPZ" + good_npy[6:], xnpy, "", None, 400, None),
        ("a zip, not a .npy", b"PK\x03\x04" + b"\0" * 100, xnpy, "", None, 400, None),
        ("truncated header", good_npy[:40], xnpy, "", None, 400, None),
        ("magic only", good_npy[:6], xnpy, "", None, 400, None),
        ("empty .npy body", b"", xnpy, "", None, 400, None),
        ("truncated data", good_npy[:-4], xnpy, "", None, 400, None),
        ("more data than the header gives", good_npy + b"\0" * 8, xnpy, "", None, 400, None),
        ("header not a dict", npy_preamble("['descr', '<f4']\n") + good.tobytes(), xnpy, "", None, 400, None),
        ("header with an unknown key", npy_preamble("{'descr': '<f4', 'fortran_order': False, 'shape': (12,), 'x': 1}\n")
         + good.tobytes(), xnpy, "", None, 400, None),
        ("version 4.0", b"\x93NUMPY\x04\x00" + good_npy[8:], xnpy, "", None, 400, None),
        ("big-endian", npy_bytes(good.astype(">f4")), xnpy, "", None, 415, None),
        ("Fortran order", npy_bytes(np.asfortranarray(good)), xnpy, "", None, 422, None),
        ("object dtype |O", npy_bytes(np.array([1, "a", None], dtype=object), allow_pickle=True), xnpy, "", None, 415, None),
        ("float16", npy_bytes(good.astype("<f2")), xnpy, "", None, 415, None),
        ("uint32", npy_bytes(good.astype("<u4")), xnpy, "", None, 415, None),
        ("structured dtype", npy_bytes(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")])), xnpy, "", None, 415, None),
        ("9-D", npy_bytes(np.zeros((1,) * 9, dtype="<f4")), xnpy, "", None, 422, None),
        ("shape product overflows", npy_preamble(head % "(4294967296, 4294967296)") + b"\0" * 16, xnpy, "", None, 422, None),
        ("no values", npy_bytes(np.zeros((0,), dtype="<f4")), xnpy, "", None, 422, None),
        (".npy with ?dtype=", good_npy, xnpy, "?dtype=float32", None, 400, "dtype"),
        (".npy over the limit (header says)", npy_preamble(head % "(%d,)" % (LIMIT,)) + b"\0" * 64, xnpy, "",
         {"Transfer-Encoding": "chunked"}, 413, None),
        ("raw size mismatch", b"\0" * 10, octet, "?dtype=float32&shape=3", None, 422, None),
        ("raw size mismatch (chunked)", b"\0" * 16, octet, "?dtype=float32&shape=3",
         {"Transfer-Encoding": "chunked"}, 422, None),
        ("raw short (chunked)", b"\0" * 8, octet, "?dtype=float32&shape=3", {"Transfer-Encoding": "chunked"}, 422, None),
        ("raw empty", b"", octet, "?dtype=float32&shape=3", None, 422, None),
        ("missing dtype", good.tobytes(), octet, "?shape=12", None, 400, "dtype"),
        ("unknown dtype", good.tobytes(), octet, "?dtype=float16&shape=12", None, 400, "dtype"),
        ("shape missing", good.tobytes(), octet, "?dtype=float32", None, 400, "shape"),
        ("shape malformed", good.tobytes(), octet, "?dtype=float32&shape=3x4", None, 400, "shape"),
        ("shape negative", good.tobytes(), octet, "?dtype=float32&shape=-12", None, 400, "shape"),
        ("shape zero", good.tobytes(), octet, "?dtype=float32&shape=0", None, 422, "shape"),
        ("shape 9-D", good.tobytes(), octet, "?dtype=float32&shape=1,1,1,1,1,1,1,3,4", None, 422, "shape"),
        ("raw shape overflows", good.tobytes(), octet, "?dtype=float64&shape=4294967296,4294967296", None, 422, "shape"),
        ("raw over the limit (Content-Length)", big.tobytes(), octet, "?dtype=float64&shape=%d" % big.size, None, 413, None),
        ("raw over the limit (chunked)", big.tobytes(), octet, "?dtype=float64&shape=%d" % big.size,
         {"Transfer-Encoding": "chunked"}, 413, None),
        ("text/plain", good.tobytes(), "text/plain", "?dtype=float32&shape=12", None, 415, None),
        ("JSON", b'{"data": [1, 2]}', "application/json", "", None, 415, None),
    ]
    before_ids, before_files = listed(srv), files(srv)
    for name, body, ctype, query, extra, status, field in cases:
        r = upload(srv, body, ctype, query, extra)
        L.check_problem("hostile upload: " + name, r, status, field)
        CHECK.eq(srv.req("GET", "/healthz").status, 200, "GET /healthz after " + name)
    CHECK.eq(files(srv), before_files, "nothing left in datasets/ by the hostile uploads")
    CHECK.eq(listed(srv), before_ids, "no dataset stored by the hostile uploads")


def raw_request(srv, head, body=b"", wait=5.0):
    """Send head (and body) on a socket; the first bytes answered within wait s, or b""."""
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.settimeout(wait)
    try:
        s.sendall(head + body)
        return s.recv(65536)
    except socket.timeout:
        return b""
    finally:
        s.close()


def early_413(srv):
    """Over the limit by Content-Length: answered before a byte of the body is sent."""
    for ctype, query in (("application/octet-stream", "?dtype=float32&shape=%d" % (LIMIT // 4 + 1)),
                         ("application/x-npy", "")):
        head = ("POST /v1/datasets%s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                % (query, ctype, LIMIT + 4)).encode()
        t0 = time.time()
        answer = raw_request(srv, head)
        took = time.time() - t0
        CHECK.ok(answer.startswith(b"HTTP/1.1 413 "), "%s over the limit, no body sent: answered %r" % (ctype, answer[:60]))
        CHECK.ok(took < 2, "%s: the 413 took %.2fs" % (ctype, took))
        print("413 for %s decided from Content-Length in %.1f ms, before any of the %d body bytes" % (ctype, took * 1e3, LIMIT + 4), flush=True)


def gone_half_way(srv):
    """Clients that send half their body and go (several times: the close must be noticed however
    it arrives): each .tmp goes at once, no row, the server serves on."""
    before_ids, before_files = listed(srv), files(srv)
    n = 100000
    head = ("POST /v1/datasets?dtype=float32&shape=%d HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % (n, 4 * n)).encode()
    for attempt in range(8):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(head + b"\1" * (2 * n))
        tmp = []
        for _ in range(100):
            tmp = [f for f in files(srv) if f.endswith(".tmp")]
            if tmp:
                break
            time.sleep(0.02)
        CHECK.ok(tmp, "half an upload is streamed into a .tmp file (saw %r)" % files(srv))
        s.close()
        t0 = time.time()
        while files(srv) != before_files and time.time() - t0 < 5:
            time.sleep(0.01)
        CHECK.eq(files(srv), before_files, "client %d gone half way: its .tmp removed (waited %.2fs), nothing else left"
                 % (attempt, time.time() - t0))
    # the close in the same breath as the last bytes (libmicrohttpd's epoll mode alone misses
    # it: api/http.c gone()), at lengths that end its reads at different places
    for attempt in range(12):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(head + b"\1" * (2 * n + attempt * 977))
        s.close()
    time.sleep(0.5)  # each is read and seen gone at once, or lingers as a .tmp until --conn-timeout (30 s)
    t0 = time.time()
    while files(srv) != before_files and time.time() - t0 < 5:
        time.sleep(0.01)
    CHECK.eq(files(srv), before_files, "clients gone with their last bytes: nothing left at all")
    CHECK.eq(listed(srv), before_ids, "clients gone half way: no dataset stored")
    CHECK.eq(srv.req("GET", "/healthz").status, 200, "GET /healthz after clients gone half way")


def deletes(srv, stored):
    ds_id = sorted(stored)[0]
    r = srv.req("DELETE", "/v1/datasets/" + ds_id)
    CHECK.eq(r.status, 204, "DELETE a dataset")
    L.check_problem("GET a deleted dataset", srv.req("GET", "/v1/datasets/" + ds_id), 404)
    L.check_problem("GET a deleted dataset's data", srv.req("GET", "/v1/datasets/%s/data" % ds_id), 404)
    L.check_problem("DELETE it again", srv.req("DELETE", "/v1/datasets/" + ds_id), 404)
    CHECK.ok(ds_id + ".bin" not in files(srv), "DELETE removes the file")
    del stored[ds_id]
    for path in ("/v1/datasets/d_0123", "/v1/datasets/j_0000000000000001", "/v1/datasets/d_" + "f" * 16,
                 "/v1/datasets/d_" + "f" * 16 + "/data"):
        L.check_problem("GET " + path, srv.req("GET", path), 404)
    L.check_problem("DELETE unknown", srv.req("DELETE", "/v1/datasets/d_" + "0" * 16), 404)
    for q in ("limit=0", "limit=1001", "cursor=j_0000000000000001", "cursor=x"):
        L.check_problem("GET /v1/datasets?" + q, srv.req("GET", "/v1/datasets?" + q), 400)


def dataset_jobs(srv):
    """Every op and dtype on a 2-D dataset: whole, axis 0, axis 1, and views as 1-D and as
    another 2-D shape; results against the plain-Python reference on the numpy source."""
    rng = L.rng_for("dataset_jobs")
    rows, cols = 6, 5
    reqs, expect, stored = [], [], {}
    for dtype in L.DTYPES:
        for op in L.OPS:
            vals = L.gen_ties(dtype, rows * cols, rng) if op.startswith("arg") else L.gen_data(op, dtype, rows * cols, rng)
            a = np.array(vals, dtype=NP[dtype]).reshape(rows, cols)
            up = upload(srv, npy_bytes(a), "application/x-npy") if op in ("sum", "min", "argmax") else upload_raw(srv, a)
            if not CHECK.eq(up.status, 201, "upload for %s %s" % (op, dtype)):
                continue
            ds_id = up.json()["id"]
            stored[ds_id] = a
            ties = "last" if op == "argmax" else "first"
            for view, axis in ((None, None), (None, 0), (None, 1), ([rows * cols], None), ([rows * cols], 0),
                               ([cols, rows], 1), ([2, rows * cols // 2], 0)):
                body = {"op": op, "dataset": ds_id, "device": L.DEVICE, "axis": axis, "ties": ties}
                if view:
                    body["shape"] = view
                if axis == 0 and view is None:
                    body["dtype"] = dtype  # given, and matching: accepted
                shape = view or [rows, cols]
                v = a.reshape(shape) if len(shape) == 2 else a.reshape(1, -1)
                reqs.append(dict(method="POST", path="/v1/jobs", body=body, headers={"Prefer": "wait=30"}))
                expect.append(("%s %s on %s view %s axis %s" % (op, dtype, ds_id, view, axis), op, dtype, shape, axis,
                               v.tolist(), ties, ds_id))
    rs = srv.batch(reqs, parallel=8)
    for (what, op, dtype, shape, axis, rows_, ties, ds_id), r in zip(expect, rs):
        if not CHECK.eq(r.status, 200, what + ": answered within Prefer: wait (%r)" % r.body[:200]):
            continue
        job = r.json()
        L.check_job(what, job, op, dtype, shape, axis)
        CHECK.eq(job.get("dataset"), ds_id, what + ": the job names its dataset")
        L.check_result(what, op, dtype, rows_, None if len(shape) == 1 and axis == 0 else axis, ties, job.get("result"))
    print("%d jobs on datasets checked" % len(rs), flush=True)
    return stored


def one_shot_jobs(srv):
    """POST /v1/jobs?op=.. with the values as the body, raw or .npy: every op and dtype, whole
    and along each axis, against the plain-Python reference."""
    rng = L.rng_for("one_shot_jobs")
    rows, cols = 4, 7
    reqs, expect = [], []
    for dtype in L.DTYPES:
        for op in L.OPS:
            vals = L.gen_ties(dtype, rows * cols, rng) if op.startswith("arg") else L.gen_data(op, dtype, rows * cols, rng)
            a = np.array(vals, dtype=NP[dtype]).reshape(rows, cols)
            for how, axis in (("raw", None), ("raw", 1), ("npy", 0), ("npy", None), ("raw1d", None)):
                q = "?op=%s&device=%s&ties=last" % (op, L.DEVICE)
                if axis is not None:
                    q += "&axis=%d" % axis
                if how == "npy":
                    body, ctype, shape = npy_bytes(a), "application/x-npy", [rows, cols]
                elif how == "raw":
                    body, ctype, shape = a.tobytes(), "application/octet-stream", [rows, cols]
                    q += "&dtype=%s&shape=%d,%d" % (dtype, rows, cols)
                else:
                    body, ctype, shape = a.tobytes(), "application/octet-stream", [rows * cols]
                    q += "&dtype=%s" % dtype
                reqs.append(dict(method="POST", path="/v1/jobs" + q, body=body,
                                 headers={"Content-Type": ctype, "Prefer": "wait=30"}))
                v = a.tolist() if len(shape) == 2 else [a.reshape(-1).tolist()]
                expect.append(("one-shot %s %s %s axis %s" % (how, op, dtype, axis), op, dtype, shape, axis, v))
    rs = srv.batch(reqs, parallel=8)
    for (what, op, dtype, shape, axis, rows_), r in zip(expect, rs):
        if not CHECK.eq(r.status, 200, what + ": answered within Prefer: wait (%r)" % r.body[:200]):
            continue
        job = r.json()
        L.check_job(what, job, op, dtype, shape, axis)
        CHECK.ok("dataset" not in job, what + ": no dataset named")
        L.check_result(what, op, dtype, rows_, axis, "last", job.get("result"))
    print("%d one-shot jobs checked" % len(rs), flush=True)


def one_shot_rejections(srv):
    good = np.arange(12, dtype="<f4").reshape(3, 4)
    octet, xnpy = "application/octet-stream", "application/x-npy"
    cases = [
        ("raw without ?dtype=", good.tobytes(), octet, "?op=sum", 400, "dtype"),
        ("raw with an unknown dtype", good.tobytes(), octet, "?op=sum&dtype=half", 400, "dtype"),
        ("raw not whole values", good.tobytes()[:-1], octet, "?op=sum&dtype=float32", 422, None),
        ("raw empty", b"", octet, "?op=sum&dtype=float32", 422, None),
        ("raw, ?shape= of another size", good.tobytes(), octet, "?op=sum&dtype=float32&shape=5,5", 422, "shape"),
        ("raw, ?shape= malformed", good.tobytes(), octet, "?op=sum&dtype=float32&shape=3x4", 400, "shape"),
        ("raw, ?shape= 9-D", good.tobytes(), octet, "?op=sum&dtype=float32&shape=1,1,1,1,1,1,1,3,4", 422, "shape"),
        ("no ?op=", good.tobytes(), octet, "?dtype=float32", 400, "op"),
        ("unknown op", good.tobytes(), octet, "?op=median&dtype=float32", 400, "op"),
        ("?axis=2", good.tobytes(), octet, "?op=sum&dtype=float32&shape=3,4&axis=2", 422, "axis"),
        ("?axis=x", good.tobytes(), octet, "?op=sum&dtype=float32&shape=3,4&axis=x", 400, "axis"),
        ("?axis=1 on 1-D", good.tobytes(), octet, "?op=sum&dtype=float32&axis=1", 422, "axis"),
        ("?ties=middle", good.tobytes(), octet, "?op=argmax&dtype=float32&ties=middle", 400, "ties"),
        ("unknown argument", good.tobytes(), octet, "?op=sum&dtype=float32&colour=red", 400, "colour"),
        ("argument twice", good.tobytes(), octet, "?op=sum&op=max&dtype=float32", 400, None),
        ("?data= too", good.tobytes(), octet, "?op=sum&dtype=float32&data=1", 400, "data"),
        ("?dataset= too", good.tobytes(), octet, "?op=sum&dtype=float32&dataset=d_0000000000000001", 400, "dataset"),
        ("unknown device", good.tobytes(), octet, "?op=sum&dtype=float32&device=tpu", 400, "device"),
        ("unknown algorithm", good.tobytes(), octet, "?op=sum&dtype=float32&algorithm=nope", 400, "algorithm"),
        ("npy bad magic", b"\x93NUMPZ" + npy_bytes(good)[6:], xnpy, "?op=sum", 400, None),
        ("npy truncated header", npy_bytes(good)[:30], xnpy, "?op=sum", 400, None),
        ("npy truncated data", npy_bytes(good)[:-2], xnpy, "?op=sum", 400, None),
        ("npy big-endian", npy_bytes(good.astype(">f4")), xnpy, "?op=sum", 415, None),
        ("npy object dtype", npy_bytes(np.array([None, 1], dtype=object), allow_pickle=True), xnpy, "?op=sum", 415, None),
        ("npy Fortran order", npy_bytes(np.asfortranarray(good)), xnpy, "?op=sum", 422, None),
        ("npy 9-D", npy_bytes(np.zeros((1,) * 9, dtype="<f4")), xnpy, "?op=sum", 422, None),
        ("npy, ?dtype= not its own", npy_bytes(good), xnpy, "?op=sum&dtype=int32", 422, "dtype"),
        ("npy no values", npy_bytes(np.zeros((0, 3), dtype="<f4")), xnpy, "?op=sum", 422, None),
        ("over --max-body-bytes", b"\0" * (BODY_LIMIT + 8), octet, "?op=sum&dtype=float64", 413, None),
        ("text/plain", good.tobytes(), "text/plain", "?op=sum&dtype=float32", 415, None),
    ]
    for name, body, ctype, query, status, field in cases:
        # a body over the limit is refused unread: sent whole, the unread rest can reset the
        # connection before the answer is read, so it goes as curl sends big bodies, after 100-continue
        over = {"Expect": "100-continue"} if len(body) > BODY_LIMIT else {}
        r = srv.req("POST", "/v1/jobs" + query, body, headers=dict(over, **{"Content-Type": ctype}))
        L.check_problem("one-shot: " + name, r, status, field)
    head = ("POST /v1/jobs?op=sum&dtype=float32 HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            "Content-Length: %d\r\n\r\n" % (BODY_LIMIT + 4)).encode()
    answer = raw_request(srv, head)
    CHECK.ok(answer.startswith(b"HTTP/1.1 413 "), "one-shot over --max-body-bytes, no body sent: answered %r" % answer[:60])


def json_number(v):
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.get(v, v) if isinstance(v, str) else v


def same(a, b):
    return a == b or (a != a and b != b)  # NaN is NaN here


def results_as_data(srv):
    """GET /v1/jobs/{id}/result with Accept: application/x-npy or application/octet-stream:
    values (int64 or float64 by the result's kind), and ?part=indices, as the JSON says."""
    rng = L.rng_for("results_as_data")
    jobs = []
    for dtype in L.DTYPES:
        for op in L.OPS:
            vals = L.gen_ties(dtype, 12, rng) if op.startswith("arg") else L.gen_data(op, dtype, 12, rng)
            a = np.array(vals, dtype=NP[dtype]).reshape(3, 4)
            for axis in (None, 1, 0):
                q = "?op=%s&device=%s" % (op, L.DEVICE) + ("" if axis is None else "&axis=%d" % axis)
                jobs.append((op, dtype, axis, srv.req("POST", "/v1/jobs" + q, npy_bytes(a), headers={
                    "Content-Type": "application/x-npy", "Prefer": "wait=30"})))
    for data, op in (([1e308, 1e308], "sum"), ([1e308, 1e308, 0.0], "prod")):  # Infinity, NaN
        jobs.append((op, "float64", None, srv.req("POST", "/v1/jobs?op=%s&dtype=float64&device=%s" % (op, L.DEVICE),
                                                   np.array(data, dtype="<f8").tobytes(),
                                                   headers={"Content-Type": "application/octet-stream",
                                                            "Prefer": "wait=30"})))
    for (_, _, _, r), want in zip(jobs[-2:], ("Infinity", "NaN")):
        CHECK.eq((r.json().get("result") or {}).get("value") if r.status == 200 else r.status, want,
                 "a non-finite result (%s) to fetch as data" % want)
    checked = 0
    for op, dtype, axis, r in jobs:
        what = "result as data: %s %s axis %s" % (op, dtype, axis)
        if not CHECK.eq(r.status, 200, what + ": the job"):
            continue
        job = r.json()
        res = job["result"]
        parts = ["values"] + (["indices"] if op.startswith("arg") else [])
        for part in parts:
            key = ("value" if part == "values" else "index") if axis is None else part
            want = res[key]
            kind = "<i8" if part == "indices" else np.dtype(L.result_dtype(op, dtype)).str
            CHECK.eq(res.get("dtype"), L.result_dtype(op, dtype), what + ": the result's dtype")
            path = "/v1/jobs/%s/result" % job["id"] + ("?part=indices" if part == "indices" else "")
            for accept in ("application/x-npy", "application/octet-stream"):
                g = srv.req("GET", path, headers={"Accept": accept})
                if not CHECK.eq((g.status, g.headers.get("content-type")), (200, accept), "%s %s as %s" % (what, part, accept)):
                    continue
                if accept == "application/x-npy":
                    got = np.load(io.BytesIO(g.body), allow_pickle=False)
                    CHECK.eq((got.dtype.str, got.shape), (kind, () if axis is None else (len(want),)),
                             "%s %s: .npy dtype and shape" % (what, part))
                else:
                    got = np.frombuffer(g.body, dtype=kind)
                    CHECK.eq(got.size, 1 if axis is None else len(want), "%s %s: raw length" % (what, part))
                flat = got.reshape(-1).tolist()
                wants = [want] if axis is None else want
                if kind == "<f4":  # JSON gives a float32 in its fewest digits
                    wants = [L.f32(json_number(y)) for y in wants]
                CHECK.ok(len(flat) == len(wants) and all(same(x, json_number(y)) for x, y in zip(flat, wants)),
                         "%s %s as %s: %r, the JSON says %r" % (what, part, accept, flat[:4], wants[:4]))
                checked += 1
    print("%d results fetched as data" % checked, flush=True)
    job = jobs[0][3].json()["id"]  # a sum
    for q, status in (("?part=indices", 409), ("?part=bogus", 400)):
        for accept in ("application/x-npy", "application/json"):
            L.check_problem("result %s of a sum, Accept %s" % (q, accept),
                            srv.req("GET", "/v1/jobs/%s/result%s" % (job, q), headers={"Accept": accept}), status, "part")
    r = srv.req("GET", "/v1/jobs/%s/result" % job)
    CHECK.eq((r.status, r.headers.get("content-type")), (200, "application/json"), "result without Accept: JSON")
    r = srv.req("POST", "/v1/benchmarks", {"op": "max", "dtype": "int32", "n": 1000, "repeats": 2, "device": "cpu"},
                headers={"Prefer": "wait=30"})
    if CHECK.eq(r.status, 200, "a small benchmark"):
        g = srv.req("GET", "/v1/jobs/%s/result" % r.json()["id"], headers={"Accept": "application/x-npy"})
        CHECK.eq((g.status, g.headers.get("content-type")), (200, "application/json"),
                 "a benchmark's table is answered as JSON whatever the Accept")


def dataset_job_rejections(srv, ds_id):
    """ds_id holds 3 x 5 float32 values."""
    cases = [
        ("unknown dataset", {"op": "sum", "dataset": "d_" + "0" * 16}, 404, "dataset"),
        ("malformed dataset id", {"op": "sum", "dataset": "not-an-id"}, 404, "dataset"),
        ("dataset is a number", {"op": "sum", "dataset": 5}, 400, "dataset"),
        ("data and dataset", {"op": "sum", "dataset": ds_id, "data": [1]}, 400, "dataset"),
        ("dtype not the dataset's", {"op": "sum", "dataset": ds_id, "dtype": "int32"}, 422, "dtype"),
        ("unknown dtype", {"op": "sum", "dataset": ds_id, "dtype": "half"}, 400, "dtype"),
        ("view of another size", {"op": "sum", "dataset": ds_id, "shape": [5, 5]}, 422, "shape"),
        ("view of 3 dims", {"op": "sum", "dataset": ds_id, "shape": [2, 2, 3]}, 422, "shape"),
        ("axis 1 on a 1-D view", {"op": "sum", "dataset": ds_id, "shape": [15], "axis": 1}, 422, "axis"),
        ("no op", {"dataset": ds_id}, 400, "op"),
    ]
    for name, body, status, field in cases:
        body.setdefault("device", L.DEVICE)
        L.check_problem("dataset job: " + name, srv.req("POST", "/v1/jobs", body), status, field)


def delete_in_use(srv, ds_id):
    """A job waiting on the CPU behind a long benchmark holds its dataset: DELETE is 409 until
    the job is canceled. The CPU is on every server, so this holds on the gpu label too."""
    r = srv.req("POST", "/v1/benchmarks", {"op": "sum", "dtype": "float32", "n": 1 << 25, "repeats": 30,
                                           "device": "cpu"})
    CHECK.eq(r.status, 202, "a long benchmark to keep the CPU busy")
    blocker = r.json().get("id") if r.status == 202 else None
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds_id, "device": "cpu"})
    CHECK.eq(r.status, 202, "a job on the dataset, queued behind it")
    job = r.json().get("id") if r.status == 202 else "j_0"
    st = srv.get_json("/v1/jobs/" + job).get("status")
    CHECK.eq(st, "queued", "the dataset job waits")
    L.check_problem("DELETE a dataset a queued job uses", srv.req("DELETE", "/v1/datasets/" + ds_id), 409)
    CHECK.eq(srv.req("GET", "/v1/datasets/" + ds_id).status, 200, "the dataset is still there after the 409")
    CHECK.eq(srv.req("DELETE", "/v1/jobs/" + job).status, 200, "cancel the dataset job")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + ds_id).status, 204, "DELETE once no job uses it")
    L.check_problem("a job on the deleted dataset", srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds_id}), 404,
                    "dataset")
    if blocker:
        srv.req("GET", "/v1/jobs/%s?wait=60" % blocker, timeout=90)


def last_use(srv):
    """last_used_at: null until a job that read the dataset ends, then that end's time, in GET and
    the list alike; a job canceled before it ran does not mark it; a matmul marks each operand it
    read; a dataset's own reads and download do not."""
    ids = []
    for a in (np.arange(6, dtype="<f4").reshape(2, 3), np.ones((3, 2), dtype="<f4"), np.ones((2, 3), dtype="<f4")):
        up = upload_raw(srv, a)
        if not CHECK.eq(up.status, 201, "last use: an upload"):
            return
        ids.append(up.json()["id"])
    a, b, other = ids

    def used(ds_id):
        doc = srv.get_json("/v1/datasets/" + ds_id)
        listed_doc = [d for d in srv.get_json("/v1/datasets?limit=100")["datasets"] if d["id"] == ds_id]
        CHECK.eq(listed_doc, [doc], "last use: the list shows what GET does for %s" % ds_id)
        return doc.get("last_used_at")

    srv.req("GET", "/v1/datasets/%s/data" % a)
    CHECK.eq(used(a), None, "last use: a download is no use")
    blocker = L.blocker(srv, 3)
    queued = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": a, "device": "cpu"})
    if CHECK.eq(queued.status, 202, "last use: a job queued behind a busy CPU"):
        CHECK.eq(srv.req("DELETE", "/v1/jobs/" + queued.json()["id"]).status, 200, "last use: canceled before it ran")
    CHECK.eq(used(a), None, "last use: a job canceled before it ran is no use")
    srv.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"], timeout=90)

    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": a, "device": L.DEVICE}, {"Prefer": "wait=30"})
    if CHECK.eq(r.status, 200, "last use: a job on it"):
        job, at = r.json(), used(a)
        CHECK.ok(isinstance(at, str) and L.RFC3339.match(at) and job["started_at"] <= at,
                 "last use: marked once the job ended (started %s, used %r)" % (job["started_at"], at))
        time.sleep(0.01)  # past the mark's millisecond
        r2 = srv.req("POST", "/v1/jobs", {"op": "max", "dataset": a, "device": L.DEVICE}, {"Prefer": "wait=30"})
        CHECK.ok(r2.status == 200 and used(a) > at, "last use: a later job moves it on (%r)" % used(a))
    # a matmul reads both operands; the other dataset stays unused
    r = srv.req("POST", "/v1/jobs", {"op": "matmul", "a": {"dataset": a}, "b": {"dataset": b}, "device": L.DEVICE},
                {"Prefer": "wait=30"})
    if CHECK.eq(r.status, 200, "last use: a matmul of two datasets (%r)" % r.body[:200]):
        CHECK.ok(r.json().get("status") == "succeeded" and isinstance(used(b), str), "last use: its operand b marked")
        kept = (r.json().get("result") or {}).get("dataset")  # a product of datasets is kept as one
        ids += [kept] if kept else []
    CHECK.eq(used(other), None, "last use: a dataset no job read")
    for ds_id in ids:  # the restart's check lists those kept
        CHECK.eq(srv.req("DELETE", "/v1/datasets/" + ds_id).status, 204, "last use: deleted after")


def crash_with_queued_dataset_job(srv):
    """kill -9 while a dataset job is queued: after the restart it runs on the mapped file.
    Returns {id: values} of the dataset it made."""
    a = np.arange(1, 21, dtype="<i4").reshape(4, 5)
    up = upload_raw(srv, a)
    if not CHECK.eq(up.status, 201, "upload before the crash"):
        return {}
    ds_id = up.json()["id"]
    r = srv.req("POST", "/v1/benchmarks", {"op": "sum", "dtype": "float32", "n": 1 << 24, "repeats": 20,
                                           "device": "cpu"})
    CHECK.eq(r.status, 202, "a benchmark to keep the CPU busy")
    r = srv.req("POST", "/v1/jobs", {"op": "max", "dataset": ds_id, "axis": 1, "device": "cpu"})
    if not CHECK.eq(r.status, 202, "a dataset job queued before the crash"):
        return {ds_id: a}
    job = r.json()["id"]
    srv.kill9()
    srv.start()
    r = srv.req("GET", "/v1/jobs/%s?wait=60" % job, timeout=90)
    if CHECK.eq(r.status, 200, "the dataset job after the restart") and r.json().get("status") != "succeeded":
        r = srv.req("GET", "/v1/jobs/%s?wait=60" % job, timeout=90)
    doc = r.json() if r.status == 200 else {}
    CHECK.eq(doc.get("status"), "succeeded", "the recovered dataset job ran")
    CHECK.eq((doc.get("result") or {}).get("values"), a.max(axis=1).tolist(), "the recovered job's answer (numpy's)")
    CHECK.eq(doc.get("dataset"), ds_id, "the recovered job still names its dataset")
    return {ds_id: a}


def wait_digest(srv, ds_id, timeout=30):
    """The dataset's record once its sha256 is known (or the last one read)."""
    deadline = time.time() + timeout
    while True:
        doc = srv.get_json("/v1/datasets/" + ds_id)
        if doc.get("sha256") is not None or time.time() > deadline:
            return doc
        time.sleep(0.05)


def digest_later():
    """Uploads of at least --digest-later-bytes without an Idempotency-Key: the 201 names sha256
    null, GET shows hashlib's digest soon after, also when gpured is killed right after the 201;
    smaller uploads and keyed ones carry it in the 201."""
    later = 4096
    srv = L.Server(args=["--digest-later-bytes", str(later), "--max-dataset-bytes", str(64 << 20)]).start()
    rng = np.random.default_rng(7)
    a = gen("float32", (later // 4,), rng)  # exactly the threshold
    up = upload_raw(srv, a)
    if CHECK.eq(up.status, 201, "upload at --digest-later-bytes"):
        CHECK.eq(up.json().get("sha256", "absent"), None, "its 201: sha256 null, to follow")
        doc = wait_digest(srv, up.json()["id"])
        check_record("its record once digested", doc, a)
        check_download(srv, "its values", doc["id"], a)
    small = gen("int32", (later // 4 - 1,), rng)  # 4 bytes under
    up = upload_raw(srv, small)
    if CHECK.eq(up.status, 201, "upload under --digest-later-bytes"):
        check_record("its 201", up.json(), small)
    shape = "?dtype=float32&shape=%d" % a.size
    up = upload(srv, a.tobytes(), "application/octet-stream", shape, {"Idempotency-Key": "digest-now"})
    if CHECK.eq(up.status, 201, "a keyed upload over --digest-later-bytes"):
        check_record("its 201 (the key's fingerprint needs the digest)", up.json(), a)
    # killed right after the 201: the restart digests what the crash left null
    big = gen("int64", (4 << 20,), rng)  # 32 MiB: tens of ms to digest
    up = upload_raw(srv, big)
    srv.kill9()
    if CHECK.eq(up.status, 201, "a 32 MiB upload, then kill -9"):
        seen = len(srv.log)
        srv.start()
        doc = wait_digest(srv, up.json()["id"])
        check_record("its record after the restart", doc, big)
        by = "the restarted server" if any("sha256 stored" in line for line in srv.log[seen:]) else "before the kill"
        print("  the 32 MiB upload's digest was stored by %s" % by)
    L.check_stop(srv)


def gpu_cache(srv):
    """On a GPU the first job on a dataset copies it (cache miss), the next ones find it there (hit,
    no copy, same answer); DELETE drops it from the GPU. On the CPU no cache takes part (null)."""
    rng = L.rng_for("gpu_cache")
    a = np.array(L.gen_data("sum", "float32", 200003, rng), dtype="<f4")
    up = upload_raw(srv, a)
    if not CHECK.eq(up.status, 201, "upload for the cache"):
        return
    ds_id = up.json()["id"]
    gpu = L.DEVICE == "gpu"

    def cache():
        """The caches of every GPU added up (a job may run on any): counters, bytes and entries."""
        gpus = [g["cache"] for g in srv.get_json("/v1/devices")["gpus"]]
        if not gpus:
            return None
        total = {k: sum(c[k] for c in gpus) for k in ("hits", "misses", "bytes", "entries")}
        return dict(total, fits=all(c["bytes"] <= c["cap_bytes"] for c in gpus))
    before = cache()
    jobs = []
    for k in range(3):
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds_id, "device": L.DEVICE}, {"Prefer": "wait=30"})
        if CHECK.eq(r.status, 200, "cache job %d" % k):
            jobs.append(r.json())
    if len(jobs) != 3:
        return
    CHECK.eq([j["cache"] for j in jobs], ["miss", "hit", "hit"] if gpu else [None] * 3, "cache outcome of 3 jobs")
    CHECK.eq(len({json.dumps(j["result"]) for j in jobs}), 1, "the same answer from the copy and from the cache")
    if gpu:
        CHECK.ok(jobs[0]["timings_ms"]["h2d"] > 0 and jobs[1]["timings_ms"]["h2d"] == 0, "a hit copies nothing")
        after = cache()
        CHECK.eq((after["hits"] - before["hits"], after["misses"] - before["misses"]), (2, 1), "devices: cache counters")
        CHECK.ok(after["bytes"] >= a.nbytes and after["fits"], "devices: cache bytes %r" % after)
        metrics = srv.req("GET", "/metrics").body.decode()
        CHECK.ok(re.search(r'^gpured_cache_hits_total\{device="gpu:\d+"\} [1-9]', metrics, re.M), "metrics: cache hits")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + ds_id).status, 204, "delete the cached dataset")
    if gpu:
        CHECK.eq(cache()["entries"], after["entries"] - 1, "DELETE evicts the dataset from the GPU")


def main():
    srv = L.start_suite(["--max-dataset-bytes", str(LIMIT), "--max-body-bytes", str(BODY_LIMIT)])
    stored = round_trips(srv)
    small = [i for i, a in stored.items() if a.shape == (3, 5) and a.dtype == np.float32][0]
    stored.update(dataset_jobs(srv))
    gpu_cache(srv)
    dataset_job_rejections(srv, small)
    one_shot_jobs(srv)
    one_shot_rejections(srv)
    results_as_data(srv)
    hostile_table(srv)
    early_413(srv)
    gone_half_way(srv)
    deletes(srv, stored)
    up = upload(srv, npy_bytes(np.zeros((3, 4), dtype="<f4")), "application/x-npy")
    if CHECK.eq(up.status, 201, "upload for the 409 test"):
        delete_in_use(srv, up.json()["id"])
    last_use(srv)
    stored.update(crash_with_queued_dataset_job(srv))
    L.check_stop(srv)
    srv.start()  # the same data dir: every dataset is still there, values and all
    CHECK.eq(listed(srv), sorted(stored, reverse=True), "datasets after a restart")
    for ds_id, a in list(stored.items())[:6]:
        check_download(srv, "after a restart " + ds_id, ds_id, a)
    L.check_stop(srv)
    digest_later()


if __name__ == "__main__":
    L.run_suite(main)
