# test_idempotency.py: Idempotency-Key on every POST that creates, against the real server:
# replays (JSON and one-shot jobs, benchmarks, datasets), a reused key (422), a key in flight
# (409), keys per tenant, after kill -9, after --idempotency-ttl, and a retry after the client's
# connection dropped once its request was sent: exactly one job.
import os
import socket
import struct
import subprocess
import tempfile
import time

import e2e_lib as L
from e2e_lib import CHECK

ALICE, BOB = "a1" * 16, "b2" * 16


def hdr(token, extra=None):
    return dict(extra or {}, Authorization="Bearer " + token)


def post(srv, token, key, body, path="/v1/jobs", extra=None):
    h = hdr(token, {"Idempotency-Key": key} if key is not None else {})
    h.update(extra or {})
    return srv.req("POST", path, body, h)


def jobs_with(srv, token, marker):
    """Ids of the tenant's jobs whose data holds marker (a value used once in the suite)."""
    out, cursor = [], None
    while True:
        r = srv.req("GET", "/v1/jobs?limit=1000" + ("&cursor=" + cursor if cursor else ""), headers=hdr(token)).json()
        out += [j["id"] for j in r["jobs"] if j.get("bytes") == 4 * marker]
        cursor = r["next_cursor"]
        if cursor is None:
            return out


def replays(srv):
    spec = {"op": "sum", "dtype": "int32", "data": list(range(7)), "device": L.DEVICE}
    first = post(srv, ALICE, "k-json", spec)
    CHECK.eq(first.status, 202, "a new key: 202")
    CHECK.ok("idempotent-replayed" not in first.headers, "a new key is not a replay")
    again = post(srv, ALICE, "k-json", spec, extra={"Prefer": "wait=30"})
    CHECK.eq(again.status, 200, "the same key and body, waiting: 200 with the finished job")
    CHECK.eq(again.headers.get("idempotent-replayed"), "true", "Idempotent-Replayed: true")
    CHECK.eq(again.json().get("id"), first.json().get("id"), "the same job")
    CHECK.eq(again.headers.get("location"), "/v1/jobs/" + first.json()["id"], "its Location")
    CHECK.eq(len(jobs_with(srv, ALICE, 7)), 1, "one job for two requests")
    other = post(srv, ALICE, "k-json", dict(spec, data=list(range(8))))
    L.check_problem("the key with another body", other, 422, "Idempotency-Key")
    bob = post(srv, BOB, "k-json", dict(spec, data=list(range(9))))
    CHECK.eq(bob.status, 202, "keys are per tenant: bob's k-json is his own")
    for bad in ("x" * 256, "caf\u00e9"):
        L.check_problem("Idempotency-Key %r" % bad[:8], post(srv, ALICE, bad, spec), 400, "Idempotency-Key")

    raw = struct.pack("<3f", 1, 2, 3)
    one = [post(srv, ALICE, "k-raw", raw, "/v1/jobs?op=sum&dtype=float32",
                {"Content-Type": "application/octet-stream"}) for _ in range(2)]
    CHECK.eq([r.status for r in one], [202, 202], "one-shot binary job: new, then replayed (202 without Prefer: wait)")
    CHECK.eq(post(srv, ALICE, "k-raw ", raw, "/v1/jobs?op=sum&dtype=float32",
                  {"Content-Type": "application/octet-stream"}).json().get("id"), one[0].json().get("id"),
             "a key's trailing space is not part of it")
    other_q = post(srv, ALICE, "k-raw", raw, "/v1/jobs?op=max&dtype=float32", {"Content-Type": "application/octet-stream"})
    L.check_problem("the key with another query", other_q, 422, "Idempotency-Key")
    CHECK.eq(one[1].json().get("id"), one[0].json().get("id"), "one-shot replay: the same job")
    bench = {"op": "sum", "dtype": "float32", "n": 4096, "repeats": 1, "device": "cpu"}
    b = [post(srv, ALICE, "k-bench", bench, "/v1/benchmarks") for _ in range(2)]
    CHECK.eq(b[1].json().get("id"), b[0].json().get("id"), "benchmark replay: the same job")
    CHECK.eq(b[1].headers.get("idempotent-replayed"), "true", "benchmark replay header")

    values = struct.pack("<4i", 1, 2, 3, 4)
    ct = {"Content-Type": "application/octet-stream"}
    d = [post(srv, ALICE, "k-ds", values, "/v1/datasets?dtype=int32&shape=2,2", ct) for _ in range(2)]
    CHECK.eq([r.status for r in d], [201, 201], "dataset: 201 both times")
    CHECK.eq(d[1].json().get("id"), d[0].json().get("id"), "dataset replay: the same dataset")
    CHECK.eq(d[1].headers.get("idempotent-replayed"), "true", "dataset replay header")
    mism = post(srv, ALICE, "k-ds", struct.pack("<4i", 1, 2, 3, 5), "/v1/datasets?dtype=int32&shape=2,2", ct)
    L.check_problem("dataset key with other values", mism, 422, "Idempotency-Key")
    names = os.listdir(os.path.join(srv.data_dir, "datasets"))
    CHECK.eq(sorted(n for n in names if n.endswith(".bin") or n.endswith(".tmp")), [d[0].json()["id"] + ".bin"],
             "replayed and refused uploads leave no file")
    return first.json()["id"]


def in_flight(srv):
    """A second request with a key whose upload is still arriving: 409; once it is stored, a replay."""
    n = 1 << 20
    path = os.path.join(srv.data_dir, "..", "slow-%d.bin" % os.getpid())
    with open(path, "wb") as f:
        f.write(b"\0" * (4 * n))
    slow = subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--limit-rate", "1M",
                             "-H", "Authorization: Bearer " + ALICE, "-H", "Idempotency-Key: k-slow",
                             "-H", "Content-Type: application/octet-stream", "-H", "Expect:",
                             "--data-binary", "@" + path, srv.base + "/v1/datasets?dtype=int32&shape=%d" % n],
                            stdout=subprocess.PIPE)
    time.sleep(1.0)
    # (Expect: 100-continue: the refusal comes before this body is sent, as a client would want)
    busy = post(srv, ALICE, "k-slow", b"\0" * (4 * n), "/v1/datasets?dtype=int32&shape=%d" % n,
                {"Content-Type": "application/octet-stream", "Expect": "100-continue"})
    L.check_problem("the key while its upload is still arriving", busy, 409, "Idempotency-Key")
    CHECK.eq(slow.communicate(timeout=60)[0], b"201", "the slow upload itself is stored")
    again = post(srv, ALICE, "k-slow", b"\0" * (4 * n), "/v1/datasets?dtype=int32&shape=%d" % n,
                 {"Content-Type": "application/octet-stream"})
    CHECK.eq((again.status, again.headers.get("idempotent-replayed")), (201, "true"), "then replayed")
    os.unlink(path)


def dropped(srv):
    """The client sends its POST and drops the connection; its retry gets the one job."""
    body = ('{"op": "sum", "dtype": "int32", "data": [%s], "device": "%s"}'
            % (",".join(["5"] * 11), L.DEVICE)).encode()
    req = (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ALICE.encode() +
           b"\r\nIdempotency-Key: k-drop\r\nContent-Type: application/json\r\nContent-Length: " +
           str(len(body)).encode() + b"\r\n\r\n" + body)
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(req)
    s.close()
    for _ in range(100):
        r = post(srv, ALICE, "k-drop", body.decode())
        if r.status != 409:
            break
        time.sleep(0.05)
    CHECK.eq((r.status in (200, 202), r.headers.get("idempotent-replayed")), (True, "true"),
             "the retry after a dropped connection is a replay (%r)" % r)
    CHECK.eq(len(jobs_with(srv, ALICE, 11)), 1, "exactly one job for the dropped request and its retry")


def main():
    tmp = tempfile.mkdtemp(prefix="gpured-idem-")
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write("alice %s\nbob %s\n" % (ALICE, BOB))
    srv = L.Server(args=["--tokens-file", path, "--idempotency-ttl", "3"]).start()
    if L.DEVICE == "gpu" and not srv.req("GET", "/v1/devices", headers=hdr(ALICE)).json().get("gpus"):
        srv.stop()
        raise L.Skip("GPURED_TEST_DEVICE=gpu but this server has no GPU")
    replays(srv)
    in_flight(srv)
    dropped(srv)

    # durable: a key survives kill -9 (it was committed with its job)
    spec = {"op": "max", "dtype": "int32", "data": list(range(13)), "device": L.DEVICE}
    first = post(srv, ALICE, "k-kill", spec)
    CHECK.eq(first.status, 202, "before kill -9")
    srv.kill9()
    srv.start()
    after = post(srv, ALICE, "k-kill", spec)
    CHECK.eq((after.json().get("id"), after.headers.get("idempotent-replayed")), (first.json()["id"], "true"),
             "after kill -9 and a restart the key still replays its job")
    CHECK.eq(len(jobs_with(srv, ALICE, 13)), 1, "one job after kill -9 and a retry")

    # expiry: after --idempotency-ttl the key is free for a new request
    time.sleep(4)
    fresh = post(srv, ALICE, "k-json", dict(spec, data=[1]))
    CHECK.eq((fresh.status, fresh.headers.get("idempotent-replayed")), (202, None),
             "after --idempotency-ttl an old key makes a new job")
    L.check_stop(srv)


L.run_suite(main)
