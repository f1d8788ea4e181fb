# test_hostile.py: a table of hostile requests, each answered with the right status and an
# RFC 9457 problem; the server stays healthy after each and answers the same table again.
# Then framing a proxy could read another way (RFC 9112 6.3), sent raw: refused with 400 and the
# connection closed, no job made; HEAD on the event stream: headers, no body. Then a full queue:
# 429 with Retry-After; settings from GPURED_* variables.
import json
import os
import time

import e2e_lib as L
from e2e_lib import CHECK

LIMIT = 262144  # --max-body-bytes for this suite
DROP = object()


def job(**kw):
    """A valid job body with members replaced (DROP removes one), as JSON text."""
    spec = {"op": "sum", "dtype": "float32", "data": [1, 2, 3, 4, 5, 6], "device": L.DEVICE}
    for k, v in kw.items():
        if v is DROP:
            spec.pop(k, None)
        else:
            spec[k] = v
    return json.dumps(spec)


def raw(**kw):
    """A valid job body with one member's JSON text spliced in as given."""
    name, text = kw.popitem()
    return job(**{name: "@@"}).replace('"@@"', text)


VALID = job()
BIG = '{"op":"sum","dtype":"int32","data":[' + ",".join(["1"] * (LIMIT // 2 + 10)) + "]}"

# (name, request, expected status (or tuple of acceptable ones), problem field or None)
# A request is a dict for e2e_lib.http_batch; method defaults to POST /v1/jobs.
CASES = [
    ("malformed JSON", dict(body='{"op": "sum", "dtype": }'), 400, None),
    ("truncated JSON", dict(body=VALID[:len(VALID) // 2]), 400, None),
    ("trailing garbage", dict(body=VALID + " xyz"), 400, None),
    ("two documents", dict(body=VALID + VALID), 400, None),
    ("top-level array", dict(body="[1, 2, 3]"), 400, None),
    ("top-level string", dict(body='"sum"'), 400, None),
    ("top-level number", dict(body="42"), 400, None),
    ("empty body", dict(body=""), 400, None),
    ("invalid UTF-8", dict(body=b'{"op": "s\xff\xfeum", "dtype": "float32", "data": [1]}'), 400, None),
    ("string element", dict(body=job(data=[1, "2", 3])), 400, "data"),
    ("null element", dict(body=job(data=[1, None, 3])), 400, "data"),
    ("bool element", dict(body=job(data=[1, True, 3])), 400, "data"),
    ("object element", dict(body=job(data=[1, {"v": 2}, 3])), 400, "data"),
    ("data is a string", dict(body=job(data="1,2,3")), 400, "data"),
    ("data is a number", dict(body=job(data=5)), 400, "data"),
    ("op is a number", dict(body=job(op=5)), 400, "op"),
    ("dtype is null", dict(body=job(dtype=None)), 400, "dtype"),
    ("unknown op", dict(body=job(op="median")), 400, "op"),
    ("op with a NUL", dict(body=job(op="su\u0000m")), 400, None),
    ("unknown dtype", dict(body=job(dtype="float16")), 400, "dtype"),
    ("unknown algorithm", dict(body=job(algorithm="quantum_sort")), 400, "algorithm"),
    ("unknown device", dict(body=job(device="tpu")), 400, "device"),
    ("missing op", dict(body=job(op=DROP)), 400, "op"),
    ("missing dtype", dict(body=job(dtype=DROP)), 400, "dtype"),
    ("missing data", dict(body=job(data=DROP)), 400, ("data", "dataset")),
    ("data and dataset", dict(body=job(dataset="d_0123")), 400, ("data", "dataset")),
    ("ragged nesting", dict(body=job(data=[[1, 2], [3]])), 422, "data"),
    ("9-deep nesting", dict(body=job(data=[[[[[[[[[1, 2]]]]]]]]])), 422, "data"),
    ("empty data []", dict(body=job(data=[])), 422, "data"),
    ("empty data [[]]", dict(body=job(data=[[]])), 422, "data"),
    ("int32 3000000000", dict(body=job(dtype="int32", data=[1, 3000000000])), 422, "data"),
    ("int32 3e9", dict(body=raw(data="[1, 3e9]").replace('"float32"', '"int32"')), 422, "data"),
    ("int32 -2147483649", dict(body=job(dtype="int32", data=[-2147483649])), 422, "data"),
    ("float32 1e39", dict(body=raw(data="[1, 1e39]")), 422, "data"),
    ("float32 -1e39", dict(body=raw(data="[1, -1e39]")), 422, "data"),
    ("int32 1.5", dict(body=job(dtype="int32", data=[1, 1.5])), 422, "data"),
    ("int64 2^63", dict(body=job(dtype="int64", data=[2**63])), (400, 422), None),
    ("NaN literal", dict(body=raw(data="[1, NaN]")), 400, None),
    ("Infinity literal", dict(body=raw(data="[1, Infinity]")), 400, None),
    ("-Infinity literal", dict(body=raw(data="[-Infinity, 1]")), 400, None),
    ("shape not matching", dict(body=job(shape=[4, 2])), 422, "shape"),
    ("negative shape", dict(body=job(shape=[-2, -3])), 422, "shape"),
    ("overflowing shape", dict(body=job(shape=[2**62, 2**62])), 422, "shape"),
    ("9-dim shape", dict(body=job(shape=[1, 1, 1, 1, 1, 1, 1, 2, 3])), 422, "shape"),
    ("shape is a string", dict(body=job(shape="2x3")), 400, "shape"),
    ("shape with nested data", dict(body=job(data=[[1, 2, 3], [4, 5, 6]], shape=[3, 2])), 422, "shape"),
    ("axis 2", dict(body=job(data=[[1, 2], [3, 4]], axis=2)), 422, "axis"),
    ("axis -3", dict(body=job(data=[[1, 2], [3, 4]], axis=-3)), 422, "axis"),
    ("axis twice", dict(body=job(data=[[1, 2], [3, 4]], axis=[1, -1])), 422, "axis"),
    ("axis []", dict(body=job(data=[[1, 2], [3, 4]], axis=[])), 422, "axis"),
    ("axis \"x\"", dict(body=job(axis="x")), 400, "axis"),
    ("axis 1 on 1-D", dict(body=job(axis=1)), 422, "axis"),
    ("ties middle", dict(body=job(op="argmax", ties="middle")), 400, "ties"),
    ("Prefer: wait=abc (ignored)", dict(body=VALID, headers={"Prefer": "wait=abc"}), 202, None),
    ("charset parameter is fine", dict(body=VALID, headers={"Content-Type": "application/json; charset=utf-8"}), 202, None),
    ("100k-deep unterminated", dict(body='{"op":"sum","dtype":"float32","data":' + "[" * 100000), 400, None),
    ("100k-deep balanced", dict(body='{"op":"sum","dtype":"float32","data":' + "[" * 100000 + "]" * 100000 + "}"), 400, None),
    ("body over limit (Content-Length)", dict(body=BIG), 413, None),
    ("body over limit (Expect: 100-continue)", dict(body=BIG, headers={"Expect": "100-continue"}), 413, None),
    ("body over limit (chunked)", dict(body=BIG, headers={"Transfer-Encoding": "chunked"}), 413, None),
    ("Content-Type text/plain", dict(body=VALID, headers={"Content-Type": "text/plain"}), 415, None),
    ("no Content-Type", dict(body=VALID, headers={"Content-Type": None}), 415, None),
    ("Content-Type application/jsonx", dict(body=VALID, headers={"Content-Type": "application/jsonx"}), 415, None),
    ("unknown job id", dict(method="GET", path="/v1/jobs/j_" + "0" * 24), 404, None),
    ("unknown job id, short", dict(method="GET", path="/v1/jobs/j_" + "0" * 16), 404, None),
    ("malformed job id", dict(method="GET", path="/v1/jobs/not-an-id"), 404, None),
    ("long job id", dict(method="GET", path="/v1/jobs/j_" + "f" * 5000), 404, None),
    ("cancel unknown id", dict(method="DELETE", path="/v1/jobs/j_" + "f" * 24), 404, None),
    ("PUT /v1/jobs", dict(method="PUT", path="/v1/jobs"), 405, None),
    ("DELETE /v1/jobs saying no jobs", dict(method="DELETE", path="/v1/jobs"), 400, None),
    ("DELETE /v1/jobs?older_than=-1", dict(method="DELETE", path="/v1/jobs?older_than=-1"), 400, "older_than"),
    ("DELETE /v1/jobs?kept=yes", dict(method="DELETE", path="/v1/jobs?kept=yes"), 400, "kept"),
    ("PATCH /v1/jobs", dict(method="PATCH", path="/v1/jobs"), 405, None),
    ("PATCH /healthz", dict(method="PATCH", path="/healthz"), 405, None),
    ("unknown path", dict(method="GET", path="/v1/nope"), 404, None),
    ("unknown path under jobs", dict(method="GET", path="/v1/jobs/{done}/nope/deeper"), 404, None),
    ("list limit=0", dict(method="GET", path="/v1/jobs?limit=0"), 400, None),
    ("list limit=1001", dict(method="GET", path="/v1/jobs?limit=1001"), 400, None),
    ("list limit=abc", dict(method="GET", path="/v1/jobs?limit=abc"), 400, None),
    ("list limit=-5", dict(method="GET", path="/v1/jobs?limit=-5"), 400, None),
    ("list cursor=garbage", dict(method="GET", path="/v1/jobs?cursor=garbage%27%3B--"), 400, None),
    ("list status=bogus", dict(method="GET", path="/v1/jobs?status=bogus"), 400, None),
    ("list op=bogus", dict(method="GET", path="/v1/jobs?op=bogus"), 400, None),
    ("GET ?wait=abc", dict(method="GET", path="/v1/jobs/{done}?wait=abc"), 400, None),
    ("GET ?wait=-1", dict(method="GET", path="/v1/jobs/{done}?wait=-1"), 400, None),
    ("GET ?wait=3600 on a finished job", dict(method="GET", path="/v1/jobs/{done}?wait=3600"), 200, None),
    ("GET ?wait=10^30 on a finished job", dict(method="GET", path="/v1/jobs/{done}?wait=1000000000000000000000000000000"), (200, 400), None),
    ("client disconnects mid-body", dict(body=VALID, headers={"Content-Length": "100000"}, timeout=1.5, may_fail=True), 0, None),
]


def run_table(srv, done_id):
    """Each case then GET /healthz; returns each case's signature for comparing two runs."""
    sigs = []
    for name, req, want, field in CASES:
        r = dict(method="POST", path="/v1/jobs", timeout=20)
        r.update(req)
        r["path"] = r["path"].replace("{done}", done_id)
        t0 = time.time()
        resp, health = srv.batch([r, dict(path="/healthz", timeout=10)])
        took = time.time() - t0
        wants = want if isinstance(want, tuple) else (want,)
        what = "%s (%s %s)" % (name, r["method"], r["path"][:60])
        if resp.status >= 400 and resp.status in wants:
            L.check_problem(what, resp, resp.status, field)
        else:
            CHECK.ok(resp.status in wants, "%s: HTTP status: expected %s, got %d (body %r)"
                     % (what, " or ".join(map(str, wants)), resp.status, resp.body[:300]))
        if resp.status == 405:
            CHECK.ok(resp.headers.get("allow"), "%s: 405 without an Allow header" % what)
        CHECK.ok(took < 8, "%s: took %.1fs" % (what, took))
        CHECK.eq(health.status, 200, "GET /healthz after %s" % name)
        sig = [resp.status, resp.headers.get("content-type", "").split(";")[0]]
        if resp.status >= 400:
            try:
                p = resp.json()
                sig += [p.get("status"), p.get("type"), p.get("title"), p.get("field")]
            except ValueError:
                sig.append(resp.body[:100])
        sigs.append(sig)
    return sigs


def main():
    srv = L.start_suite(["--max-body-bytes", str(LIMIT)])
    print("%d hostile cases" % len(CASES), flush=True)
    r = srv.req("POST", "/v1/jobs", VALID, headers={"Prefer": "wait=5"})
    CHECK.eq(r.status, 200, "a normal job before the table")
    done_id = r.json().get("id", "j_0") if r.status == 200 else "j_0"

    first = run_table(srv, done_id)
    second = run_table(srv, done_id)
    for (name, _, _, _), a, b in zip(CASES, first, second):
        CHECK.eq(b, a, "second run of %r answers like the first" % name)

    CHECK.ok(srv.alive(), "server process still running after the table")
    for path in ("/healthz", "/readyz"):
        CHECK.eq(srv.req("GET", path).status, 200, "GET %s at the end" % path)
    data = [1.5, 2.25, -3.0, 4.0]
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "float64", "data": data, "device": L.DEVICE},
                headers={"Prefer": "wait=5"})
    if CHECK.eq(r.status, 200, "a normal job after the table"):
        L.check_job("final job", r.json(), "sum", "float64", [4])
        L.check_result("final job", "sum", "float64", [data], None, "first", r.json().get("result"))
    framing(srv)
    L.check_stop(srv)
    queue_full()
    config_from_env()


def framing(srv):
    body = json.dumps(VALID).encode()
    head = b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    cases = {
        "two different Content-Length": head + b"Content-Length: %d\r\nContent-Length: 5\r\n\r\n" % len(body) + body,
        "Content-Length with Transfer-Encoding: chunked": head + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n",
    }
    count = "SELECT count(*) FROM jobs"
    before = L.store_rows(srv, count)
    for name, request in cases.items():
        got, closed = L.raw_exchange(srv, request)
        head_end = got.find(b"\r\n\r\n")
        status = got.split(b"\r\n", 1)[0]
        CHECK.eq((status, closed), (b"HTTP/1.1 400 Bad Request", True), "%s: 400, connection closed" % name)
        CHECK.ok(b"application/problem+json" in got[:head_end] and got.count(b"HTTP/1.1") == 1,
                 "%s: one problem+json answer (%r)" % (name, got[:300]))
    CHECK.eq(L.store_rows(srv, count), before, "no job made by a request refused for its framing")
    got, _ = L.raw_exchange(srv, b"HEAD /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
    head_end = got.find(b"\r\n\r\n")
    CHECK.ok(got.startswith(b"HTTP/1.1 200") and b"text/event-stream" in got[:head_end] and head_end + 4 == len(got),
             "HEAD /v1/events: the stream's headers and no body (%r)" % got[:300])


def queue_full():
    """With --queue-capacity 1 a burst overflows the queue: 429 + Retry-After + a problem;
    every job that was accepted still succeeds."""
    srv = L.Server(args=["--queue-capacity", "1"], name="gpured-queue-1").start()
    rng = L.rng_for("queue_full")
    data = [L.gen_data("sum", "int32", 1000, rng) for _ in range(300)]
    reqs = [dict(method="POST", path="/v1/jobs", body={"op": "sum", "dtype": "int32", "data": d, "device": L.DEVICE})
            for d in data]
    rs = srv.batch(reqs, parallel=32)
    full = [r for r in rs if r.status == 429]
    print("queue capacity 1, burst of %d: %d answered 429" % (len(rs), len(full)), flush=True)
    CHECK.ok(full, "no 429 in a burst of %d jobs against --queue-capacity 1" % len(rs))
    for r in full[:20]:
        L.check_problem("queue full", r, 429)
        ra = r.headers.get("retry-after", "")
        CHECK.ok(ra.isdigit() and int(ra) >= 1, "429 Retry-After %r is not a whole number of seconds" % ra)
    CHECK.ok(all(r.status in (200, 202, 429) for r in rs), "burst statuses: %s" % sorted({r.status for r in rs}))
    taken = {r.json()["id"]: d for r, d in zip(rs, data) if r.status in (200, 202)}
    rs = srv.batch([dict(path="/v1/jobs/%s?wait=10" % j) for j in taken])
    for (jid, d), r in zip(taken.items(), rs):
        job = r.json() if r.status == 200 else {}
        L.check_job("accepted beside 429s " + jid, job, "sum", "int32", [len(d)])
        L.check_result("accepted beside 429s " + jid, "sum", "int32", [d], None, "first", job.get("result"))
    CHECK.eq(srv.req("GET", "/healthz").status, 200, "GET /healthz after the burst")
    L.check_stop(srv)


def config_from_env():
    """Every setting has a GPURED_* variable; a flag beats its variable."""
    env = {"GPURED_PORT": "0", "GPURED_BIND": "127.0.0.1", "GPURED_THREADS": "2", "GPURED_QUEUE_CAPACITY": "1",
           "GPURED_MAX_BODY_BYTES": "4096", "GPURED_LOG_LEVEL": "warn"}
    srv = L.Server(name="gpured-env", flags=False)
    srv.env.update(env, GPURED_DATA_DIR=srv.data_dir)
    srv.start()
    body = job(data=[1] * 2500)
    L.check_problem("GPURED_MAX_BODY_BYTES=4096, body of %d bytes" % len(body), srv.req("POST", "/v1/jobs", body), 413)
    r = srv.req("POST", "/v1/jobs", VALID, headers={"Prefer": "wait=5"})
    CHECK.eq(r.status, 200, "a small job under GPURED_* settings")
    rs = srv.batch([dict(method="POST", path="/v1/jobs", body=job(data=list(range(i, i + 100)))) for i in range(300)], parallel=32)
    CHECK.ok(any(r.status == 429 for r in rs), "GPURED_QUEUE_CAPACITY=1: no 429 in a burst (statuses %s)" % sorted({r.status for r in rs}))
    if L.STORE == "sqlite":  # on PostgreSQL the data dir holds only datasets
        CHECK.ok(os.path.exists(os.path.join(srv.data_dir, "gpured.db")), "GPURED_DATA_DIR: no gpured.db in %s" % srv.data_dir)
    CHECK.ok(not any("/healthz" in line for line in srv.log), "GPURED_LOG_LEVEL=warn still logs each request")
    L.check_stop(srv)

    flag = L.Server(args=["--max-body-bytes", "100000"], name="gpured-flag-over-env", env={"GPURED_MAX_BODY_BYTES": "4096"}).start()
    r = flag.req("POST", "/v1/jobs", body, headers={"Prefer": "wait=5"})
    CHECK.eq(r.status, 200, "--max-body-bytes 100000 beats GPURED_MAX_BODY_BYTES=4096")
    L.check_stop(flag)


if __name__ == "__main__":
    L.run_suite(main)
