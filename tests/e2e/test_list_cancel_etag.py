# test_list_cancel_etag.py: the job list (newest first, filters, cursor pages), ETag / 304,
# ?wait= on finished jobs, cancel (200 while queued, 409 while it runs), a finished job deleted
# (204), 404 and 405.
import time

import e2e_lib as L
from e2e_lib import CHECK


def list_ids(srv, query):
    r = srv.req("GET", "/v1/jobs?" + query)
    if not CHECK.eq(r.status, 200, "GET /v1/jobs?%s (body %r)" % (query, r.body[:200])):
        return [], None, []
    body = r.json()
    jobs = body.get("jobs")
    CHECK.ok(isinstance(jobs, list), "GET /v1/jobs?%s: jobs is %r" % (query, jobs))
    CHECK.ok("next_cursor" in body and (body["next_cursor"] is None or isinstance(body["next_cursor"], str)),
             "GET /v1/jobs?%s: next_cursor %r" % (query, body.get("next_cursor", "<missing>")))
    jobs = jobs if isinstance(jobs, list) else []
    return [j.get("id") for j in jobs], body.get("next_cursor"), jobs


def all_pages(srv, query, limit):
    """Follow next_cursor with limit per page; returns the ids in order."""
    ids, cursor, pages = [], None, 0
    while True:
        q = "%slimit=%d" % (query + "&" if query else "", limit) + ("&cursor=" + cursor if cursor else "")
        page, cursor, _ = list_ids(srv, q)
        pages += 1
        CHECK.ok(len(page) <= limit, "page of %s has %d > limit %d" % (q, len(page), limit))
        CHECK.ok(page or cursor is None, "empty page with a next_cursor for %s" % q)
        CHECK.ok(len(page) == limit or cursor is None, "a short page with a next_cursor for %s" % q)
        ids += page
        if cursor is None or pages > 1000:
            return ids


def wait_terminal(srv, ids, what, limit_s=120):
    """GET ?wait=5 until every id is terminal; returns {id: job}."""
    done, left = {}, list(ids)
    deadline = time.time() + limit_s
    while left and time.time() < deadline:
        rs = srv.batch([dict(path="/v1/jobs/%s?wait=5" % j) for j in left])
        nxt = []
        for jid, r in zip(left, rs):
            if not CHECK.eq(r.status, 200, "%s: GET /v1/jobs/%s?wait=5" % (what, jid)):
                continue
            job = r.json()
            if job.get("status") in L.TERMINAL:
                done[jid] = job
            else:
                nxt.append(jid)
        left = nxt
    CHECK.ok(not left, "%s: %d jobs never finished" % (what, len(left)))
    return done


def main():
    srv = L.start_suite()
    rng = L.rng_for("test_list_cancel_etag")

    # a known history: 13 finished jobs, oldest first
    ops = ["sum", "max", "mean"]
    reqs, kinds = [], []
    for i in range(13):
        op = ops[i % 3]
        kinds.append(op)
        reqs.append(dict(method="POST", path="/v1/jobs", headers={"Prefer": "wait=5"},
                         body={"op": op, "dtype": "float64", "data": L.gen_data(op, "float64", 50, rng), "device": L.DEVICE}))
    ids = []
    for i, r in enumerate(srv.batch(reqs)):
        if CHECK.eq(r.status, 200, "history job %d POST" % i):
            ids.append(r.json()["id"])
    newest_first = ids[::-1]

    got, cursor, jobs = list_ids(srv, "limit=1000")
    CHECK.eq(got, newest_first, "GET /v1/jobs: ids newest first")
    CHECK.eq(cursor, None, "GET /v1/jobs?limit=1000: next_cursor with everything listed")
    single = {}
    for jid, r in zip(ids, srv.batch([dict(path="/v1/jobs/" + j) for j in ids])):
        single[jid] = r.json() if r.status == 200 else None
    for j in jobs:
        CHECK.eq(j, single.get(j.get("id")), "list entry %s equals GET /v1/jobs/{id}" % j.get("id"))

    by_op = {op: [j for j, k in zip(ids, kinds) if k == op][::-1] for op in ops}
    for op in ops:
        CHECK.eq(list_ids(srv, "op=%s" % op)[0], by_op[op], "filter op=%s" % op)
        CHECK.eq(list_ids(srv, "op=%s&status=succeeded" % op)[0], by_op[op], "filter op=%s&status=succeeded" % op)
    CHECK.eq(list_ids(srv, "status=succeeded")[0], newest_first, "filter status=succeeded")
    CHECK.eq(list_ids(srv, "status=queued")[0], [], "filter status=queued")
    CHECK.eq(list_ids(srv, "op=argmin")[0], [], "filter op=argmin")
    CHECK.eq(list_ids(srv, "op=sum&status=failed")[0], [], "filter op=sum&status=failed")

    for limit in (1, 2, 5, 13, 14):
        CHECK.eq(all_pages(srv, "", limit), newest_first, "cursor pages of %d" % limit)
    CHECK.eq(all_pages(srv, "op=max", 2), by_op["max"], "cursor pages of 2 with op=max")
    CHECK.eq(all_pages(srv, "status=succeeded&op=sum", 3), by_op["sum"], "cursor pages of 3 with status+op")
    CHECK.eq(list_ids(srv, "limit=13")[1], None, "a page holding the last of the 13 jobs exactly: next_cursor null")
    first, cur, _ = list_ids(srv, "limit=5")
    CHECK.eq(first, newest_first[:5], "first page of 5")
    CHECK.ok(isinstance(cur, str) and cur, "first page of 5 has a next_cursor: %r" % cur)

    # ETag / If-None-Match on a finished job
    jid = ids[0]
    r = srv.req("GET", "/v1/jobs/" + jid)
    etag = r.headers.get("etag")
    if CHECK.ok(etag, "GET /v1/jobs/{id} has an ETag header (headers %r)" % r.headers):
        r2 = srv.req("GET", "/v1/jobs/" + jid, headers={"If-None-Match": etag})
        CHECK.eq(r2.status, 304, "If-None-Match: current ETag")
        CHECK.eq(r2.body, b"", "304 body")
        CHECK.eq(r2.headers.get("etag"), etag, "304 carries the ETag")
        r3 = srv.req("GET", "/v1/jobs/" + jid, headers={"If-None-Match": '"not-the-etag"'})
        CHECK.eq(r3.status, 200, "If-None-Match: another ETag")
        CHECK.eq(r3.body, r.body, "body again unchanged")
        r4 = srv.req("GET", "/v1/jobs/" + jid, headers={"If-None-Match": '"x", %s' % etag})
        CHECK.eq(r4.status, 304, "If-None-Match: a list holding the current ETag")
        other = srv.req("GET", "/v1/jobs/" + ids[1]).headers.get("etag")
        CHECK.ok(other and other != etag, "two jobs have different ETags (%r, %r)" % (etag, other))

    # ?wait= on a finished job answers at once (its status cannot change)
    t0 = time.time()
    r = srv.req("GET", "/v1/jobs/%s?wait=5" % jid)
    CHECK.eq(r.status, 200, "GET ?wait=5 on a finished job")
    CHECK.ok(time.time() - t0 < 2.5, "GET ?wait=5 on a finished job took %.1fs" % (time.time() - t0))

    # a finished job is deleted (204) and gone; 404: unknown; 405: wrong methods with Allow
    r = srv.req("DELETE", "/v1/jobs/" + jid)
    CHECK.eq((r.status, r.body), (204, b""), "DELETE of a finished job: 204, no body")
    L.check_problem("GET a deleted job", srv.req("GET", "/v1/jobs/" + jid), 404)
    L.check_problem("DELETE a deleted job", srv.req("DELETE", "/v1/jobs/" + jid), 404)
    CHECK.ok(jid not in list_ids(srv, "limit=1000")[0], "a deleted job is not listed")
    unknown = "j_" + "0" * 16
    L.check_problem("GET unknown id", srv.req("GET", "/v1/jobs/" + unknown), 404)
    L.check_problem("DELETE unknown id", srv.req("DELETE", "/v1/jobs/" + unknown), 404)
    for method, path, allow in (("PUT", "/v1/jobs/" + jid, ("GET", "DELETE")), ("POST", "/v1/jobs/" + jid, ("GET", "DELETE")),
                                ("PUT", "/v1/jobs", ("GET", "POST", "DELETE")), ("PATCH", "/v1/jobs", ("GET", "POST", "DELETE"))):
        r = srv.req(method, path)
        what = "%s %s" % (method, path)
        L.check_problem(what, r, 405)
        hdr = r.headers.get("allow", "")
        have = {m.strip() for m in hdr.split(",")}
        CHECK.ok(all(m in have for m in allow), "%s: Allow %r should list %s" % (what, hdr, ", ".join(allow)))

    # cancel: a burst of heavier jobs, then cancel newest first; each answer agrees with the end state
    n = 200000
    burst = []
    for i in range(50):
        data = rng.choices((1, 1, 1, -1), k=n)
        burst.append((data, dict(method="POST", path="/v1/jobs",
                                 body={"op": "prod", "dtype": "int64", "data": data, "device": L.DEVICE})))
    t0 = time.time()
    rs = srv.batch([b for _, b in burst], parallel=8)
    bids, bdata = [], {}
    for (data, _), r in zip(burst, rs):
        CHECK.eq(r.status, 202, "burst POST without Prefer (body %r)" % r.body[:120])
        if r.status in (200, 202):
            bids.append(r.json()["id"])
            bdata[bids[-1]] = data
    bids.sort()  # time-ordered ids: the newest are most likely still queued
    before = {}
    for jid, r in zip(bids, srv.batch([dict(path="/v1/jobs/" + j) for j in bids])):
        before[jid] = (r.json().get("status"), r.headers.get("etag"))
    cancels = srv.batch([dict(method="DELETE", path="/v1/jobs/" + j) for j in reversed(bids)])
    print("burst of %d submitted and canceled in %.1fs" % (len(bids), time.time() - t0), flush=True)
    answer = {}
    for jid, r in zip(reversed(bids), cancels):
        answer[jid] = r.status
        if r.status == 200:
            CHECK.eq(r.json().get("status"), "canceled", "DELETE %s: body status" % jid)
        elif r.status == 204:  # it had ended: deleted
            L.check_problem("GET %s, deleted" % jid, srv.req("GET", "/v1/jobs/" + jid), 404)
        else:
            L.check_problem("DELETE %s (running)" % jid, r, 409)
    final = wait_terminal(srv, [j for j in bids if answer.get(j) != 204], "burst")
    canceled = [j for j in bids if answer.get(j) == 200]
    print("cancel: %d of %d were still queued (200), %d running (409), %d had ended and were deleted (204)"
          % (len(canceled), len(bids), sum(1 for v in answer.values() if v == 409),
             sum(1 for v in answer.values() if v == 204)), flush=True)
    for jid, job in final.items():
        if answer.get(jid) == 200:
            CHECK.eq(job.get("status"), "canceled", "%s: canceled job's final status" % jid)
            CHECK.ok(job.get("result") is None, "%s: canceled job has a result %r" % (jid, job.get("result")))
        else:
            CHECK.eq(job.get("status"), "succeeded", "%s: job refused cancel (409) final status" % jid)
            L.check_result("burst " + jid, "prod", "int64", [bdata[jid]], None, "first", job.get("result"))
    if canceled:
        got = list_ids(srv, "status=canceled&limit=1000")[0]
        CHECK.eq(got, canceled[::-1], "filter status=canceled")
        r = srv.req("DELETE", "/v1/jobs/" + canceled[0])  # a canceled job has ended: a second DELETE deletes it
        CHECK.eq(r.status, 204, "DELETE a canceled job (%r)" % r.body[:200])
        answer[canceled[0]] = r.status
    # an ETag taken before a change no longer matches; one taken after it still does
    kept = [j for j in bids if answer.get(j) != 204]
    rs = srv.batch([dict(path="/v1/jobs/" + j, headers={"If-None-Match": before[j][1] or '"none"'}) for j in kept])
    for jid, r in zip(kept, rs):
        st, tag = before[jid]
        changed = final.get(jid, {}).get("status") != st
        CHECK.eq(r.status, 200 if changed else 304,
                 "%s: If-None-Match with the ETag of status %s, now %s" % (jid, st, final.get(jid, {}).get("status")))
        if changed and r.status == 200:
            CHECK.ok(r.headers.get("etag") not in (None, tag), "%s: ETag unchanged after a status change" % jid)

    got = list_ids(srv, "limit=1000")[0]
    live = [j for j in bids + ids[1:] if answer.get(j) != 204]  # ids[0] and the burst's 204s were deleted
    CHECK.eq(got, sorted(live, reverse=True), "full list after the burst, newest first")
    L.check_stop(srv)


if __name__ == "__main__":
    L.run_suite(main)
