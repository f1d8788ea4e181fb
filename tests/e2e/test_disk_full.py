# test_disk_full.py: the server's disk fills up under it (a small tmpfs mounted as its data dir;
# skipped, saying why, where mounting is not allowed): uploads, kept results and job inserts get
# 507 problem+json and leave no partial file or row, /readyz says why, and once space is freed
# everything works again without a restart.
import os
import subprocess
import tempfile
import time

import e2e_lib as L
from e2e_lib import CHECK

SIZE_MB = 24


def mount(path):
    if os.geteuid() != 0:
        raise L.Skip("mounting a tmpfs needs root; not root here")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % SIZE_MB, "tmpfs", path], capture_output=True, text=True)
    if p.returncode:
        raise L.Skip("cannot mount a tmpfs here: %s" % p.stderr.strip())


def fill(path, leave):
    """Write a filler file until only `leave` bytes are free (0: until the disk is full)."""
    with open(path, "ab") as f:
        while True:
            st = os.statvfs(os.path.dirname(path))
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                return
            try:
                f.write(b"\0" * min(1 << 20, max(4096, free - leave)))
                f.flush()
            except OSError:
                return


def tmp_files(srv):
    return [f for f in os.listdir(os.path.join(srv.data_dir, "datasets")) if f.endswith(".tmp")]


def main():
    L.store_only("test_disk_full (SQLite on a full tmpfs)")
    if L.DEVICE == "gpu":
        raise L.Skip("disk handling is device-independent; covered by the cpu run")
    mnt = tempfile.mkdtemp(prefix="gpured-full-")
    mount(mnt)
    try:
        run(mnt)
    finally:
        subprocess.run(["umount", "-l", mnt])


def run(mnt):
    data = os.path.join(mnt, "data")
    srv = L.Server(data_dir=data).start()
    ok = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1, 2]}, {"Prefer": "wait=10"})
    CHECK.eq(ok.status, 200, "a job before the disk fills")
    octet = {"Content-Type": "application/octet-stream"}
    stored, full = [], None
    for i in range(20):  # 4 MiB each: the 24 MiB disk fills within six
        r = srv.req("POST", "/v1/datasets?dtype=int32&shape=%d" % (1 << 20), b"\1" * (4 << 20), octet)
        if r.status != 201:
            full = r
            break
        stored.append(r.json()["id"])
    CHECK.ok(full is not None, "uploads stop fitting (%d stored)" % len(stored))
    if full is not None:
        L.check_problem("an upload into a full disk", full, 507)
    CHECK.eq(tmp_files(srv), [], "the failed upload left no .tmp")
    listed = {d["id"] for d in srv.get_json("/v1/datasets?limit=1000")["datasets"]}
    CHECK.eq(listed, set(stored), "and no row")

    # a result to keep (a million values, 8 MiB) on a disk with about 1 MiB left
    filler = os.path.join(mnt, "filler")
    CHECK.eq(srv.req("DELETE", "/v1/datasets/" + stored.pop()).status, 204, "make some room")
    fill(filler, 1 << 20)
    big = srv.req("POST", "/v1/jobs", {"op": "max", "dataset": stored[0], "shape": [1 << 20, 1], "axis": 1},
                  {"Prefer": "wait=30"})
    job = big.json()
    CHECK.eq((job.get("status"), (job.get("error") or {}).get("status")), ("failed", 507),
             "a result that does not fit: the job fails with 507 (%r)" % job.get("error"))
    CHECK.eq(tmp_files(srv), [], "the result that did not fit left no .tmp")

    # now nothing at all is left: job inserts (with inline inputs) are refused with 507
    fill(filler, 0)
    codes = []
    for i in range(30):
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int64", "data": list(range(20000))})
        codes.append(r.status)
        if r.status == 507:
            L.check_problem("a job insert on a full disk", r, 507)
            break
    CHECK.ok(507 in codes, "job inserts on a full disk get 507 (got %r)" % codes)
    CHECK.ok(all(c in (202, 507) for c in codes), "nothing but 202 or 507 (%r)" % codes)
    ready = srv.req("GET", "/readyz")
    if L.check_problem("/readyz on a full disk", ready, 503):
        CHECK.ok("free" in ready.json()["detail"], "/readyz says the disk is full: %r" % ready.json()["detail"])
    CHECK.eq(srv.req("GET", "/healthz").status, 200, "the process lives on")

    # room again: everything works without a restart
    os.unlink(filler)
    for d in stored[1:]:
        srv.req("DELETE", "/v1/datasets/" + d)
    deadline = time.time() + 10
    while time.time() < deadline and srv.req("GET", "/readyz").status != 200:
        time.sleep(0.1)
    CHECK.eq(srv.req("GET", "/readyz").status, 200, "/readyz is ready again once space is freed")
    again = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [4, 5]}, {"Prefer": "wait=10"})
    CHECK.eq((again.status, again.json().get("result")), (200, {"value": 9, "dtype": "int64"}), "a job runs again")
    up = srv.req("POST", "/v1/datasets?dtype=int32&shape=4", b"\1" * 16, octet)
    CHECK.eq(up.status, 201, "an upload works again")
    L.check_stop(srv)
    srv.start()  # and what was acknowledged is all there after a restart
    CHECK.eq(srv.req("GET", "/v1/jobs/" + again.json()["id"]).json().get("status"), "succeeded", "kept across a restart")
    CHECK.eq(srv.req("GET", "/v1/datasets/" + up.json()["id"]).status, 200, "the upload too")
    L.check_stop(srv)


L.run_suite(main)
