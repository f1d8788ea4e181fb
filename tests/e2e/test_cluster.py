# test_cluster.py: three replicas on one PostgreSQL database and one data directory (label pg;
# with GPURED_TEST_DEVICE=gpu, replicas with GPUs), as a Deployment with replicas: 3 runs them. What one replica accepted reads the same
# through the others (jobs, lists, datasets and the jobs on them). A replica killed with -9 while
# it holds a running job and a queue of others loses none of them: once its lease runs out the
# survivors claim and run them, each ends succeeded with the right answer, one final state each,
# and no dataset file lacks its row. A job queued on one replica is canceled through another, and a
# ?wait= through another replica ends when the job does (LISTEN/NOTIFY). A replica stopped with SIGTERM hands its queued jobs back at
# once: the others finish them while its own running job still runs. Jobs sent to a replica whose
# device is far behind are offered through the store, and the free replicas run them. A run
# fenced out (its replica paused past its lease) keeps no result.
import os
import random
import signal
import struct
import threading
import time

import e2e_lib as L
from e2e_lib import CHECK

LEASE = "2"


def replicas(n):
    """n replicas on one new database, started at once: their schema migrations meet (an advisory
    lock makes one of them apply each step). All but the last offer nothing for load
    (--offer-after 0): the scenarios that queue jobs behind a long one on replica 0 or 1 need them
    to stay there. The last offers as by default (offered)."""
    keep = {"GPURED_LEASE": LEASE, "GPURED_OFFER_AFTER": "0"}
    first = L.Server(name="replica-0", env=keep)
    shared = {"GPURED_STORE": first.env["GPURED_STORE"], "GPURED_LEASE": LEASE}
    rs = [first] + [L.Server(data_dir=first.data_dir, name="replica-%d" % k, env=dict(shared, **keep))
                    for k in range(1, n - 1)] + [L.Server(data_dir=first.data_dir, name="replica-%d" % (n - 1),
                                                          env=shared)]
    threads = [threading.Thread(target=r.start) for r in rs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    CHECK.ok(all(r.alive() and r.port for r in rs), "%d replicas started at once on a new database" % n)
    return rs


def small_jobs(rng, n):
    out = []
    for _ in range(n):
        xs = [rng.randrange(-10**6, 10**6) for _ in range(rng.randrange(1, 300))]
        out.append(({"op": "sum", "dtype": "int64", "data": xs, "device": "cpu"}, sum(xs)))
    return out


def submit(srv, jobs):
    """Accepted ids -> expected sum."""
    answers = srv.batch([dict(method="POST", path="/v1/jobs", body=b) for b, _ in jobs], parallel=4)
    CHECK.eq([a.status for a in answers], [202] * len(jobs), "%s accepts every job" % srv.name)
    return {a.json()["id"]: want for (_, want), a in zip(jobs, answers) if a.status == 202}


def finish_through(srv, expect, what):
    """One ?wait= each, whichever replica holds the job: the store's notice of its change wakes
    a wait on another replica's job (LISTEN/NOTIFY)."""
    done = {}
    ids = sorted(expect)
    for jid, r in zip(ids, srv.batch([dict(path="/v1/jobs/%s?wait=60" % j, timeout=70) for j in ids], parallel=16)):
        job = r.json() if r.status == 200 else {}
        for _ in range(3):  # a ?wait= ends with the first change, which may be the claim's run
            if job.get("status") not in ("queued", "running"):
                break
            job = srv.get_json("/v1/jobs/%s?wait=60" % jid)
        CHECK.eq((job.get("status"), (job.get("result") or {}).get("value")), ("succeeded", expect[jid]),
                 "%s: job %s" % (what, jid))
        done[jid] = job
    return done


def listed(srv):
    """The replica ids GET /v1/devices through srv lists (each with its CPU)."""
    d = srv.get_json("/v1/devices")
    return sorted(x.get("replica") for x in d.get("replicas", []) if "cpu" in x), d.get("replica")


def cross_replica(rs, rng):
    a, b, c = rs
    ids = [listed(r)[1] for r in rs]
    CHECK.eq(len(set(ids)), 3, "three replicas, three ids (%r)" % ids)
    for r in rs:
        CHECK.eq(listed(r)[0], sorted(ids), "GET /v1/devices through %s lists every replica" % r.name)
    body, want = small_jobs(rng, 1)[0]
    r = a.req("POST", "/v1/jobs", body, {"Prefer": "wait=10"})
    CHECK.eq((r.status, r.json().get("result", {}).get("value")), (200, want), "a job through replica 0")
    jid = r.json()["id"]
    for other in (b, c):
        g = other.req("GET", "/v1/jobs/" + jid)
        CHECK.eq((g.status, g.json().get("result")), (200, r.json().get("result")), "the job read through %s" % other.name)
        ids = [j["id"] for j in other.get_json("/v1/jobs?limit=10")["jobs"]]
        CHECK.ok(jid in ids, "listed by %s" % other.name)
    values = [rng.randrange(-1000, 1000) for _ in range(1000)]
    up = b.req("POST", "/v1/datasets?dtype=int32&shape=1000", b"".join(v.to_bytes(4, "little", signed=True) for v in values),
               {"Content-Type": "application/octet-stream"})
    CHECK.eq(up.status, 201, "a dataset through replica 1")
    ds = up.json().get("id", "d_0")
    r = c.req("POST", "/v1/jobs", {"op": "max", "dataset": ds, "device": "cpu"}, {"Prefer": "wait=10"})
    CHECK.eq((r.status, r.json().get("result", {}).get("value")), (200, max(values)),
             "a job through replica 2 on replica 1's dataset")
    CHECK.eq(a.req("GET", "/v1/datasets/" + ds).json().get("sha256"), up.json().get("sha256"),
             "the dataset read through replica 0")


def burst(rs, rng):
    """The three at once, as a load balancer spreads a burst: every job accepted, every id distinct
    (each replica's ids are a residue of their own, common/id.c)."""
    work = [small_jobs(random.Random(k), 150) for k in range(len(rs))]
    got = [None] * len(rs)

    def one(k):
        got[k] = submit(rs[k], work[k])

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(rs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [j for g in got for j in g]
    CHECK.eq(len(set(ids)), 150 * len(rs), "distinct ids from the three replicas")
    expect = {k: v for g in got for k, v in g.items()}
    finish_through(rs[0], expect, "a burst through all three")


def offered(rs, rng):
    """Work goes where a device is free: replica 2's CPU runs a long job, so a job sent to it would
    wait longer than the trip through the store costs (5 ms by default). The jobs sent after it are
    offered through the store, and replicas 0 and 1 claim and run them while replica 2's long job
    still runs. A wait through replica 2 on such a job ends with its final state from another."""
    a = rs[2]
    names = {listed(r)[1]: r.name for r in rs}
    # long, and few jobs behind it: once it ends replica 2 may claim what is still offered itself,
    # and on loaded CI cores the claims of 80 jobs outlasted a 6 s one
    blocker = L.blocker(a, 10)
    expect = submit(a, small_jobs(rng, 8))  # offered, but for any sent before the long job started
    more = small_jobs(rng, 16)
    extra = submit(a, more)
    body, want = small_jobs(rng, 1)[0]
    r = a.req("POST", "/v1/jobs", body, {"Prefer": "wait=30"}, timeout=40)
    job = r.json()
    CHECK.eq((r.status, job.get("status"), (job.get("result") or {}).get("value")), (200, "succeeded", want),
             "a job sent to the busy replica with Prefer: wait ends with its final state, run elsewhere")
    CHECK.ok(names.get(job.get("replica")) in ("replica-0", "replica-1"),
             "it ran on replica 0 or 1 (%r)" % names.get(job.get("replica")))
    done = finish_through(a, extra, "jobs offered by the busy replica")
    ran = {names.get(j.get("replica")) for j in done.values()}
    CHECK.ok(ran and ran <= {"replica-0", "replica-1"}, "replicas 0 and 1 ran the offered jobs (%r)" % sorted(ran))
    bench = a.get_json("/v1/jobs/%s?wait=60" % blocker.json()["id"])
    last = max(j.get("finished_at") or "" for j in done.values())
    CHECK.ok(bench.get("status") == "running" or last < (bench.get("finished_at") or ""),
             "they ended before replica 2's long job did")
    CHECK.ok(any("offered to any replica" in line for line in a.log), "replica 2 says it offered them")
    finish_through(a, expect, "the jobs sent first")
    rows = L.store_rows(a, "SELECT count(*) FROM jobs WHERE id IN (%s) AND status = 'succeeded' AND epoch = 2"
                        % ",".join("'%s'" % j for j in extra))
    CHECK.eq(rows, [("%d" % len(extra),)], "each offered job claimed once (epoch 2) and stored succeeded once")


def canceled_elsewhere(rs, rng):
    """A job queued on replica 0 canceled through replica 1: replica 0, asked, cancels it, and it
    is canceled everywhere. The job replica 0 runs meanwhile cannot be canceled through replica 1
    either (409, as through replica 0), and ends with its result."""
    a, b, c = rs
    blocker = L.blocker(a, 8)  # long: on loaded cores a 3 s one ended before the cancel through replica 1
    body, _ = small_jobs(rng, 1)[0]
    jid = a.req("POST", "/v1/jobs", body).json()["id"]
    r = b.req("DELETE", "/v1/jobs/" + jid)
    CHECK.eq((r.status, r.json().get("status")), (200, "canceled"), "a queued job canceled through another replica")
    deadline = time.monotonic() + 5  # the log is read on a thread of its own
    while not any(jid in line and "as another replica asked" in line for line in a.log) and time.monotonic() < deadline:
        time.sleep(0.05)
    CHECK.ok(any(jid in line and "as another replica asked" in line for line in a.log),
             "replica 0, which held it, canceled it")
    running = b.req("DELETE", "/v1/jobs/" + blocker.json()["id"])
    if L.check_problem("a running job canceled through another replica", running, 409):
        CHECK.ok("running" in running.json().get("detail", ""), "it says the job runs: %r" % running.json())
    done = a.get_json("/v1/jobs/%s?wait=60" % blocker.json()["id"])
    CHECK.eq(done.get("status"), "succeeded", "the running job, asked to cancel through another replica, ends")
    for srv in rs:
        CHECK.eq(srv.get_json("/v1/jobs/" + jid).get("status"), "canceled", "canceled as read through %s" % srv.name)


def waited_elsewhere(rs, rng):
    """A wait through replica 1 on a job replica 0 holds ends when the job does, not at once."""
    a, b = rs[0], rs[1]
    blocker = L.blocker(a, 2)
    body, want = small_jobs(rng, 1)[0]
    jid = a.req("POST", "/v1/jobs", body).json()["id"]
    t0 = time.monotonic()
    r = b.req("GET", "/v1/jobs/%s?wait=30" % jid, timeout=40)
    took = time.monotonic() - t0
    CHECK.eq((r.status, r.json().get("status"), (r.json().get("result") or {}).get("value")), (200, "succeeded", want),
             "a wait through another replica answers with the final state (after %.2f s)" % took)
    CHECK.eq(a.get_json("/v1/jobs/" + blocker.json()["id"]).get("status"), "succeeded",
             "the job it waited behind ended first")


def dataset_in_use_elsewhere(rs, rng):
    """A dataset a job queued on replica 0 reads cannot be deleted through replica 1 (409, as
    through replica 0); once the job ended it can."""
    a, b = rs[0], rs[1]
    values = [rng.randrange(-1000, 1000) for _ in range(100)]
    up = a.req("POST", "/v1/datasets?dtype=int32&shape=100", b"".join(v.to_bytes(4, "little", signed=True)
                                                                      for v in values),
               {"Content-Type": "application/octet-stream"})
    ds = up.json().get("id", "d_0")
    blocker = L.blocker(a, 6)  # long: on loaded CI cores a 2 s one once ended before the DELETE came
    jid = a.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds, "device": "cpu"}).json()["id"]
    CHECK.eq(a.get_json("/v1/jobs/" + jid).get("status"), "queued", "the job on it waits behind a long one")
    gone = b.req("DELETE", "/v1/datasets/" + ds)
    if L.check_problem("a dataset deleted through replica 1 while replica 0 has a job on it queued", gone, 409):
        CHECK.ok("other replicas" in gone.json().get("detail", ""), "it says where: %r" % gone.json())
    finish_through(a, {jid: sum(values)}, "the job on it")
    CHECK.eq(b.req("DELETE", "/v1/datasets/" + ds).status, 204, "deleted through replica 1 once the job ended")
    a.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"])


def listener_lost(rs, rng):
    """A wait through replica 1 on replica 0's job, while the replicas' listening connections are
    killed over and over until the job ended: the end's notice is missed, and replica 1, its
    listener back, reads the store again rather than wait out the 30 s."""
    a, b = rs[0], rs[1]
    blocker = L.blocker(a, 2)
    body, want = small_jobs(rng, 1)[0]
    jid = a.req("POST", "/v1/jobs", body).json()["id"]
    out = {}
    waiter = threading.Thread(target=lambda: out.update(r=b.req("GET", "/v1/jobs/%s?wait=30" % jid, timeout=40)))
    waiter.start()
    time.sleep(0.3)  # parked on its stand-in
    deadline = time.monotonic() + 30
    kill = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN gpured_jobs%'"
    while time.monotonic() < deadline and L.store_rows(a, "SELECT status FROM jobs WHERE id = '%s'" % jid) != [
            ("succeeded",)]:
        L.store_rows(a, kill)
        time.sleep(0.05)
    L.store_rows(a, kill)  # the notice of the end, if a listener was back for it
    t0 = time.monotonic()
    waiter.join()
    r = out.get("r")
    CHECK.ok(r is not None and r.status == 200 and r.json().get("status") == "succeeded",
             "the wait answered with the end (%r)" % (r.json() if r is not None else None))
    CHECK.ok(time.monotonic() - t0 < 20, "within a reconnect, not at the wait's end (%.1f s)" % (time.monotonic() - t0))
    a.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"])


def one_key(rs, rng):
    """One Idempotency-Key sent through two replicas at once makes one job: the second is told
    the first is under way (409), or, once it is stored, answered with it."""
    a, b = rs[0], rs[1]
    blocker = L.blocker(a, 8)  # the waited job stays under way on replica 0 past the second send, on loaded cores too
    body, want = small_jobs(rng, 1)[0]
    hdrs = {"Idempotency-Key": "one-key-%d" % rng.randrange(1 << 30), "Prefer": "wait=30"}
    out = {}

    def send(srv):
        out[srv.name] = srv.req("POST", "/v1/jobs", body, hdrs, timeout=60)

    first = threading.Thread(target=send, args=(a,))
    first.start()
    time.sleep(0.3)  # replica 0 has the key now
    send(b)
    first.join()
    CHECK.eq(out[a.name].status, 200, "the first request, through replica 0, waits for its job")
    if L.check_problem("the same key through replica 1 meanwhile", out[b.name], 409):
        CHECK.ok("another replica" in out[b.name].json().get("detail", ""), "it says where: %r" % out[b.name].json())
    again = b.req("POST", "/v1/jobs", body, hdrs, timeout=60)
    CHECK.eq((again.status, again.json().get("id")), (200, out[a.name].json().get("id")),
             "the key retried through replica 1 once stored: the same job")
    a.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"])


def stray(rs, rng):
    """A job the store says replica 2 holds but replica 2 never had (as after a claim whose answer
    the connection lost): replica 2 lets it go at its next renewal, and it runs."""
    a, c = rs[0], rs[2]
    blocker = L.blocker(a, 8)  # long: on loaded CI cores a 3 s one ended before the job was made a stray
    body, want = small_jobs(rng, 1)[0]
    jid = a.req("POST", "/v1/jobs", body).json()["id"]
    owner = listed(c)[1]
    # a lease well ahead, as a claim gives: no replica may take the job when a short one runs out
    # before replica 2's renewal looks (CI once saw replica 1 claim it 10 ms before the let-go)
    made = L.store_rows(a, "UPDATE jobs SET owner = '%s', epoch = epoch + 1, lease = extract(epoch FROM "
                           "clock_timestamp()) + 30 WHERE id = '%s' AND status = 'queued' RETURNING id" % (owner, jid))
    CHECK.eq(made[:1], [(jid,)], "the job, still queued behind the benchmark, is made replica 2's in the store")
    job = finish_through(c, {jid: want}, "a job held in the store only")
    # the log is read on a thread of its own: give the line a moment to arrive
    deadline = time.monotonic() + 5
    while not any("let go to be claimed" in line for line in c.log) and time.monotonic() < deadline:
        time.sleep(0.05)
    CHECK.ok(job and any("let go to be claimed" in line for line in c.log), "replica 2 let the stray job go")
    a.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"])


def refused_twice(rs, rng):
    """A final state the store refuses for a passing reason (a deadlock, a timeout) is written
    again: the job ends succeeded, where it had stayed queued in the store and held for ever. Two
    refusals: its batch's, then its write's alone."""
    a = rs[0]
    blocker = L.blocker(a, 3)
    body, want = small_jobs(rng, 1)[0]
    jid = a.req("POST", "/v1/jobs", body).json()["id"]
    L.store_rows(a, "CREATE SEQUENCE refusals; CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$BEGIN IF nextval('refusals') <= 2 THEN RAISE EXCEPTION 'refused by the test'; END IF; "
                    "RETURN NEW; END$$; CREATE TRIGGER refuse BEFORE UPDATE OF status ON jobs FOR EACH ROW WHEN "
                    "(NEW.id = '%s' AND NEW.status = 'succeeded') EXECUTE FUNCTION refuse()" % jid)
    finish_through(a, {jid: want}, "a final state the store refused twice")
    CHECK.eq(L.store_rows(a, "SELECT status, (SELECT last_value FROM refusals) FROM jobs WHERE id = '%s'" % jid),
             [("succeeded", "3")], "stored succeeded at the third write")
    L.store_rows(a, "DROP TRIGGER refuse ON jobs; DROP FUNCTION refuse(); DROP SEQUENCE refusals")
    a.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"])


def paused(rs, rng):
    """Replica 0 paused (SIGSTOP) past its lease: the others claim and run its queued jobs. Resumed,
    it runs none of them: its workers wait for its next renewal, which finds them claimed away."""
    a, b = rs[0], rs[1]
    blocker = L.blocker(a, 3)
    expect = submit(a, small_jobs(rng, 10))  # queued behind it, held by replica 0
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        finish_through(b, expect, "while replica 0 was paused")
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    a.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"])
    deadline = time.monotonic() + 10  # replica 0's next renewal, and its log read on a thread of its own
    while not any("another replica claimed while this one's lease" in line for line in a.log) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    ran_again = [j for j in expect if any(j in line and "running on" in line for line in a.log)]
    CHECK.eq(ran_again, [], "replica 0, resumed, ran none of the jobs the others had claimed")
    CHECK.ok(any("another replica claimed while this one's lease" in line for line in a.log),
             "replica 0 says it dropped them")


def kept_fenced(rs, rng):
    """Replica 0 paused (SIGSTOP) while it runs a product, which is always kept as a dataset;
    another replica claims the job once the lease runs out and keeps its own. Resumed, replica 0
    finishes its run, but its result's row is fenced out as its final state is: the job names
    the claimer's dataset, and no other dataset or file of it is ever made."""
    a, b = rs[0], rs[1]
    n = 2048  # a CPU product of seconds: still running when replica 0 is paused
    raw = struct.pack("<%dd" % (n * n), *(rng.uniform(-1, 1) for _ in range(n * n)))
    up = a.req("POST", "/v1/datasets?dtype=float64&shape=%d,%d" % (n, n), raw, {"Content-Type": "application/octet-stream"})
    CHECK.eq(up.status, 201, "an operand uploaded")
    ds = up.json()["id"]
    before = {r[0] for r in L.store_rows(a, "SELECT id FROM datasets")}
    jid = a.req("POST", "/v1/jobs", {"op": "matmul", "dtype": "float64", "a": {"dataset": ds}, "b": {"dataset": ds},
                                     "device": "cpu"}).json()["id"]
    deadline = time.monotonic() + 30
    while a.get_json("/v1/jobs/" + jid)["status"] == "queued" and time.monotonic() < deadline:
        time.sleep(0.02)
    running = a.get_json("/v1/jobs/" + jid)["status"] == "running"
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        CHECK.ok(running, "replica 0 was running the product when it was paused")
        deadline = time.monotonic() + 30
        while L.store_rows(b, "SELECT epoch FROM jobs WHERE id = '%s'" % jid)[0][0] == "1" and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    job = b.get_json("/v1/jobs/%s?wait=120" % jid)
    for _ in range(3):
        if job.get("status") not in ("queued", "running"):
            break
        job = b.get_json("/v1/jobs/%s?wait=120" % jid)
    CHECK.ok(job.get("status") == "succeeded" and job.get("replica") not in (None, a.get_json("/v1/devices")["replica"]),
             "the product ran again on the replica that claimed it (%s, %s)" % (job.get("status"), job.get("replica")))
    deadline = time.monotonic() + 30  # replica 0's run ends, its result fenced out
    while not any(jid in line and "claimed it while it ran here" in line for line in a.log) and time.monotonic() < deadline:
        time.sleep(0.2)
    CHECK.ok(any(jid in line and "claimed it while it ran here" in line for line in a.log),
             "replica 0 says its result of %s was fenced out" % jid)
    kept = {r[0] for r in L.store_rows(a, "SELECT id FROM datasets")} - before
    CHECK.eq(kept, {(job.get("result") or {}).get("dataset")}, "the one dataset made is the claimer's, the job's")
    no_orphans(a)


def killed(rs, rng):
    a, b, c = rs
    blocker = L.blocker(a, 6)
    CHECK.eq(blocker.status, 202, "a long job holds replica 0's CPU")
    expect = submit(a, small_jobs(rng, 30))  # queued behind it, held by replica 0
    gone = listed(a)[1]
    a.kill9()
    t0 = time.monotonic()
    done = finish_through(b, expect, "after replica 0 was killed")
    print("the survivors finished the killed replica's %d queued jobs %.1f s after the kill (lease %s s)"
          % (len(expect), time.monotonic() - t0, LEASE), flush=True)
    bench = b.req("GET", "/v1/jobs/%s?wait=60" % blocker.json()["id"]).json()
    for _ in range(120):
        if bench.get("status") in L.TERMINAL:
            break
        time.sleep(0.5)
        bench = b.req("GET", "/v1/jobs/" + blocker.json()["id"]).json()
    CHECK.eq(bench.get("status"), "succeeded", "the job running on the killed replica ran again elsewhere")
    CHECK.ok(gone not in listed(b)[0], "the killed replica is no longer listed once its lease ran out")
    rows = L.store_rows(b, "SELECT id, status, owner, epoch FROM jobs WHERE id IN (%s)"
                        % ",".join("'%s'" % j for j in list(expect) + [blocker.json()["id"]]))
    CHECK.eq(len(rows), len(expect) + 1, "one row each")
    CHECK.ok(all(r[1] == "succeeded" and int(r[3]) >= 2 for r in rows),
             "each claimed anew (epoch 2 or more) and succeeded once")
    return done


def handed_back(rs, rng):
    b, c = rs[1], rs[2]
    b_id = listed(b)[1]
    blocker = L.blocker(b, 8)
    expect = submit(b, small_jobs(rng, 20))
    b.proc.send_signal(15)
    done = finish_through(c, expect, "after replica 1 got SIGTERM")
    rc = b.proc.wait(120)
    CHECK.eq(rc, 0, "replica 1 exits 0 once its running job is done")
    bench = c.get_json("/v1/jobs/" + blocker.json()["id"])
    last = max(j.get("finished_at") or "" for j in done.values())
    CHECK.ok(bench.get("finished_at") and last < bench["finished_at"],
             "the queued jobs finished elsewhere before replica 1's running job did (%s < %s)"
             % (last, bench.get("finished_at")))
    CHECK.ok(any("handed back" in line for line in b.log), "replica 1 says it handed its queued jobs back")
    CHECK.ok(b_id not in listed(c)[0], "a replica stopped leaves the list at once")


def no_orphans(srv):
    rows = {r[0] for r in L.store_rows(srv, "SELECT id FROM datasets")}
    files = {f[:-4] for f in os.listdir(os.path.join(srv.data_dir, "datasets")) if f.endswith(".bin")}
    CHECK.eq(sorted(files - rows), [], "no dataset file without its row")
    CHECK.eq(sorted(rows - files), [], "no dataset row without its file")


def main():
    if L.STORE != "postgresql":
        raise L.Skip("replicas share a PostgreSQL store; this suite runs with GPURED_TEST_STORE=postgresql")
    rng = random.Random(7)
    rs = replicas(3)
    if L.DEVICE == "gpu" and not rs[2].get_json("/v1/devices").get("gpus"):
        for r in rs:
            r.stop()
        raise L.Skip("GPURED_TEST_DEVICE=gpu: replicas with GPUs, and this server lists none")
    cross_replica(rs, rng)
    burst(rs, rng)
    offered(rs, rng)
    canceled_elsewhere(rs, rng)
    waited_elsewhere(rs, rng)
    dataset_in_use_elsewhere(rs, rng)
    listener_lost(rs, rng)
    one_key(rs, rng)
    stray(rs, rng)
    refused_twice(rs, rng)
    paused(rs, rng)
    kept_fenced(rs, rng)
    killed(rs, rng)
    handed_back(rs, rng)
    CHECK.ok(not any("offered to any replica" in line for line in rs[0].log + rs[1].log),
             "replicas 0 and 1 (--offer-after 0) offered no job, whatever waited behind their long ones")
    no_orphans(rs[2])
    L.check_stop(rs[2])


L.run_suite(main)
