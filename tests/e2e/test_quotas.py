# test_quotas.py: per-tenant quotas and retention against the real server: one tenant flooding
# its --tenant-max-queued gets 429 while another's jobs still run; --tenant-max-bytes refuses an
# upload (413, before its values are read, leaving no file and no row) and fails a job whose kept
# result would pass it (507); --result-ttl sweeps finished jobs and their kept results.
import os
import struct
import tempfile
import time

import e2e_lib as L
from e2e_lib import CHECK

ALICE, BOB = "a1" * 16, "b2" * 16
MAX_BYTES = 64 * 1024


def hdr(token, extra=None):
    return dict(extra or {}, Authorization="Bearer " + token)


def ints(n, start=0):
    return struct.pack("<%di" % n, *range(start, start + n))


def upload(srv, token, body, shape, extra=None):
    h = hdr(token, {"Content-Type": "application/octet-stream"})
    h.update(extra or {})
    return srv.req("POST", "/v1/datasets?dtype=int32&shape=" + shape, body, h)


def files(srv):
    return sorted(os.listdir(os.path.join(srv.data_dir, "datasets")))


def flood(srv):
    """alice holds her 3 slots with long benchmarks; the next is 429, bob's job still runs."""
    bench = {"op": "sum", "dtype": "float32", "n": 1 << 22, "repeats": 5, "device": "cpu"}
    got = [srv.req("POST", "/v1/benchmarks", bench, hdr(ALICE)) for _ in range(5)]
    CHECK.eq([r.status for r in got[:3]], [202] * 3, "alice's first 3 benchmarks are accepted")
    over = [r for r in got[3:] if r.status == 429]
    CHECK.ok(over, "alice past --tenant-max-queued 3 gets 429 (%r)" % [r.status for r in got])
    for r in over:
        if L.check_problem("alice over her quota", r, 429):
            CHECK.eq(r.headers.get("retry-after"), "1", "429 carries Retry-After")
            CHECK.ok("--tenant-max-queued" in r.json()["detail"], "the detail names the quota")
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1, 2, 3], "device": "cpu"},
                hdr(BOB, {"Prefer": "wait=60"}))
    CHECK.eq((r.status, r.json().get("result")), (200, {"value": 6, "dtype": "int64"}), "bob's job runs while alice floods")
    for g in got[:3]:
        done = srv.req("GET", "/v1/jobs/%s?wait=60" % g.json()["id"], headers=hdr(ALICE))
        while done.json().get("status") not in L.TERMINAL:
            done = srv.req("GET", "/v1/jobs/%s?wait=60" % g.json()["id"], headers=hdr(ALICE))
    r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1], "device": "cpu"}, hdr(ALICE))
    CHECK.eq(r.status, 202, "alice submits again once her jobs have ended")


def byte_quota(srv):
    before = files(srv)
    a = upload(srv, ALICE, ints(8192), "8192")  # 32 KiB
    CHECK.eq(a.status, 201, "alice's first 32 KiB")
    b = upload(srv, ALICE, ints(6144), "6144")  # 24 KiB: 56 of 64
    CHECK.eq(b.status, 201, "alice's next 24 KiB")
    over = upload(srv, ALICE, ints(4096), "4096")  # 16 KiB more: 72 > 64
    if L.check_problem("an upload past --tenant-max-bytes", over, 413):
        CHECK.ok("--tenant-max-bytes" in over.json()["detail"], "the detail names the quota")
    # a .npy sent chunked: refused as soon as its header gives the size
    head = b"{'descr': '<i4', 'fortran_order': False, 'shape': (4096,), }"
    head += b" " * (63 - (10 + len(head)) % 64) + b"\n"
    npy = srv.req("POST", "/v1/datasets", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + ints(4096),
                  hdr(ALICE, {"Content-Type": "application/x-npy", "Transfer-Encoding": "chunked"}))
    L.check_problem("a chunked .npy past the quota", npy, 413)
    CHECK.eq(files(srv), sorted(before + [a.json()["id"] + ".bin", b.json()["id"] + ".bin"]),
             "refused uploads leave no file")
    listed = {d["id"] for d in srv.get_json_as("/v1/datasets?limit=1000", ALICE)["datasets"]}
    CHECK.eq(listed, {a.json()["id"], b.json()["id"]}, "and no row")
    CHECK.eq(upload(srv, BOB, ints(8192), "8192").status, 201, "bob's bytes are his own")
    # a kept result (over 4096 values, 8 bytes each) would pass alice's quota: the job fails 507
    r = srv.req("POST", "/v1/jobs", {"op": "max", "dataset": a.json()["id"], "shape": [8192, 1], "axis": 1,
                                     "device": L.DEVICE}, hdr(ALICE, {"Prefer": "wait=30"}))
    j = r.json()
    CHECK.eq(j.get("status"), "failed", "a job whose kept result passes the quota fails")
    CHECK.eq((j.get("error") or {}).get("status"), 507, "with 507 (%r)" % j.get("error"))
    CHECK.eq(files(srv), sorted(before + [a.json()["id"] + ".bin", b.json()["id"] + ".bin"] +
                                [d["id"] + ".bin" for d in srv.get_json_as("/v1/datasets", BOB)["datasets"]]),
             "the failed job kept no file")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + a.json()["id"], headers=hdr(ALICE)).status, 204, "delete 32 KiB")
    CHECK.eq(upload(srv, ALICE, ints(4096), "4096").status, 201, "a deleted dataset's bytes are free again")


def restart_keeps_counts(srv):
    """After a restart the quota is summed from the store: alice is still near her limit."""
    srv.stop()
    srv.start()
    over = upload(srv, ALICE, ints(8192), "8192")
    CHECK.eq(over.status, 413, "after a restart alice's stored bytes still count")


def retention():
    tmp = tempfile.mkdtemp(prefix="gpured-ttl-")
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write("alice %s\n" % ALICE)
    srv = L.Server(args=["--tokens-file", path, "--result-ttl", "2s"]).start()
    ds = upload(srv, ALICE, ints(10000), "5000,2").json()["id"]
    small = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1], "device": L.DEVICE},
                    hdr(ALICE, {"Prefer": "wait=30"})).json()
    big = srv.req("POST", "/v1/jobs", {"op": "argmax", "dataset": ds, "axis": 1, "device": L.DEVICE},
                  hdr(ALICE, {"Prefer": "wait=30"})).json()
    kept = [big["result"].get("dataset"), big["result"].get("indices_dataset")]
    CHECK.ok(all(kept), "the argmax kept values and indices as datasets (%r)" % big.get("result"))
    deadline = time.time() + 20
    while time.time() < deadline and srv.req("GET", "/v1/jobs/" + big["id"], headers=hdr(ALICE)).status != 404:
        time.sleep(0.25)
    for j in (small, big):
        CHECK.eq(srv.req("GET", "/v1/jobs/" + j["id"], headers=hdr(ALICE)).status, 404, "swept after --result-ttl")
    for d in kept:
        CHECK.eq(srv.req("GET", "/v1/datasets/%s" % d, headers=hdr(ALICE)).status, 404, "its kept result swept too")
        CHECK.ok(not os.path.exists(os.path.join(srv.data_dir, "datasets", d + ".bin")), "and its file")
    CHECK.eq(srv.req("GET", "/v1/datasets/" + ds, headers=hdr(ALICE)).status, 200, "an uploaded dataset stays")
    CHECK.ok(any("retention sweep" in ln for ln in srv.log), "the sweep is logged")
    L.check_stop(srv)


def main():
    if L.DEVICE == "gpu":
        # quotas and retention live above the backends: the CPU run covers them
        raise L.Skip("quotas are device-independent; covered by the cpu run")
    tmp = tempfile.mkdtemp(prefix="gpured-quota-")
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write("alice %s\nbob %s\n" % (ALICE, BOB))
    srv = L.Server(args=["--tokens-file", path, "--tenant-max-queued", "3", "--tenant-max-bytes", str(MAX_BYTES)])
    srv.get_json_as = lambda p, t: srv.req("GET", p, headers=hdr(t)).json()
    srv.start()
    flood(srv)
    byte_quota(srv)
    restart_keeps_counts(srv)
    L.check_stop(srv)
    retention()


L.run_suite(main)
