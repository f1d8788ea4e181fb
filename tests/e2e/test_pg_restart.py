# test_pg_restart.py: PostgreSQL restarted under load (label pg only). Clients keep submitting
# jobs while the cluster stops (immediate: as a crash) and starts again: /readyz says the store
# is not answering while it is down and ready once it is back, a read then is 503 with
# Retry-After and no answer names SQL, no request is answered 2xx that the store did not keep,
# and every acknowledged job ends succeeded with the right answer, also after gpured restarts.
import random
import threading
import time

import e2e_lib as L
from e2e_lib import CHECK

CLIENTS = 6


def main():
    if L.STORE != "postgresql":
        raise L.Skip("test_pg_restart restarts PostgreSQL; it runs with GPURED_TEST_STORE=postgresql")
    srv = L.Server().start()
    cluster = L.pg_cluster()
    rng = random.Random(11)
    accepted, stop, refusals = {}, threading.Event(), []
    mu = threading.Lock()

    def client(k):
        r = random.Random(k)
        while not stop.is_set():
            jobs = []
            for _ in range(8):
                xs = [r.randrange(-1000, 1000) for _ in range(r.randrange(1, 200))]
                jobs.append(({"op": "sum", "dtype": "int64", "data": xs, "device": "cpu"}, sum(xs)))
            answers = srv.batch([dict(method="POST", path="/v1/jobs", body=b, may_fail=True, timeout=30) for b, _ in jobs])
            with mu:
                for (b, want), a in zip(jobs, answers):
                    if a.status in (200, 202):
                        accepted[a.json()["id"]] = want
                    elif a.status not in (0, 500, 503):
                        CHECK.ok(False, "a submission during the restart got %d: %r" % (a.status, a.body[:200]))
                    elif a.status:
                        refusals.append(a)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    before = len(accepted)
    cluster.stop("immediate")  # as a crash: transactions under way end unfinished
    down = srv.req("GET", "/readyz", may_fail=True)
    if L.check_problem("/readyz while PostgreSQL is down", down, 503):
        CHECK.ok("store" in down.json()["detail"], "it says the store: %r" % down.json()["detail"])
    listed = srv.req("GET", "/v1/jobs?limit=5", may_fail=True)
    if L.check_problem("a list while PostgreSQL is down", listed, 503):
        CHECK.ok(listed.headers.get("retry-after"), "with Retry-After (%r)" % listed.headers)
    time.sleep(rng.uniform(0.5, 2.0))
    cluster.restart()
    deadline = time.time() + 30
    while srv.req("GET", "/readyz", may_fail=True).status != 200 and time.time() < deadline:
        time.sleep(0.1)
    CHECK.eq(srv.req("GET", "/readyz").status, 200, "ready again once PostgreSQL is back")
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join()
    CHECK.ok(before > 0 and len(accepted) > before, "jobs accepted before (%d) and after (%d) the restart"
             % (before, len(accepted) - before))
    sql = [a for a in refusals + [listed] if any(w in a.body.decode("utf-8", "replace")
                                                 for w in ("SELECT ", "INSERT ", "UPDATE ", "DELETE "))]
    CHECK.eq(sql, [], "no answer names the store's SQL")

    def all_right(what):
        ids = sorted(accepted)
        for jid, r in zip(ids, srv.batch([dict(path="/v1/jobs/%s?wait=30" % j, timeout=40) for j in ids])):
            job = r.json() if r.status == 200 else {}
            CHECK.eq((job.get("status"), (job.get("result") or {}).get("value")), ("succeeded", accepted[jid]),
                     "%s: acknowledged job %s" % (what, jid))

    all_right("after the PostgreSQL restart")
    L.check_stop(srv)
    srv.start()
    all_right("after gpured restarts too")
    L.check_stop(srv)


L.run_suite(main)
