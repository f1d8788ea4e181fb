# test_auth.py: bearer tokens and tenants against the real server: the 401/404 matrix over every
# route for {no token, wrong token, another tenant, the owner, an admin}, scoped list pages,
# start-up refusals (0.0.0.0 without tokens, a malformed tokens file), SIGHUP reloads, and no
# token in the log. Another tenant's jobs naming a dataset neither hold its owner's DELETE nor
# learn that it exists, and a list's ETag moves only with what its caller sees.
import os
import re
import signal
import struct
import subprocess
import tempfile
import threading
import time

import e2e_lib as L
from e2e_lib import CHECK

ALICE, BOB, ROOT = "a1" * 16, "b2" * 16, "r00t" * 8
TOKENS = "# tenants of the auth suite\n\nalice %s\nbob   %s\n  # an indented comment\nops %s admin\n" % (ALICE, BOB, ROOT)
WHO = {"none": None, "wrong": "c3" * 16, "other": BOB, "owner": ALICE, "admin": ROOT}


def hdr(token, extra=None):
    h = dict(extra or {})
    if token:
        h["Authorization"] = "Bearer " + token
    return h


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def upload(srv, token, values):
    body = struct.pack("<%di" % len(values), *values)
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=%d" % len(values), body,
                hdr(token, {"Content-Type": "application/octet-stream"}))
    CHECK.eq(r.status, 201, "upload as %s (%r)" % (token and token[:2], r.body[:200]))
    return r.json()["id"]


def job(srv, token, spec):
    r = srv.req("POST", "/v1/jobs", dict(spec, device=L.DEVICE), hdr(token, {"Prefer": "wait=30"}))
    CHECK.eq(r.status, 200, "job %s (%r)" % (spec.get("op"), r.body[:200]))
    return r.json()


def check_401(what, r):
    if L.check_problem(what, r, 401):
        CHECK.eq(r.headers.get("www-authenticate"), 'Bearer realm="gpured"', what + ": WWW-Authenticate")


def matrix(srv):
    ds = upload(srv, ALICE, list(range(10)))
    rows = 5000  # over the inline limit: the result is kept as a dataset of alice's
    big = upload(srv, ALICE, [1] * (2 * rows))
    j = job(srv, ALICE, {"op": "sum", "dtype": "int32", "data": [1, 2, 3]})
    kept = job(srv, ALICE, {"op": "argmax", "dataset": big, "shape": [rows, 2], "axis": 1})
    done = job(srv, ALICE, {"op": "min", "dtype": "int32", "data": [5, 6]})  # deleted by its owner below
    CHECK.eq(j.get("tenant"), "alice", "a job carries its tenant")
    CHECK.ok(kept.get("result", {}).get("dataset"), "a long result is kept as a dataset (%r)" % kept.get("result"))
    kds = kept["result"]["dataset"]
    CHECK.eq(srv.req("GET", "/v1/datasets/" + kds, headers=hdr(ALICE)).json().get("tenant"), "alice",
             "a kept result's dataset is its job's tenant's")
    unknown_j, unknown_d = "j_0000000000000001", "d_0000000000000001"

    # (what, method, path, body, extra headers, expected for other/owner/admin)
    routes = [
        ("get job", "GET", "/v1/jobs/" + j["id"], None, None, (404, 200, 200)),
        ("result", "GET", "/v1/jobs/%s/result" % j["id"], None, None, (404, 200, 200)),
        ("kept result as npy", "GET", "/v1/jobs/%s/result" % kept["id"], None, {"Accept": "application/x-npy"},
         (404, 200, 200)),
        ("delete a finished job", "DELETE", "/v1/jobs/" + done["id"], None, None, (404, 204, 404)),
        ("get dataset", "GET", "/v1/datasets/" + ds, None, None, (404, 200, 200)),
        ("dataset data", "GET", "/v1/datasets/%s/data" % ds, None, None, (404, 200, 200)),
        ("kept dataset", "GET", "/v1/datasets/" + kds, None, None, (404, 200, 200)),
        ("job on the dataset", "POST", "/v1/jobs", {"op": "sum", "dataset": ds, "device": L.DEVICE},
         {"Prefer": "wait=30"}, (404, 200, 200)),
        ("matmul operand", "POST", "/v1/jobs",
         {"op": "matmul", "dtype": "float32", "a": {"dataset": ds}, "b": {"data": [[1]]},
          "device": L.DEVICE}, {"Prefer": "wait=30"}, (404, 422, 422)),
        ("list jobs", "GET", "/v1/jobs", None, None, (200, 200, 200)),
        ("list datasets", "GET", "/v1/datasets", None, None, (200, 200, 200)),
        ("devices", "GET", "/v1/devices", None, None, (200, 200, 200)),
        ("algorithms", "GET", "/v1/algorithms", None, None, (200, 200, 200)),
        ("openapi", "GET", "/openapi.json", None, None, (200, 200, 200)),
        ("metrics", "GET", "/metrics", None, None, (200, 200, 200)),
        ("new job", "POST", "/v1/jobs", {"op": "max", "dtype": "int64", "data": [4, 9], "device": L.DEVICE},
         None, (202, 202, 202)),
        ("benchmark", "POST", "/v1/benchmarks", {"op": "sum", "dtype": "float32", "n": 1024, "repeats": 1,
                                                  "device": "cpu"}, None, (202, 202, 202)),
    ]
    for what, method, path, body, extra, want in routes:
        for who, token in WHO.items():
            r = srv.req(method, path, body, hdr(token, extra))
            name = "%s as %s" % (what, who)
            if who in ("none", "wrong"):
                check_401(name, r)
                continue
            status = want[("other", "owner", "admin").index(who)]
            CHECK.eq(r.status, status, "%s: %s %s (%r)" % (name, method, path, r.body[:160]))
            if status == 404:
                # exactly what an unknown id answers: no oracle for another tenant's ids
                unknown = path.replace(j["id"], unknown_j).replace(kept["id"], unknown_j).replace(done["id"], unknown_j)
                unknown = unknown.replace(ds, unknown_d).replace(kds, unknown_d)
                body_u = body and {k: ({"dataset": unknown_d} if isinstance(v, dict) and v.get("dataset") == ds
                                       else unknown_d if v == ds else v) for k, v in body.items()}
                u = srv.req(method, unknown, body_u, hdr(ALICE, extra))
                L.check_problem(name + " (404)", r, 404)
                CHECK.eq(r.json().get("detail", "").replace(j["id"], "X").replace(kept["id"], "X").replace(done["id"], "X")
                         .replace(ds, "X").replace(kds, "X"),
                         u.json().get("detail", "").replace(unknown_j, "X").replace(unknown_d, "X"),
                         name + ": the same problem as an unknown id")
            if what == "list jobs" and r.status == 200:
                ids = {x["id"] for x in r.json()["jobs"]}
                CHECK.eq(j["id"] in ids, who != "other", name + ": alice's job listed")
                CHECK.ok(all(x["tenant"] == ("bob" if who == "other" else x["tenant"]) for x in r.json()["jobs"]),
                         name + ": only the caller's own jobs")
            if what == "list datasets" and r.status == 200:
                ids = {x["id"] for x in r.json()["datasets"]}
                CHECK.eq(ds in ids, who != "other", name + ": alice's dataset listed")

    # open routes answer without a token
    for path in ("/healthz", "/readyz", "/", "/assets/app.js"):
        CHECK.eq(srv.req("GET", path).status, 200, "open route %s without a token" % path)
        CHECK.eq(srv.req("GET", path, headers=hdr("c3" * 16)).status, 200, "open route %s, any token" % path)

    # DELETE: another tenant's is 404 and leaves it; the owner's and an admin's work
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + ds, headers=hdr(BOB)).status, 404, "delete as other")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + ds, headers=hdr(None)).status, 401, "delete without a token")
    CHECK.eq(srv.req("GET", "/v1/datasets/" + ds, headers=hdr(ALICE)).status, 200, "still there after others tried")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + ds, headers=hdr(ALICE)).status, 204, "delete as owner")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + kds, headers=hdr(ROOT)).status, 204, "delete as admin")
    CHECK.eq(srv.req("GET", "/v1/datasets/" + kds, headers=hdr(ALICE)).status, 404, "gone after the admin's delete")


def pages(srv):
    """Every list page, through next_cursor, holds only the caller's; an admin filters by ?tenant=."""
    mine = {"alice": set(), "bob": set()}
    for who, token in (("alice", ALICE), ("bob", BOB)) * 3:
        mine[who].add(srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1], "device": L.DEVICE},
                              hdr(token)).json()["id"])

    def walk(token, query=""):
        ids, cursor = [], None
        for _ in range(1000):
            r = srv.req("GET", "/v1/jobs?limit=2" + query + ("&cursor=" + cursor if cursor else ""), headers=hdr(token))
            if not CHECK.eq(r.status, 200, "list page %s" % query):
                return ids
            ids += [(x["id"], x["tenant"]) for x in r.json()["jobs"]]
            cursor = r.json()["next_cursor"]
            if cursor is None:
                return ids
        return ids

    a = walk(ALICE)
    CHECK.ok(mine["alice"] <= {i for i, _ in a}, "alice's pages hold all her jobs")
    CHECK.ok(all(t == "alice" for _, t in a), "alice's pages hold only hers")
    CHECK.eq(walk(BOB, "&tenant=alice"), [], "bob naming alice in ?tenant= sees nothing")
    b = walk(ROOT, "&tenant=bob")
    CHECK.ok(mine["bob"] <= {i for i, _ in b}, "admin ?tenant=bob: all bob's jobs")
    CHECK.ok(all(t == "bob" for _, t in b), "admin ?tenant=bob: only bob's jobs")
    every = {t for _, t in walk(ROOT)}
    CHECK.ok({"alice", "bob"} <= every, "admin without ?tenant= sees every tenant (%r)" % every)
    L.check_problem("a bad ?tenant=", srv.req("GET", "/v1/jobs?tenant=No%20Such", headers=hdr(ROOT)), 400, "tenant")


def reload(srv, path):
    """SIGHUP: a removed token stops working at once; a file that no longer reads keeps the old ones."""
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": list(range(100)), "device": L.DEVICE},
                hdr(BOB))
    bobs = r.json()["id"]
    write(path, "alice %s\nops %s admin\ncarol %s\n" % (ALICE, ROOT, "c4" * 16))
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline and srv.req("GET", "/v1/jobs", headers=hdr(BOB)).status != 401:
        time.sleep(0.05)
    check_401("bob after his token was removed", srv.req("GET", "/v1/jobs", headers=hdr(BOB)))
    CHECK.eq(srv.req("GET", "/v1/jobs", headers=hdr("c4" * 16)).status, 200, "a token added by the reload works")
    CHECK.eq(srv.req("GET", "/v1/jobs", headers=hdr(ALICE)).status, 200, "alice still works")
    done = srv.req("GET", "/v1/jobs/%s?wait=30" % bobs, headers=hdr(ROOT))
    CHECK.eq(done.json().get("status"), "succeeded", "bob's job accepted before the reload still ran")
    write(path, "alice %s\nthis line is not a token line\n" % ALICE)
    srv.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    CHECK.eq(srv.req("GET", "/v1/jobs", headers=hdr(ROOT)).status, 200, "a broken file on SIGHUP keeps the tokens in use")
    CHECK.ok(any("line 2" in ln and "tokens in use stay" in ln for ln in srv.log),
             "the broken reload is logged with its line number")


def startup(tmp):
    """0.0.0.0 without tokens is refused (and allowed with --insecure-no-auth); a malformed tokens
    file stops start-up naming the line, never printing the token."""
    data = os.path.join(tmp, "refused")

    def run(args, env=None, wait_for=None):
        p = subprocess.Popen([L.BIN, "serve", "--port", "0", "--data-dir", data] + args, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
        if wait_for is None:
            out, _ = p.communicate(timeout=30)
            return p.returncode, out.decode(errors="replace")
        lines = []
        deadline = time.time() + 30
        while time.time() < deadline:
            ln = p.stdout.readline().decode(errors="replace")
            lines.append(ln)
            if wait_for in ln or not ln:
                break
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=30)
        return p.returncode, "".join(lines) + rest.decode(errors="replace")

    rc, out = run(["--bind", "0.0.0.0"])
    CHECK.eq(rc, 1, "serve on 0.0.0.0 without tokens exits 1")
    CHECK.ok("--tokens-file" in out and "--insecure-no-auth" in out, "the refusal says how to fix it: %r" % out[-400:])
    rc, out = run([], {"GPURED_BIND": "0.0.0.0", "GPURED_INSECURE_NO_AUTH": "1"}, wait_for="listening on")
    CHECK.ok("listening on http://0.0.0.0:" in out, "GPURED_INSECURE_NO_AUTH=1 serves on 0.0.0.0 (%r)" % out[-300:])
    CHECK.ok("insecure-no-auth" in out and " warn " in out, "and warns at start")
    bad = os.path.join(tmp, "bad-tokens")
    secret = "s3cr3t-" + "x" * 20
    for text, line in (("alice %s\n\nBob %s\n" % (ALICE, secret), 3), ("# c\nalice short\n", 2),
                       ("alice %s\nbob %s extra\n" % (ALICE, secret), 2), ("alice %s\nbob %s\n" % (secret, secret), 2),
                       ("# only a comment\n", None)):
        write(bad, text)
        rc, out = run(["--tokens-file", bad])
        CHECK.eq(rc, 1, "a malformed tokens file stops start-up (%r)" % text[:30])
        if line:
            CHECK.ok("line %d" % line in out, "the message names line %d: %r" % (line, out[-300:]))
        CHECK.ok(secret not in out and ALICE not in out, "the message never prints a token")
    rc, out = run(["--tokens-file", os.path.join(tmp, "missing")])
    CHECK.ok(rc == 1 and "cannot open the tokens file" in out, "a missing tokens file stops start-up")


def validators(srv):
    """Alice's list ETag stays while Bob submits (a 304 says nothing of him), and moves with her job."""
    def tag(who):
        r = srv.req("GET", "/v1/jobs?limit=5", headers=hdr(who))
        CHECK.eq(r.status, 200, "a list page")
        return r.headers.get("etag")

    mine = tag(ALICE)
    job(srv, BOB, {"op": "sum", "dtype": "int32", "data": [1, 2]})
    again = srv.req("GET", "/v1/jobs?limit=5", headers=hdr(ALICE, {"If-None-Match": mine}))
    CHECK.eq((again.status, again.headers.get("etag")), (304, mine), "Alice's list is 304 after Bob's job")
    job(srv, ALICE, {"op": "sum", "dtype": "int32", "data": [1, 2]})
    moved = srv.req("GET", "/v1/jobs?limit=5", headers=hdr(ALICE, {"If-None-Match": mine}))
    CHECK.ok(moved.status == 200 and moved.headers.get("etag") not in (None, mine), "and 200, a new ETag, after hers")
    CHECK.eq(srv.req("GET", "/v1/jobs?limit=5", headers=hdr(BOB, {"If-None-Match": mine})).status, 200,
             "Alice's ETag is no validator of Bob's list")


def delete_under_spam(srv):
    """Bob sends jobs naming Alice's dataset as fast as he can (each 404, worded as for an id that
    does not exist) while she deletes it: each DELETE is 204."""
    target, stop, answers = {}, threading.Event(), []

    def spam():
        while not stop.is_set():
            ds = target.get("id")
            if ds:
                r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds, "device": L.DEVICE}, hdr(BOB), may_fail=True)
                answers.append((r.status, ds, r.json().get("detail", "") if r.status == 404 else r.body[:200]))

    threads = [threading.Thread(target=spam) for _ in range(4)]
    for t in threads:
        t.start()
    deleted = []
    for _ in range(6):
        target["id"] = upload(srv, ALICE, list(range(64)))
        time.sleep(0.2)
        deleted.append(srv.req("DELETE", "/v1/datasets/" + target["id"], headers=hdr(ALICE)).status)
    stop.set()
    for t in threads:
        t.join()
    CHECK.eq(deleted, [204] * 6, "Alice's 6 DELETEs while Bob's jobs name her datasets")
    CHECK.ok(len(answers) > 20, "Bob sent jobs all along (%d)" % len(answers))
    odd = [a for a in answers if a[0] != 404 or a[2] != "no dataset %s (GET /v1/datasets lists them)" % a[1]]
    CHECK.eq(odd[:5], [], "each of Bob's jobs is 404 as for a dataset that does not exist")


def cleanup(srv):
    """DELETE /v1/jobs: a tenant deletes its own finished jobs in bulk (by kept result, by age),
    never another's; an admin names the tenant."""
    rows = 5000
    big = upload(srv, ALICE, [1] * (2 * rows))
    kept = job(srv, ALICE, {"op": "argmin", "dataset": big, "shape": [rows, 2], "axis": 1})
    small = job(srv, ALICE, {"op": "sum", "dtype": "int32", "data": [1]})
    bobs = job(srv, BOB, {"op": "sum", "dtype": "int32", "data": [2]})
    bob_kept = job(srv, BOB, {"op": "matmul", "dtype": "float32", "a": {"data": [[1]]}, "b": {"data": [[2]]}})
    L.check_problem("DELETE /v1/jobs saying which jobs", srv.req("DELETE", "/v1/jobs", headers=hdr(ALICE)), 400)
    L.check_problem("?older_than=soon", srv.req("DELETE", "/v1/jobs?older_than=soon", headers=hdr(ALICE)), 400,
                    "older_than")
    r = srv.req("DELETE", "/v1/jobs?kept=true", headers=hdr(ALICE))
    CHECK.eq((r.status, r.json().get("in_use")), (200, 0), "alice's jobs with kept results deleted (%r)" % r.body[:200])
    CHECK.ok(r.json().get("deleted", 0) >= 1, "at least her argmin: %r" % r.json())
    gone = [srv.req("GET", p, headers=hdr(ALICE)).status for p in
            ("/v1/jobs/" + kept["id"], "/v1/datasets/" + kept["result"]["dataset"])]
    CHECK.eq(gone, [404, 404], "the job and its kept result are gone")
    CHECK.eq(srv.req("GET", "/v1/jobs/" + small["id"], headers=hdr(ALICE)).status, 200, "a job without one stays")
    CHECK.eq(srv.req("DELETE", "/v1/jobs?older_than=0", headers=hdr(ALICE)).status, 200, "alice: every finished job")
    CHECK.eq(srv.req("GET", "/v1/jobs/" + small["id"], headers=hdr(ALICE)).status, 404, "her job submitted before: gone")
    CHECK.eq([srv.req("GET", "/v1/jobs/" + j["id"], headers=hdr(BOB)).status for j in (bobs, bob_kept)], [200, 200],
             "bob's jobs stay")
    r = srv.req("DELETE", "/v1/jobs?kept=true&tenant=bob", headers=hdr(ROOT))
    CHECK.eq((r.status, r.json().get("deleted")), (200, 1), "the admin deletes bob's kept product (%r)" % r.body[:200])
    CHECK.eq([srv.req("GET", "/v1/jobs/" + j["id"], headers=hdr(BOB)).status for j in (bobs, bob_kept)], [200, 404],
             "bob's product went, his sum stays")
    # more than a page of the sweep's (256): every one goes
    r = srv.req("POST", "/v1/jobs", [{"op": "sum", "dtype": "int32", "data": [i]} for i in range(600)],
                hdr(BOB, {"Prefer": "wait=30"}), timeout=120)
    CHECK.eq(r.status, 200, "bob's batch of 600 ended (%r)" % r.body[:200])
    had = len(srv.req("GET", "/v1/jobs?limit=1000", headers=hdr(BOB)).json().get("jobs", []))
    r = srv.req("DELETE", "/v1/jobs?older_than=0", headers=hdr(BOB), timeout=120)
    CHECK.ok(had > 601 - 1 and (r.status, r.json().get("deleted")) == (200, had),
             "bob deletes his %d finished jobs (%r)" % (had, r.body[:200]))
    CHECK.eq(srv.req("GET", "/v1/jobs", headers=hdr(BOB)).json().get("jobs"), [], "bob has none left")


def main():
    tmp = tempfile.mkdtemp(prefix="gpured-auth-")
    path = os.path.join(tmp, "tokens")
    write(path, TOKENS)
    srv = L.Server(args=["--tokens-file", path]).start()
    if L.DEVICE == "gpu" and not srv.req("GET", "/v1/devices", headers=hdr(ROOT)).json().get("gpus"):
        srv.stop()
        raise L.Skip("GPURED_TEST_DEVICE=gpu but this server has no GPU")
    matrix(srv)
    pages(srv)
    delete_under_spam(srv)
    validators(srv)
    cleanup(srv)
    reload(srv, path)
    log = "\n".join(srv.log)
    CHECK.ok(not any(t in log for t in (ALICE, BOB, ROOT, "c4" * 16)), "no token appears in the log")
    CHECK.ok(not re.search(r"(?i)authorization", log), "no Authorization header in the log")
    L.check_stop(srv)
    startup(tmp)


L.run_suite(main)
