# test_gpu_faults.py: GPU faults through the service (gpu label only). A kernel fault (the
# test-only switch of a -DGPURED_TEST_FAULTS=ON build traps the first reduction after about a
# second) breaks the device: the trapped job fails with the CUDA error, jobs queued behind it with
# device auto move to the CPU and succeed, jobs that named a GPU fail with 503 saying why,
# /readyz and /healthz answer 503, new jobs naming the GPU get 503 while auto ones run on the CPU,
# and after a restart every job reads as it was answered and the GPU works again. Then, with
# another process holding all but 256 MiB of the GPU's memory, a job whose input needs 1 GiB on
# the device fails with 507 and the same lane keeps working; once the memory is free it succeeds.
import array
import ctypes
import json
import os
import random
import subprocess

import e2e_lib as L
from e2e_lib import CHECK

FAULT_ENV = {"GPURED_TEST_KERNEL_FAULT": "1"}
# one lane: the jobs submitted while the trap spins queue behind it, none runs beside it
ARGS = ["--streams", "1"]


def int_job(rng, device):
    xs = [rng.randrange(-10**6, 10**6) for _ in range(500)]
    return {"op": "sum", "dtype": "int64", "data": xs, "device": device}, sum(xs)


def wait_final(srv, jid):
    r = srv.req("GET", "/v1/jobs/%s?wait=60" % jid)
    return r.json() if r.status == 200 else {"status": "http %d" % r.status}


def kernel_fault():
    srv = L.Server(args=ARGS, env=FAULT_ENV).start()
    if not srv.get_json("/v1/devices").get("gpus"):
        raise L.Skip("GPURED_TEST_DEVICE=gpu but the server lists no GPU")
    if not any("GPURED_TEST_KERNEL_FAULT" in line for line in srv.log):
        raise L.Skip("this gpured was built without -DGPURED_TEST_FAULTS=ON (the test-only fault switch)")
    rng = L.rng_for("test_gpu_faults")

    trapped = srv.req("POST", "/v1/jobs", int_job(rng, "gpu:0")[0])
    CHECK.eq(trapped.status, 202, "the job that will trap is accepted")
    # queued behind it while the trap spins: auto ones must move, named ones fail
    behind = [int_job(rng, dev) for dev in ["auto"] * 12 + ["gpu:0"] * 4 + ["gpu"] * 2]
    answers = srv.batch([dict(method="POST", path="/v1/jobs", body=b) for b, _ in behind], parallel=6)
    CHECK.eq([a.status for a in answers], [202] * len(behind), "every job queued behind it is accepted")

    first = wait_final(srv, trapped.json()["id"])
    err = first.get("error") or {}
    CHECK.eq((first.get("status"), err.get("status")), ("failed", 500),
             "the trapped job fails as a CUDA error (%r)" % err)
    CHECK.ok("launch failure" in (err.get("detail") or ""),
             "its error names the CUDA failure: %r" % err.get("detail"))
    for (body, want), a in zip(behind, answers):
        if a.status != 202:
            continue
        job = wait_final(srv, a.json()["id"])
        if body["device"] == "auto":
            CHECK.eq((job.get("status"), job.get("device"), job.get("result", {}).get("value")),
                     ("succeeded", "cpu", want), "an auto job queued on the broken GPU moved to the CPU")
        else:
            e = job.get("error") or {}
            CHECK.eq((job.get("status"), e.get("status")), ("failed", 503),
                     "a job that named %s fails with 503 (%r)" % (body["device"], e))
            CHECK.ok("broke before this job ran" in (e.get("detail") or ""), "and says why: %r" % e.get("detail"))
    CHECK.ok(any("moved from" in line for line in srv.log), "the moves are logged")

    for path in ("/readyz", "/healthz"):
        r = srv.req("GET", path)
        if L.check_problem("%s with a broken GPU" % path, r, 503):
            CHECK.ok("broken" in r.json()["detail"], "%s says the GPU is broken: %r" % (path, r.json()["detail"]))
    for dev in ("gpu:0", "gpu"):
        r = srv.req("POST", "/v1/jobs", int_job(rng, dev)[0])
        L.check_problem("a new job for %s on a broken GPU" % dev, r, 503, "device")
    body, want = int_job(rng, "auto")
    r = srv.req("POST", "/v1/jobs", body, {"Prefer": "wait=30"})
    CHECK.eq((r.status, r.json().get("device"), r.json().get("result", {}).get("value")), (200, "cpu", want),
             "a new auto job runs on the CPU")
    before = {a.json()["id"]: wait_final(srv, a.json()["id"])["status"] for a in answers if a.status == 202}
    before[trapped.json()["id"]] = "failed"
    L.check_stop(srv)  # a lost context must not hang or crash the shutdown

    srv.env.pop("GPURED_TEST_KERNEL_FAULT")
    srv.start()
    after = {jid: srv.get_json("/v1/jobs/" + jid)["status"] for jid in before}
    CHECK.eq(after, before, "after the restart every job reads as it was answered")
    CHECK.eq(srv.req("GET", "/readyz").status, 200, "after the restart the server is ready")
    body, want = int_job(rng, "gpu:0")
    r = srv.req("POST", "/v1/jobs", body, {"Prefer": "wait=30"})
    CHECK.eq((r.status, r.json().get("device"), r.json().get("result", {}).get("value")), (200, "gpu:0", want),
             "and the GPU works again")
    L.check_stop(srv)


class Hog:
    """Another process's claim on the GPU: device memory taken through the driver API."""

    def __init__(self, leave):
        cu = ctypes.CDLL("libcuda.so.1")
        self.cu, self.ptrs = cu, []
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        for what, rc in (("cuInit", cu.cuInit(0)), ("cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), 0)),
                         ("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
                         ("cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))):
            if rc:
                raise RuntimeError("%s failed: CUresult %d" % (what, rc))
        chunk = 1 << 30
        while chunk >= 1 << 20:
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
            if free.value < leave + chunk:
                chunk >>= 1
                continue
            p = ctypes.c_uint64()
            if cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(chunk)):
                chunk >>= 1
                continue
            self.ptrs.append(p)
        self.free = free.value

    def release(self):
        for p in self.ptrs:
            self.cu.cuMemFree_v2(p)
        self.ptrs = []


def out_of_memory():
    srv = L.Server(args=ARGS + ["--gpu-cache-bytes", "0"]).start()  # no cache: the input needs the lane's buffer
    n, at = 1 << 28, random.Random(5).randrange(1 << 28)  # 1 GiB of float32
    values = array.array("f", [1.0]) * n
    values[at] = 7.0
    path = os.path.join(srv.data_dir, "upload.bin")
    with open(path, "wb") as f:
        values.tofile(f)
    del values
    # curl -T streams the file (--data-binary, as the suites' batches send, would hold it in memory)
    up = subprocess.run(["curl", "-sS", "-X", "POST", "-H", "Content-Type: application/octet-stream", "-T", path,
                         "%s/v1/datasets?dtype=float32&shape=%d" % (srv.base, n)], capture_output=True, text=True)
    os.remove(path)
    stored = json.loads(up.stdout or "{}")
    if not CHECK.ok("id" in stored, "the 1 GiB dataset is stored: %s %s" % (up.stdout[:300], up.stderr[:300])):
        return
    big = {"op": "argmax", "dtype": "float32", "dataset": stored["id"], "device": "gpu:0"}
    rng = L.rng_for("test_gpu_faults oom")
    hog = Hog(leave=256 << 20)
    try:
        CHECK.ok(hog.free < (512 << 20), "another process holds all but %d MiB of the GPU" % (hog.free >> 20))
        r = srv.req("POST", "/v1/jobs", big, {"Prefer": "wait=60"})
        e = r.json().get("error") or {}
        CHECK.eq((r.json().get("status"), e.get("status")), ("failed", 507),
                 "a job needing more device memory than is free fails with 507 (%r)" % e)
        CHECK.ok("out of GPU memory" in (e.get("detail") or ""), "and says so: %r" % e.get("detail"))
        for _ in range(3):
            body, want = int_job(rng, "gpu:0")
            r = srv.req("POST", "/v1/jobs", body, {"Prefer": "wait=30"})
            CHECK.eq((r.json().get("status"), r.json().get("result", {}).get("value")), ("succeeded", want),
                     "the lane keeps working after the 507")
        CHECK.eq(srv.req("GET", "/readyz").status, 200, "running out of memory does not break the GPU")
    finally:
        hog.release()
    r = srv.req("POST", "/v1/jobs", big, {"Prefer": "wait=60"})
    res = r.json().get("result") or {}
    CHECK.eq((r.json().get("status"), res.get("value"), res.get("index")), ("succeeded", 7.0, at),
             "once the memory is free the same job succeeds")
    L.check_stop(srv)


def main():
    if L.DEVICE != "gpu":
        raise L.Skip("GPU faults need a GPU: this suite runs under the gpu label")
    kernel_fault()
    out_of_memory()


L.run_suite(main)
