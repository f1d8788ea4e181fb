# test_placement.py: one gpured with two GPUs places a job on a dataset on the GPU whose cache
# holds it (gpu label; skipped with fewer than two GPUs). Two datasets, each filling most of one
# GPU's cache (the cache set to 1.5x one), settle on different GPUs: the first job on each loads
# it into a different GPU, then jobs on both at once run where their dataset lives, every one a
# cache hit with the right sum, and GET /v1/devices shows each GPU holding its own dataset only,
# before and after the load (they stay).
import random
import struct

import e2e_lib as L
from e2e_lib import CHECK

N = 1 << 22  # int32: 16 MiB a dataset


def upload(srv, rng):
    xs = [rng.randrange(-1000, 1000) for _ in range(N)]
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=%d" % N, struct.pack("<%di" % N, *xs),
                {"Content-Type": "application/octet-stream"}, timeout=120)
    CHECK.eq(r.status, 201, "a dataset of %d int32 uploaded" % N)
    return r.json()["id"], sum(xs)


def caches(srv):
    """Each GPU's id (gpu:N) and the datasets its cache holds, as GET /v1/devices lists them."""
    return {g["id"]: sorted(g["cache"]["datasets"]) for g in srv.get_json("/v1/devices")["gpus"]}


def main():
    if L.DEVICE != "gpu":
        raise L.Skip("placement by cached dataset is about GPU caches: this suite runs under the gpu label")
    srv = L.Server(env={"GPURED_GPU_CACHE_BYTES": str(N * 4 * 3 // 2)}).start()
    gpus = srv.get_json("/v1/devices")["gpus"]
    if len(gpus) < 2:
        raise L.Skip("placement across GPUs needs two; the server lists %d" % len(gpus))
    rng = random.Random(5)
    sets = [upload(srv, rng) for _ in range(2)]
    home = {}
    for ds, want in sets:
        j = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds, "device": "gpu"}, {"Prefer": "wait=60"}).json()
        CHECK.eq((j.get("status"), j.get("cache"), (j.get("result") or {}).get("value")), ("succeeded", "miss", want),
                 "the first job on %s loads it into a GPU's cache" % ds)
        home[ds] = j.get("device")
    CHECK.ok(home[sets[0][0]] != home[sets[1][0]],
             "the second dataset goes to the other GPU's empty cache, not over the first: %s" % home)
    before = caches(srv)
    for ds, _ in sets:
        CHECK.eq(before.get(home[ds]), [ds], "GET /v1/devices: %s holds %s only" % (home[ds], ds))
    reqs = [dict(method="POST", path="/v1/jobs", body={"op": "sum", "dataset": sets[k % 2][0], "device": "gpu"},
                 headers={"Prefer": "wait=60"}, timeout=90) for k in range(96)]
    answers = srv.batch(reqs, parallel=8)
    got = [(a.status, a.json().get("status"), a.json().get("device"), a.json().get("cache"),
            (a.json().get("result") or {}).get("value")) for a in answers]
    CHECK.eq(got, [(200, "succeeded", home[sets[k % 2][0]], "hit", sets[k % 2][1]) for k in range(96)],
             "96 jobs on both datasets at once: each on its dataset's GPU, a cache hit, the right sum")
    CHECK.eq(caches(srv), before, "after the load each GPU still holds its own dataset only")
    L.check_stop(srv)


L.run_suite(main)
