# test_durability.py: accepted jobs survive kill -9 and SIGTERM: queue many, stop the server,
# restart it on the same data dir, and every accepted job ends succeeded with the right answer.
import os
import sqlite3
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


def submit(srv, jobs):
    """POST every job (4 at a time); returns {id: job} for the ones accepted with 202."""
    reqs = [dict(method="POST", path="/v1/jobs",
                 body={"op": j["op"], "dtype": j["dtype"], "data": j["data"], "device": L.DEVICE}) for j in jobs]
    accepted = {}
    for j, r in zip(jobs, srv.batch(reqs, parallel=4)):
        if CHECK.eq(r.status, 202, "%s: POST (body %r)" % (j["what"], r.body[:200])):
            accepted[r.json()["id"]] = j
    return accepted


def store_counts(data_dir):
    """Status counts read straight from the store file, read-only (informational)."""
    path = os.path.join(data_dir, "gpured.db")
    try:
        db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        try:
            return dict(db.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())
        finally:
            db.close()
    except sqlite3.Error as e:
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
            L.check_job(j["what"], job, j["op"], j["dtype"], [len(j["data"])])
            if job.get("status") == "succeeded":
                L.check_result(j["what"], j["op"], j["dtype"], [j["data"]], None, "first", job.get("result"))
        left = nxt
    CHECK.ok(not left, "%s: %d accepted jobs never finished after the restart" % (what, len(left)))


def main():
    srv = L.start_suite()
    rng = L.rng_for("test_durability")

    # kill -9 right after the last 202
    jobs = make_jobs(rng, 200, 20000, "kill-9")
    t0 = time.time()
    accepted = submit(srv, jobs)
    srv.kill9()
    print("kill -9 after %d accepted jobs (%.1fs); store then: %s"
          % (len(accepted), time.time() - t0, store_counts(srv.data_dir)), flush=True)
    srv.start()
    finish_all(srv, accepted, "after kill -9")

    # SIGTERM with jobs queued: exit 0, the queued ones stay in the store and run after restart
    jobs2 = make_jobs(rng, 100, 20000, "sigterm")
    accepted2 = submit(srv, jobs2)
    rc = srv.stop()
    CHECK.eq(rc, 0, "exit code after SIGTERM with jobs queued")
    print("SIGTERM after %d accepted jobs; store then: %s" % (len(accepted2), store_counts(srv.data_dir)), flush=True)
    srv.start()
    finish_all(srv, accepted2, "after SIGTERM")

    r = srv.req("GET", "/v1/jobs?limit=1000")
    listed = [j.get("id") for j in r.json().get("jobs", [])] if r.status == 200 else []
    CHECK.eq(sorted(listed), sorted(list(accepted) + list(accepted2)), "every accepted job is listed once")
    L.check_stop(srv)
    print("store after the final stop: %s" % (store_counts(srv.data_dir),), flush=True)


if __name__ == "__main__":
    L.run_suite(main)
