# test_events.py: GET /v1/events, Server-Sent Events of job and dataset changes, on the real
# server. A stream gets each job's queued and final events, in seq order, with ids that resume,
# and between them a running event told live (no id, never replayed), each with its op and device,
# a failure's with its problem;
# ?job=, ?status= and ?kind= filter; ?heartbeat= sends keep-alive comments; bad parameters are
# 400 naming the field. Streams end when gpured stops; after a restart, Last-Event-ID replays
# exactly the events after it (they are in the store) and the stream goes on with new ones.
# With tokens a tenant sees only its own events, numbered by its own count, and an admin everyone's. Many streams opened
# and dropped at once leave the server serving, and it still stops promptly.
import json
import os
import signal
import socket
import struct
import tempfile
import threading
import time

import e2e_lib as L
from e2e_lib import CHECK

ALICE, BOB, ROOT = "a1" * 16, "b2" * 16, "r00t" * 8


class Stream:
    """One event stream, read on a thread of its own: the stored events as (id, event, data), the
    running events told live (no id) as (event, data) in runs, and comments. A plain HTTP/1.0 socket (the body is the stream itself, unchunked), so close() can shut it
    down under the reader."""

    def __init__(self, srv, query="", headers=None):
        self.sock = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        head = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
        self.sock.sendall(("GET /v1/events%s HTTP/1.0\r\nHost: gpured\r\n%s\r\n" % (query, head)).encode())
        self.file = self.sock.makefile("rb")
        self.status = int(self.file.readline().split()[1])
        CHECK.eq(self.status, 200, "GET /v1/events%s answers 200" % query)
        while self.file.readline() not in (b"\r\n", b""):
            pass
        self.events, self.runs, self.comments, self.ended, self.last_id = [], [], 0, False, None
        self.order = []  # every event's data, stored or told live, as they came
        self.lock = threading.RLock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        fields = {}
        try:
            for raw in self.file:
                line = raw.decode().rstrip("\n")
                if line.startswith(":"):
                    with self.lock:
                        self.comments += 1
                elif line:
                    k, _, v = line.partition(": ")
                    fields[k] = v
                    if k == "id":  # as a browser keeps it: the id of any block, events or not
                        with self.lock:
                            self.last_id = v
                elif "data" in fields:
                    data = json.loads(fields["data"])
                    with self.lock:
                        self.order.append(data)
                        if data.get("status") == "running":
                            CHECK.ok("id" not in fields and "seq" not in data, "a running event has no id: %r" % fields)
                            self.runs.append((fields.get("event"), data))
                        else:
                            self.events.append((fields.get("id"), fields.get("event"), data))
                    fields = {}
                else:
                    fields = {}
        except (OSError, ValueError):
            pass
        self.ended = True

    def wait(self, pred, what, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if pred(self):
                    return True
            time.sleep(0.05)
        return CHECK.ok(False, "in %ds: %s (got %d events, %d comments)" % (timeout, what, len(self.events), self.comments))

    def all(self):
        with self.lock:
            return [(e[1], e[2]["id"], e[2]["status"]) for e in self.events]

    def jobs(self):
        with self.lock:
            return [(e[2]["id"], e[2]["status"]) for e in self.events if e[1] == "job"]

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def submit(srv, n, headers=None):
    ids = []
    for i in range(n):
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [i, 1], "device": L.DEVICE}, headers)
        CHECK.eq(r.status, 202, "job %d accepted" % i)
        ids.append(r.json().get("id"))
    for i in ids:  # polled: a ?wait= on a job that has ended already waits it out
        for _ in range(600):
            if srv.req("GET", "/v1/jobs/%s" % i, headers=headers).json().get("status") in L.TERMINAL:
                break
            time.sleep(0.05)
    return ids


def both(ids):
    return [(i, s) for i in ids for s in ("queued", "succeeded")]


def streams(srv):
    every = Stream(srv)
    one = None
    ids = submit(srv, 4)
    every.wait(lambda s: len(s.jobs()) >= 8, "queued and succeeded for each of 4 jobs")
    CHECK.eq(sorted(every.jobs()), sorted(both(ids)), "each job's queued and succeeded events, nothing else")
    seqs = [int(e[0]) for e in every.events]
    CHECK.ok(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "ids rise: %r" % seqs)
    CHECK.eq([e[2]["seq"] for e in every.events], seqs, "data.seq is the event's id")
    for i in ids:
        order = [s for j, s in every.jobs() if j == i]
        CHECK.eq(order, ["queued", "succeeded"], "job %s: queued before succeeded" % i)
    schema = srv.get_json("/openapi.json")["components"]["schemas"]["Event"]  # what the spec promises
    props = schema["properties"]
    for _, kind, ev in every.events:
        CHECK.eq(sorted(ev), sorted(schema["required"] + ["seq", "op", "device"]), "a stored job event's members: the "
                 "Event schema's required, its seq, op and device")
        CHECK.ok(set(ev) <= set(props), "each of them in the schema: %r" % sorted(ev))
        CHECK.ok(ev["op"] == "sum" and ev["device"].startswith(L.DEVICE), "the job's op and device: %r" % ev)
        CHECK.ok(ev.get("kind") == kind and kind in props["kind"]["enum"] and ev.get("status") in props["status"]["enum"],
                 "kind and status from the schema's enums: %r" % ev)
        CHECK.ok(isinstance(ev.get("seq"), int) and isinstance(ev.get("at"), str) and L.RFC3339.match(ev["at"]),
                 "seq an integer, at RFC 3339: %r" % ev)

    one = Stream(srv, "?job=%s" % ids[0])
    done = Stream(srv, "?status=succeeded&kind=job&heartbeat=1")
    datasets = Stream(srv, "?kind=dataset")
    more = submit(srv, 2)
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=2", b"\1\0\0\0\2\0\0\0", {"Content-Type": "application/octet-stream"})
    CHECK.eq(r.status, 201, "a dataset")
    ds = r.json().get("id")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/%s" % ds).status, 204, "and its delete")
    done.wait(lambda s: len(s.jobs()) >= 2 and s.comments >= 1, "the succeeded events, and a keep-alive within a second")
    CHECK.eq(done.jobs(), [(i, "succeeded") for i in more], "?status=succeeded&kind=job: only those")
    datasets.wait(lambda s: len(s.events) >= 2, "the dataset's two events")
    CHECK.eq([(e[1], e[2]["id"], e[2]["status"]) for e in datasets.events], [("dataset", ds, "created"), ("dataset", ds, "deleted")],
             "?kind=dataset: created, then deleted")
    CHECK.eq(sorted(datasets.events[0][2]), sorted(schema["required"] + ["seq"]), "a dataset event has no op or device")
    time.sleep(0.5)
    CHECK.eq(one.jobs(), [], "?job= of a job that ended before the stream began: nothing new")
    for s in (one, done, datasets):
        s.close()

    # a stream that never sees an event still knows where it is: its opening and its keep-alives
    # carry its position, so a reconnect resumes there, not before
    quiet = Stream(srv, "?job=j_0000000000000000&heartbeat=1")
    quiet.wait(lambda s: s.last_id is not None, "the opening's id")
    CHECK.eq(quiet.last_id, every.events[-1][0], "a new stream's opening id is the newest event's")
    late = submit(srv, 1)
    every.wait(lambda s: len(s.jobs()) >= len(ids + more) * 2 + 2, "the late job's events")
    quiet.wait(lambda s: s.last_id == every.events[-1][0], "a keep-alive carrying the newest position", 5)
    CHECK.eq(quiet.jobs(), [], "and no event of the job it does not watch")
    quiet.close()
    more += late

    for query, field in (("?status=runs", "status"), ("?status=done", "status"), ("?kind=jobs", "kind"), ("?heartbeat=0", "heartbeat"),
                         ("?job=d_1", "job"), ("?after=-3", "after")):
        r = srv.req("GET", "/v1/events" + query)
        L.check_problem("GET /v1/events%s" % query, r, 400, field)
    r = srv.req("GET", "/v1/events", headers={"Last-Event-ID": "x"})
    L.check_problem("a Last-Event-ID that is no number", r, 400, "Last-Event-ID")
    return every, ids + more


def running(srv):
    """A job's running event comes between its queued event and its end, told live: no id, so the
    stream's position stays, and never replayed. Each event names the job's op and device, and a
    failed job's end carries its problem. A job held behind a blocker on the CPU fails when it
    runs, its dataset's file gone."""
    every, runs = Stream(srv, "?kind=job"), Stream(srv, "?status=running")
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=4", struct.pack("<4i", 1, 2, 3, 4),
                {"Content-Type": "application/octet-stream"})
    CHECK.eq(r.status, 201, "a dataset")
    ds = r.json().get("id")
    blocker = L.blocker(srv, 2)
    CHECK.eq(blocker.status, 202, "a benchmark holding the CPU")
    # gone before the job is posted (a job reads its dataset's file when it runs): removed after,
    # a blocker sized short on a loaded machine could let the job run first
    os.remove(os.path.join(srv.data_dir, "datasets", ds + ".bin"))
    r = srv.req("POST", "/v1/jobs", {"op": "max", "dtype": "int32", "dataset": ds, "device": "cpu"})
    CHECK.eq(r.status, 202, "a job on the dataset, queued behind it")
    held, doomed = blocker.json()["id"], r.json()["id"]
    every.wait(lambda s: (doomed, "failed") in s.jobs(), "the job's end")
    runs.wait(lambda s: len(s.runs) >= 2, "both jobs' running events on ?status=running")
    CHECK.eq(runs.events, [], "?status=running: no stored event")
    time.sleep(0.3)
    for job, op, end in ((held, "sum", "succeeded"), (doomed, "max", "failed")):
        with every.lock:
            told = [d for d in every.order if d["id"] == job]
        CHECK.eq([d["status"] for d in told], ["queued", "running", end], "job %s: queued, running, its end, in order" % job)
        for d in told:
            CHECK.eq((d["kind"], d["op"], d["device"], d["tenant"]), ("job", op, "cpu", "default"),
                     "job %s's %s event: its kind, op, device and tenant" % (job, d["status"]))
            CHECK.ok(L.RFC3339.match(d.get("at", "")), "and when: %r" % d)
        CHECK.eq("error" in told[2], end == "failed", "job %s: a problem in its end's event when it failed" % job)
    problem = srv.get_json("/v1/jobs/" + doomed)["error"]
    CHECK.ok(isinstance(problem, dict) and "detail" in problem, "the doomed job failed with a problem: %r" % problem)
    CHECK.eq(told[2]["error"], problem, "the failed event's problem is the job's")
    again = Stream(srv, "?kind=job&after=%s" % every.events[0][0])
    again.wait(lambda s: len(s.events) >= 3, "a resume replays the stored events")
    time.sleep(0.3)
    CHECK.eq(again.runs, [], "and no running event: they are not stored")
    for s in (every, runs, again):
        s.close()


def resume(srv, every, ids):
    """A stream ends with gpured; the restarted one replays after Last-Event-ID, then goes on."""
    seen = every.all()
    last, mid = every.events[-1][0], every.events[3][0]
    CHECK.eq(srv.stop(), 0, "gpured stops with streams open")
    every.wait(lambda s: s.ended, "the open stream ends at the stop")
    srv.start()
    again = Stream(srv, headers={"Last-Event-ID": mid})
    want = seen[4:]
    again.wait(lambda s: len(s.events) >= len(want), "the events after Last-Event-ID %s" % mid)
    CHECK.eq(again.all()[:len(want)], want, "replayed from the store: exactly those after %s" % mid)
    new = submit(srv, 1)
    again.wait(lambda s: len(s.events) >= len(want) + 2, "then the new job's")
    CHECK.eq(again.jobs()[-2:], both(new), "the stream goes on with new events")
    CHECK.eq(len(again.events), len(want) + 2, "and nothing else")
    CHECK.ok(int(again.events[len(want)][0]) > int(last), "new ids come after the old ones")
    after = Stream(srv, "?after=%s" % last)
    after.wait(lambda s: len(s.events) >= 2, "?after= as Last-Event-ID")
    CHECK.eq(after.jobs(), both(new), "?after= replays the same")
    for s in (again, after):
        s.close()


def churn(srv):
    """Many streams opened and dropped, some mid-event: the server goes on serving."""
    socks = []
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"GET /v1/events?heartbeat=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    submit(srv, 2)
    for s in socks:
        s.close()
    time.sleep(1.5)  # a heartbeat each: the dropped ones are found and freed
    CHECK.eq(srv.req("GET", "/readyz").status, 200, "ready after 40 streams came and went")
    live = Stream(srv)
    ids = submit(srv, 1)
    live.wait(lambda s: len(s.jobs()) >= 2, "a new stream still gets events")
    live.close()


def slots(srv):
    """Streams whose clients close their sockets give their connection slots back within a second
    or two, though no heartbeat (300 s) or event would have made the server write to them."""
    streams = [Stream(srv, "?heartbeat=300") for _ in range(20)]
    held = L.metric(srv, "gpured_connections_open")
    CHECK.ok(held >= 20, "20 open streams hold 20 connections (%d open)" % held)
    for s in streams:
        s.close()
    deadline = time.monotonic() + 3
    while L.metric(srv, "gpured_connections_open") > held - 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    CHECK.ok(L.metric(srv, "gpured_connections_open") <= held - 20, "their slots are free within 3 s of the clients closing")


def tenants():
    tmp = tempfile.mkdtemp(prefix="gpured-events-")
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write("alice %s\nbob %s\nops %s admin\n" % (ALICE, BOB, ROOT))
    srv = L.Server(args=["--tokens-file", path]).start()
    auth = lambda t: {"Authorization": "Bearer " + t}
    CHECK.eq(srv.req("GET", "/v1/events").status, 401, "no token: 401")
    a, admin = Stream(srv, headers=auth(ALICE)), Stream(srv, headers=auth(ROOT))
    mine, theirs = submit(srv, 1, auth(ALICE)), submit(srv, 1, auth(BOB))
    admin.wait(lambda s: len(s.jobs()) >= 4, "the admin sees both tenants' jobs")
    time.sleep(0.3)
    CHECK.eq(a.jobs(), both(mine), "alice sees her job's events only")
    CHECK.eq(sorted(admin.jobs()), sorted(both(mine) + both(theirs)), "the admin sees every tenant's")
    CHECK.eq({e[2]["tenant"] for e in admin.events}, {"alice", "bob"}, "each event names its tenant")
    for s in (a, admin):
        s.close()
    own_ids(srv, auth)
    # a token removed by a reload ends its open stream, as it fails every new request
    b = Stream(srv, headers=auth(BOB))
    with open(path, "w") as f:
        f.write("alice %s\nops %s admin\n" % (ALICE, ROOT))
    srv.proc.send_signal(signal.SIGHUP)
    b.wait(lambda s: s.ended, "bob's stream ends once his token is removed", timeout=5)
    CHECK.eq(srv.req("GET", "/v1/events", headers=auth(BOB)).status, 401, "and he cannot open another")
    L.check_stop(srv)


def own_ids(srv, auth):
    """A tenant's stream numbers its events by the tenant's own count: its ids and keep-alive
    positions move only with its own events, never with another tenant's, and resume as ever."""
    ids = lambda st: [int(e[0]) for e in st.events]
    a = Stream(srv, "?heartbeat=1", headers=auth(ALICE))
    a.wait(lambda s: s.last_id is not None, "alice's stream names its position")
    start = int(a.last_id)
    first = submit(srv, 1, auth(ALICE))
    a.wait(lambda s: len(s.events) >= 2, "alice's job's events")
    CHECK.eq(ids(a), [start + 1, start + 2], "her events are numbered on from her stream's position")
    CHECK.eq([e[2]["seq"] for e in a.events], ids(a), "each event's seq is its id")
    b = Stream(srv, headers=auth(BOB))
    submit(srv, 5, auth(BOB))
    b.wait(lambda s: len(s.events) >= 10, "bob's jobs' events")
    bob_start = ids(b)[0] - 1
    CHECK.eq(ids(b), list(range(bob_start + 1, bob_start + 11)), "bob's are numbered by his own count")
    beats = a.comments
    a.wait(lambda s: s.comments >= beats + 2, "alice's keep-alives go on")
    CHECK.eq(int(a.last_id), start + 2, "alice's position did not move with bob's 10 events")
    later = submit(srv, 1, auth(ALICE))
    a.wait(lambda s: len(s.events) >= 4, "her next job's events")
    CHECK.eq(ids(a), list(range(start + 1, start + 5)), "her ids go on one by one past bob's events")
    again = Stream(srv, headers={**auth(ALICE), "Last-Event-ID": str(start + 1)})
    again.wait(lambda s: len(s.events) >= 3, "a resume from her first event's id")
    time.sleep(0.3)
    CHECK.eq(again.jobs(), [(first[0], "succeeded")] + both(later), "replays exactly her events after it")
    CHECK.eq(ids(again), list(range(start + 2, start + 5)), "with the same ids")
    for s in (a, b, again):
        s.close()


def from_now(srv):
    """A stream without an id starts now: no event of a job that ended before it opened, even one
    the server had not sent on yet. Other jobs keep the events thread busy meanwhile, so that it
    is often behind the store when a stream opens right after a job's 200."""
    stop = threading.Event()

    def churn_jobs():
        while not stop.is_set():
            srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1], "device": L.DEVICE})
    busy = threading.Thread(target=churn_jobs, daemon=True)
    busy.start()
    replayed = []
    for i in range(30):
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [i], "device": L.DEVICE},
                    {"Prefer": "wait=30"})
        CHECK.eq(r.status, 200, "a waited job ended")
        s = Stream(srv, "?job=" + r.json()["id"])
        time.sleep(0.15)
        replayed += s.jobs()
        s.close()
    stop.set()
    busy.join(30)
    CHECK.eq(replayed, [], "events of jobs ended before their streams opened")
    # the churn's last jobs may still end: their events must not reach the streams opened next
    for _ in range(600):
        if not srv.req("GET", "/v1/jobs?status=queued&limit=1").json().get("jobs"):
            break
        time.sleep(0.05)


def open_while_storing(srv):
    """A stream opened while a batch's commit has not been told waits for it (parked, opened by
    the events thread): streams opened in a loop while batches are stored each open, with their
    position, and none hangs."""
    n, rounds = 4000, 8
    body = struct.pack("<%di" % (2 * n), *([1] * (2 * n)))
    path = "/v1/jobs?batch=rows&op=sum&dtype=int32&shape=%d,2&device=%s" % (n, L.DEVICE)
    codes = []

    def post():
        for _ in range(rounds):
            codes.append(srv.req("POST", path, body, {"Content-Type": "application/octet-stream"}, timeout=120).status)
            for _ in range(600):  # its jobs out of the queue before the next batch
                if not srv.req("GET", "/v1/jobs?status=queued&limit=1").json().get("jobs"):
                    break
                time.sleep(0.05)
    t = threading.Thread(target=post)
    t.start()
    opened = []  # kept open: a closed stream holds its connection until its next keep-alive
    while t.is_alive() and len(opened) < 16:
        s = Stream(srv, "?kind=dataset")
        s.wait(lambda x: x.last_id is not None, "the stream's opening names its position")
        opened.append(s)
        time.sleep(0.05)
    t.join(300)
    for s in opened:
        s.close()
    CHECK.eq(codes, [202] * rounds, "the batches were stored")
    CHECK.ok(opened, "%d streams opened while they were" % len(opened))


def main():
    srv = L.start_suite()
    from_now(srv)
    open_while_storing(srv)
    every, ids = streams(srv)
    resume(srv, every, ids)
    running(srv)
    churn(srv)
    slots(srv)
    L.check_stop(srv)
    tenants()


L.run_suite(main)
