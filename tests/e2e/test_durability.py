# test_durability.py: accepted jobs survive kill -9 and SIGTERM: queue many, stop the server,
# restart it on the same data dir, and every accepted job ends succeeded with the right answer.
import re
import threading
import time

import e2e_lib as L
from e2e_lib import CHECK


def make_jobs(rng, count, n, tag):
    jobs = []
    for i in range(count):
        op, dt = L.OPS[i % len(L.OPS)], L.DTYPES[(i // len(L.OPS)) % len(L.DTYPES)]
        jobs.append(dict(what="%s job %d %s %s" % (tag, i, op, dt), op=op, dtype=dt,
                         data=L.gen_data(op, dt, n, rng)))
    return jobs


def submit(srv, jobs, may_fail=False):
    """POST every job (4 at a time); returns ({id: job} accepted, count of requests that got
    no answer). A 200 (already finished) is reported but the job counts as accepted."""
    reqs = [dict(method="POST", path="/v1/jobs", may_fail=may_fail,
                 body={"op": j["op"], "dtype": j["dtype"], "data": j["data"], "device": L.DEVICE}) for j in jobs]
    accepted, lost = {}, 0
    for j, r in zip(jobs, srv.batch(reqs, parallel=4)):
        if r.status == 0 and may_fail:
            lost += 1
            continue
        CHECK.eq(r.status, 202, "%s: POST without Prefer (body %r)" % (j["what"], r.body[:120]))
        if r.status in (200, 202):
            accepted[r.json()["id"]] = j
    return accepted, lost


def store_counts(srv):
    """Status counts read straight from the store, read-only (informational)."""
    try:
        return dict(L.store_rows(srv, "SELECT status, count(*) FROM jobs GROUP BY status"))
    except Exception as e:  # noqa: BLE001 (a report line, not a check)
        return "unreadable (%s)" % e


def finish_all(srv, accepted, what, limit_s=150):
    """Every accepted id ends succeeded with the reference answer."""
    left = sorted(accepted)
    deadline = time.time() + limit_s
    while left and time.time() < deadline:
        nxt = []
        for jid, r in zip(left, srv.batch([dict(path="/v1/jobs/%s?wait=10" % j) for j in left])):
            j = accepted[jid]
            if not CHECK.eq(r.status, 200, "%s: %s GET %s after restart" % (what, j["what"], jid)):
                continue
            job = r.json()
            if job.get("status") not in L.TERMINAL:
                nxt.append(jid)
                continue
            L.check_job(j["what"], job, j["op"], j["dtype"], [len(j["data"])], device=j.get("device"))
            if job.get("status") == "succeeded":
                L.check_result(j["what"], j["op"], j["dtype"], [j["data"]], None, "first", job.get("result"))
        left = nxt
    CHECK.ok(not left, "%s: %d accepted jobs never finished after the restart" % (what, len(left)))


def main():
    srv = L.start_suite()
    rng = L.rng_for("test_durability")
    every = {}

    # kill -9 right after the last 202
    jobs = make_jobs(rng, 200, 20000, "kill-9")
    t0 = time.time()
    accepted, _ = submit(srv, jobs)
    took = time.time() - t0
    srv.kill9()
    print("kill -9 after %d accepted jobs (%.1fs); store then: %s"
          % (len(accepted), took, store_counts(srv)), flush=True)
    srv.start()
    finish_all(srv, accepted, "after kill -9")
    every.update(accepted)

    # kill -9 in the middle of a burst: every job that got its 202 is kept
    jobs = make_jobs(rng, 200, 20000, "mid-burst")
    out = {}
    sender = threading.Thread(target=lambda: out.update(res=submit(srv, jobs, may_fail=True)))
    sender.start()
    time.sleep(took / 2)
    srv.kill9()
    sender.join()
    accepted, lost = out["res"]
    print("kill -9 mid-burst: %d accepted, %d without an answer; store then: %s"
          % (len(accepted), lost, store_counts(srv)), flush=True)
    srv.start()
    finish_all(srv, accepted, "after kill -9 mid-burst")
    every.update(accepted)

    # SIGTERM with jobs queued: exit 0, the queued ones stay in the store and run after restart
    jobs = make_jobs(rng, 100, 20000, "sigterm")
    accepted, _ = submit(srv, jobs)
    rc = srv.stop()
    CHECK.eq(rc, 0, "exit code after SIGTERM with jobs queued")
    print("SIGTERM after %d accepted jobs; store then: %s" % (len(accepted), store_counts(srv)), flush=True)
    srv.start()
    finish_all(srv, accepted, "after SIGTERM")
    every.update(accepted)

    # each accepted job listed once; the only others are requests cut off by the kill, which
    # the store may have kept without the client hearing of it
    r = srv.req("GET", "/v1/jobs?limit=1000")
    listed = [j for j in r.json().get("jobs", [])] if r.status == 200 else []
    ids = [j.get("id") for j in listed]
    CHECK.eq(len(ids), len(set(ids)), "no job listed twice")
    CHECK.eq(sorted(set(every) - set(ids)), [], "accepted jobs missing from the list")
    extra = [j for j in listed if j.get("id") not in every]
    CHECK.ok(len(extra) <= lost, "%d listed jobs were never accepted (only %d requests were cut off)" % (len(extra), lost))
    CHECK.ok(all(j.get("status") == "succeeded" for j in listed),
             "listed jobs not succeeded: %s" % [(j.get("id"), j.get("status")) for j in listed if j.get("status") != "succeeded"][:5])
    # Prefer: wait jobs are stored once, at their end, unless their wait runs out first: then
    # they are stored as queued before the 202, and survive kill -9; at SIGTERM the ones still
    # queued are stored and answered 202, and run after the restart
    for stop in ("kill -9", "SIGTERM"):
        # a blocker is sized by timing smaller runs, and other tests on the machine can make it end
        # well before its time: kill -9's 1 s waits count only if it still ran after them, else
        # they are sent again behind a longer one (their jobs, answered 200, have ended)
        for seconds in (4, 8, 16):
            blocker = L.blocker(srv, seconds)
            answers, jobs = waited_round(srv, rng, stop, blocker)
            if stop == "SIGTERM" or srv.get_json("/v1/jobs/" + blocker.json()["id"])["status"] == "running":
                break
            print("the %d s blocker ended before the waits ran out: again with a longer one" % seconds, flush=True)
        CHECK.eq([a.status for a in answers], [202] * len(jobs),
                 "%s: each waited job answered 202 once its wait could last no longer" % stop)
        accepted = {a.json()["id"]: j for a, j in zip(answers, jobs) if a.status == 202}
        if stop == "kill -9":
            srv.kill9()
        srv.start()
        finish_all(srv, accepted, "waited jobs after " + stop)

    L.check_stop(srv)
    print("store after the final stop: %s" % (store_counts(srv),), flush=True)


def waited_round(srv, rng, stop, blocker):
    """8 jobs with Prefer: wait sent at once behind blocker (kill -9: wait=1; SIGTERM: wait=60, and
    the server stopped once every one is parked): (answers, jobs)."""
    CHECK.eq(blocker.status, 202, "%s: a long job holds the CPU" % stop)
    jobs = make_jobs(rng, 8, 1000, "waited, " + stop)
    for j in jobs:  # queued behind the blocker whatever device the suite runs on
        j["device"] = "cpu"
    reqs = [dict(method="POST", path="/v1/jobs", headers={"Prefer": "wait=1" if stop == "kill -9" else "wait=60"},
                 body={"op": j["op"], "dtype": j["dtype"], "data": j["data"], "device": j["device"]}, timeout=70)
            for j in jobs]
    answers = [None] * len(reqs)

    def send(k):
        answers[k] = srv.req("POST", reqs[k]["path"], reqs[k]["body"], reqs[k]["headers"], timeout=70, may_fail=True)

    senders = [threading.Thread(target=send, args=(k,)) for k in range(len(reqs))]  # all at once
    for t in senders:
        t.start()
    if stop == "SIGTERM":  # once every request is in and waiting (not sooner: CI's cores are slow)
        parked = 0
        for _ in range(300):
            m = re.search(r"^gpured_parked_requests (\d+)", srv.req("GET", "/metrics").body.decode(), re.M)
            parked = int(m.group(1)) if m else 0
            if parked >= len(reqs):
                break
            time.sleep(0.1)
        CHECK.eq(parked, len(reqs), "SIGTERM: every waited job's request is parked first")
        rc = srv.stop()
        CHECK.eq(rc, 0, "SIGTERM with waited jobs queued: exit 0")
    for t in senders:
        t.join()
    return answers, jobs


if __name__ == "__main__":
    L.run_suite(main)
