# test_batch.py: POST /v1/jobs with a JSON array, a batch of jobs accepted whole or not at all.
# Also the binary form, ?batch=rows: each row of a raw or .npy body's 2-D values is a job.
# Every op and dtype and a job on a dataset in one batch: 202 with the jobs in order, each ending
# with the reference answer; with Prefer: wait, 200 once all have ended. A bad item anywhere is
# answered with a problem naming it ("[k].member") and nothing of the batch is stored; so is a
# batch over --queue-capacity, one that the queue has no room for (429), and one with an
# Idempotency-Key. A batch killed -9 right after its 202 is all there after the restart, and
# every job of it ends with the right answer; so is a waited batch answered 202 when its wait ran
# out, while a waited batch answered 200 stored each job once, at its end. Each batch answer's Server-Timing names its phases,
# none negative, together no longer than the round trip.
import re
import struct
import time

import e2e_lib as L
from e2e_lib import CHECK

CAPACITY = 600


def items(rng, count, n):
    out = []
    for i in range(count):
        op, dt = L.OPS[i % len(L.OPS)], L.DTYPES[(i // len(L.OPS)) % len(L.DTYPES)]
        out.append(dict(what="batch item %d %s %s" % (i, op, dt), op=op, dtype=dt, data=L.gen_data(op, dt, n, rng)))
    return out


def body(its):
    return [{"op": j["op"], "dtype": j["dtype"], "data": j["data"], "device": L.DEVICE} for j in its]


def check_ended(srv, ids, its, what, device=None):
    for jid, j, r in zip(ids, its, srv.batch([dict(path="/v1/jobs/%s?wait=60" % i, timeout=70) for i in ids])):
        job = r.json() if r.status == 200 else {}
        for _ in range(3):  # a ?wait= ends at the first change
            if job.get("status") in L.TERMINAL:
                break
            job = srv.get_json("/v1/jobs/%s?wait=60" % jid)
        L.check_job("%s: %s" % (what, j["what"]), job, j["op"], j["dtype"], [len(j["data"])], device=device)
        L.check_result("%s: %s" % (what, j["what"]), j["op"], j["dtype"], [j["data"]], None, "first", job.get("result"))


def count_jobs(srv):
    return len(L.store_rows(srv, "SELECT id FROM jobs"))


PHASES = ["receive", "parse", "submit", "store", "run", "answer"]


def timed_post(srv, b, headers=None):
    """POST b to /v1/jobs; the answer, with its Server-Timing checked against the round trip."""
    t0 = time.monotonic()
    r = srv.req("POST", "/v1/jobs", b, headers, timeout=70)
    took = (time.monotonic() - t0) * 1000
    got = re.findall(r"(\w+);dur=([0-9.]+)", r.headers.get("server-timing") or "")
    CHECK.eq([name for name, _ in got], PHASES, "a batch's Server-Timing names its phases in order: %s"
             % r.headers.get("server-timing"))
    ms = [float(d) for _, d in got]
    CHECK.ok(sum(ms) <= took + 0.5, "its phases (%.1f ms in all) fit in the round trip (%.1f ms)" % (sum(ms), took))
    return r


def accepted(srv, rng):
    its = items(rng, 56, 300)
    xs = [rng.randrange(-1000, 1000) for _ in range(1000)]
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=1000", struct.pack("<1000i", *xs),
                {"Content-Type": "application/octet-stream"})
    CHECK.eq(r.status, 201, "a dataset for a batch item")
    b = body(its) + [{"op": "sum", "dataset": r.json()["id"], "device": L.DEVICE}]
    r = timed_post(srv, b)
    jobs = r.json() if r.status == 202 else []
    CHECK.eq((r.status, len(jobs)), (202, len(b)), "a batch of %d: 202 with every job" % len(b))
    CHECK.eq([(j.get("op"), j.get("dtype")) for j in jobs], [(x["op"], x.get("dtype", "int32")) for x in b],
             "the jobs in the batch's order")
    ids = [j.get("id") for j in jobs]
    CHECK.eq(len(set(ids)), len(b), "distinct ids")
    check_ended(srv, ids[:-1], its, "a batch")
    last = srv.get_json("/v1/jobs/%s?wait=60" % ids[-1])
    CHECK.eq((last.get("status"), (last.get("result") or {}).get("value")), ("succeeded", sum(xs)),
             "the batch's job on a dataset")

    its = items(rng, 20, 50)
    r = timed_post(srv, body(its), {"Prefer": "wait=60"})
    jobs = r.json() if r.status == 200 else []
    CHECK.eq((r.status, r.headers.get("preference-applied"), len(jobs)), (200, "wait=60", 20),
             "Prefer: wait: 200 once all have ended")
    CHECK.ok(jobs and all(j.get("status") == "succeeded" for j in jobs), "every job in the 200 has ended")
    for j, job in zip(its, jobs):
        L.check_result("a waited batch: " + j["what"], j["op"], j["dtype"], [j["data"]], None, "first", job.get("result"))
    # as a waited single job, each was stored once, at its end: one event each, none "queued"
    ids = ", ".join("'%s'" % j.get("id") for j in jobs)
    # (a run of like events is one row: its ids a JSON array in SQLite, a text[] in PostgreSQL)
    each = ("events e CROSS JOIN LATERAL unnest(coalesce(e.ids, ARRAY[e.id])) u(id)", "u.id") \
        if L.STORE == "postgresql" else ("events e LEFT JOIN json_each(e.ids) j", "coalesce(j.value, e.id)")
    events = L.store_rows(srv, "SELECT e.status, count(*) FROM %s WHERE e.kind = 'job' AND %s IN (%s) GROUP BY e.status"
                          % (each[0], each[1], ids or "''"))
    CHECK.eq([(st, int(n)) for st, n in events], [("succeeded", 20)], "a waited batch's jobs each stored once, ended")


def refused(srv, rng):
    good = body(items(rng, 10, 20))
    cases = [
        ("an unknown member in item 7", good[:7] + [dict(good[7], colour="red")] + good[8:], 400, "[7].colour"),
        ("a bad dtype in item 3", good[:3] + [dict(good[3], dtype="int8")] + good[4:], 400, "[3].dtype"),
        ("an item that is no object", good[:5] + [42] + good[6:], 400, "[5]"),
        ("an unknown dataset in item 9", good[:9] + [{"op": "sum", "dataset": "d_" + "0" * 16}], 404, "[9].dataset"),
        ("an unknown device in item 2", good[:2] + [dict(good[2], device="tpu")] + good[3:], 400, "[2].device"),
        ("an empty batch", [], 422, None),
        ("a batch over --queue-capacity", [good[0]] * (CAPACITY + 1), 422, None),
    ]
    for what, b, status, field in cases:
        before = count_jobs(srv)
        r = srv.req("POST", "/v1/jobs", b)
        p = r.json() if r.body else {}
        CHECK.eq((r.status, p.get("field")), (status, field), "%s: %d naming %r" % (what, status, field))
        CHECK.ok(r.headers.get("content-type", "").startswith("application/problem+json"), what + ": problem+json")
        CHECK.eq(count_jobs(srv), before, what + ": nothing of the batch stored")
    r = srv.req("POST", "/v1/jobs", good, {"Idempotency-Key": "batch-1"})
    CHECK.eq((r.status, r.json().get("field")), (422, "Idempotency-Key"), "a batch with an Idempotency-Key: 422")
    blocker = L.blocker(srv, 3) if L.DEVICE == "cpu" else None
    if blocker:  # the CPU's queue held: a batch with no room in it is refused whole
        half = srv.req("POST", "/v1/jobs", [good[0]] * (CAPACITY // 2))
        CHECK.eq(half.status, 202, "half the queue's room taken")
        before = count_jobs(srv)
        r = srv.req("POST", "/v1/jobs", [good[0]] * (CAPACITY // 2 + 10))
        CHECK.eq(r.status, 429, "a batch the queue has no room for: 429")
        CHECK.eq(count_jobs(srv), before, "nothing of the refused batch stored")
        srv.get_json("/v1/jobs/%s?wait=60" % blocker.json()["id"])


def npy2(rows, code, fmt):
    """A 2-D .npy of rows (dtype code like '<f8', struct format letter fmt)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }" % (code, len(rows), len(rows[0]))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    flat = [x for row in rows for x in row]
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<%d%s" % (len(flat), fmt), *flat)


def rows_form(srv, rng):
    """?batch=rows: each row of a one-shot body's 2-D values is a job of its own."""
    for dtype, code, fmt, ctype in (("int32", "<i4", "i", "application/octet-stream"),
                                    ("float64", "<f8", "d", "application/x-npy")):
        rows = [L.gen_data("sum", dtype, 37, rng) for _ in range(25)]
        if ctype == "application/x-npy":
            body, q = npy2(rows, code, fmt), "?batch=rows&op=max&device=%s" % L.DEVICE
        else:
            flat = [x for row in rows for x in row]
            body, q = struct.pack("<%d%s" % (len(flat), fmt), *flat), \
                "?batch=rows&op=max&dtype=%s&shape=25,37&device=%s" % (dtype, L.DEVICE)
        r = srv.req("POST", "/v1/jobs" + q, body, {"Content-Type": ctype, "Prefer": "wait=60"}, timeout=70)
        jobs = r.json() if r.status == 200 else []
        CHECK.eq((r.status, len(jobs)), (200, 25), "?batch=rows, %s %s: 25 jobs, all ended" % (dtype, ctype))
        for k, (row, job) in enumerate(zip(rows, jobs)):
            L.check_job("?batch=rows %s row %d" % (dtype, k), job, "max", dtype, [37])
            L.check_result("?batch=rows %s row %d" % (dtype, k), "max", dtype, [row], None, "first", job.get("result"))
    flat = struct.pack("<12i", *range(12))
    for what, q, status in (("1-D values", "?batch=rows&op=sum&dtype=int32&shape=12", 422),
                            ("an axis", "?batch=rows&op=sum&dtype=int32&shape=3,4&axis=1", 422),
                            ("another batch kind", "?batch=cols&op=sum&dtype=int32&shape=3,4", 400),
                            ("more rows than --queue-capacity", "?batch=rows&op=sum&dtype=int32&shape=%d,1" % (CAPACITY + 1),
                             422)):
        body = struct.pack("<%di" % (CAPACITY + 1), *range(CAPACITY + 1)) if "capacity" in what else flat
        before = count_jobs(srv)
        r = srv.req("POST", "/v1/jobs" + q, body, {"Content-Type": "application/octet-stream"})
        CHECK.eq((r.status, r.json().get("field")), (status, "batch"), "?batch=rows with %s: %d" % (what, status))
        CHECK.eq(count_jobs(srv), before, "?batch=rows with %s: nothing stored" % what)


def killed(srv, rng):
    its = items(rng, 300, 200)
    r = srv.req("POST", "/v1/jobs", body(its))
    CHECK.eq(r.status, 202, "a batch of 300")
    ids = [j["id"] for j in r.json()] if r.status == 202 else []
    srv.kill9()
    srv.start()
    check_ended(srv, ids, its, "a batch after kill -9")


def waited_killed(srv, rng):
    """A waited batch whose wait runs out behind a blocker: 202 once every job is stored as queued,
    and after kill -9 every one is there and ends with the right answer."""
    # a blocker is sized by timing smaller runs, and other tests on the machine can make it end
    # early: the wait counts as run out only if the blocker still ran after it, else again longer
    for seconds in (4, 8, 16):
        blocker = L.blocker(srv, seconds)
        its = items(rng, 8, 50)
        r = srv.req("POST", "/v1/jobs", [dict(x, device="cpu") for x in body(its)], {"Prefer": "wait=1"}, timeout=70)
        if srv.get_json("/v1/jobs/" + blocker.json()["id"])["status"] == "running":
            break
        print("the %d s blocker ended before the batch's wait ran out: again with a longer one" % seconds, flush=True)
    jobs = r.json() if r.status == 202 else []
    CHECK.eq((r.status, [j.get("status") for j in jobs]), (202, ["queued"] * 8),
             "a waited batch behind a blocker: 202 once its wait ran out, every job queued")
    ids = [j.get("id") for j in jobs]
    srv.kill9()
    srv.start()
    check_ended(srv, ids, its, "a waited batch after kill -9", device="cpu")


def main():
    srv = L.start_suite(args=["--queue-capacity", str(CAPACITY)])
    rng = L.rng_for("test_batch")
    accepted(srv, rng)
    refused(srv, rng)
    rows_form(srv, rng)
    killed(srv, rng)
    waited_killed(srv, rng)
    L.check_stop(srv)


L.run_suite(main)
