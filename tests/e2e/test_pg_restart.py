# test_pg_restart.py: PostgreSQL restarted under load (label pg only). Clients keep submitting
# jobs while the cluster stops (immediate: as a crash) and starts again: /readyz says the store
# is not answering while it is down and ready once it is back, a read then is 503 with
# Retry-After and no answer names SQL, no request is answered 2xx that the store did not keep,
# and every acknowledged job ends succeeded with the right answer, also after gpured restarts.
# Then a big batch's one transaction is cut by the crash half way: the batch is stored whole,
# once, or not at all, as its answer says.
import random
import threading
import time

import e2e_lib as L
from e2e_lib import CHECK

CLIENTS = 6
BATCH = 50000  # jobs: a commit long enough (a second or more) to be cut half way


def main():
    if L.STORE != "postgresql":
        raise L.Skip("test_pg_restart restarts PostgreSQL; it runs with GPURED_TEST_STORE=postgresql")
    srv = L.Server(env={"GPURED_QUEUE_CAPACITY": str(2 * BATCH)}).start()
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
    batch_cut(srv, cluster)
    L.check_stop(srv)


def count(srv, where="true"):
    return int(L.store_rows(srv, "SELECT count(*) FROM jobs WHERE " + where)[0][0])


def batch_cut(srv, cluster):
    """PostgreSQL stopped (immediate) while the writer inserts a batch of BATCH jobs in its one
    transaction. The writes wait for the store, so once it is back the batch is answered 202 and
    every job of it is stored once and ends right; if it is refused instead, none is stored."""
    before = count(srv)
    body = [{"op": "sum", "dtype": "int32", "data": [i, 1], "device": "cpu"} for i in range(BATCH)]
    answer = {}
    t = threading.Thread(target=lambda: answer.update(r=srv.req("POST", "/v1/jobs", body, may_fail=True, timeout=300)))
    t.start()
    inserting, deadline = False, time.time() + 60
    while not inserting and t.is_alive() and time.time() < deadline:
        inserting = L.store_rows(srv, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                      " AND query LIKE 'INSERT INTO jobs%' AND state <> 'idle'")[0][0] != "0"
    cluster.stop("immediate")
    CHECK.ok(inserting, "PostgreSQL stopped while the batch's insert was under way")
    time.sleep(1)
    cluster.restart()
    t.join()
    r = answer["r"]
    print("the batch cut half way was answered %d" % r.status, flush=True)
    if r.status != 202:
        CHECK.ok(r.status in (500, 503), "the cut batch: 202, or refused with 5xx: got %d %r" % (r.status, r.body[:200]))
        CHECK.eq(count(srv), before, "a refused batch leaves none of its jobs stored")
        return
    ids = [j["id"] for j in r.json()]
    CHECK.eq((len(ids), len(set(ids)), count(srv)), (BATCH, BATCH, before + BATCH),
             "the cut batch, answered 202 once the store was back, is stored whole and once")
    deadline = time.time() + 120
    while count(srv, "status <> 'succeeded'") and time.time() < deadline:
        time.sleep(0.2)
    values = dict(L.store_rows(srv, "SELECT id, doc::json->'result'->>'value' FROM jobs WHERE id >= '%s' AND id <= '%s'"
                                    % (min(ids), max(ids))))
    CHECK.eq([values.get(j) for j in ids], [str(i + 1) for i in range(BATCH)], "every job of it ends with its sum")


L.run_suite(main)
