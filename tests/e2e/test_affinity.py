# test_affinity.py: a job on a dataset goes to the replica whose GPU caches it (gpu label; two
# replicas on one PostgreSQL database of the suite's own and one data directory). Both replicas
# use every GPU of this machine, each GPU with a dataset cache per replica, so a dataset cached by
# A is cached nowhere in B whichever GPU holds it. A dataset run once through replica A is in A's
# cache, A announces it (GET /v1/devices through B lists it under one of A's GPUs), and once B has
# read the announcements back (each replica does at each renewal, every third of a lease) jobs on
# it sent to B run on A and hit A's cache, while B's cache never loads it; the same the other way
# round for a dataset B caches. Every answer is checked against the sum computed here.
import random
import struct
import time

import e2e_lib as L
from e2e_lib import CHECK

N = 1 << 18
LEASE_S = 1


def upload(srv, rng):
    xs = [rng.randrange(-1000, 1000) for _ in range(N)]
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=%d" % N, struct.pack("<%di" % N, *xs),
                {"Content-Type": "application/octet-stream"})
    CHECK.eq(r.status, 201, "a dataset uploaded through %s" % srv.name)
    return r.json()["id"], sum(xs)


def cached_on(srv, dataset):
    """The replica ids whose GPU caches dataset, as GET /v1/devices through srv lists them."""
    d = srv.get_json("/v1/devices")
    return sorted(x["replica"] for x in d.get("replicas", [])
                  for g in x.get("gpus", []) if dataset in g.get("cache", {}).get("datasets", []))


def settle(srv, dataset, home):
    deadline = time.time() + 15
    while cached_on(srv, dataset) != [home] and time.time() < deadline:
        time.sleep(0.2)
    CHECK.eq(cached_on(srv, dataset), [home], "GET /v1/devices through %s: dataset %s cached on its home only"
             % (srv.name, dataset))
    # the store lists it; srv places jobs by what it read at its last renewal, a third of a lease
    # ago at most (GET /v1/devices does not show that copy): three renewals make sure
    time.sleep(LEASE_S)


def run_on(srv, dataset, want, n):
    """n jobs on dataset sent to srv with Prefer: wait: the replicas they ran on, and cache states."""
    body = {"op": "sum", "dataset": dataset, "device": "auto"}
    answers = srv.batch([dict(method="POST", path="/v1/jobs", body=body, headers={"Prefer": "wait=30"}, timeout=40)
                         for _ in range(n)], parallel=4)
    jobs = [a.json() for a in answers]
    CHECK.eq([(a.status, j.get("status"), (j.get("result") or {}).get("value")) for a, j in zip(answers, jobs)],
             [(200, "succeeded", want)] * n, "%d jobs on %s through %s: each the right sum" % (n, dataset, srv.name))
    return {j.get("replica") for j in jobs}, {j.get("cache") for j in jobs}


def main():
    if L.DEVICE != "gpu":
        raise L.Skip("dataset affinity is about GPU caches: this suite runs under the gpu label")
    env = {"GPURED_STORE": L.pg_cluster().create_db("affinity"), "GPURED_LEASE": str(LEASE_S)}
    a = L.Server(name="replica-a", env=env).start()
    if not a.get_json("/v1/devices").get("gpus"):
        raise L.Skip("GPURED_TEST_DEVICE=gpu but the server lists no GPU")
    b = L.Server(data_dir=a.data_dir, name="replica-b", env=env).start()
    ida, idb = a.get_json("/v1/devices")["replica"], b.get_json("/v1/devices")["replica"]
    rng = random.Random(11)
    for home, other, home_id in ((a, b, ida), (b, a, idb)):
        ds, want = upload(other, rng)  # uploaded through either: the folder is shared
        first = home.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds, "device": "gpu"}, {"Prefer": "wait=30"})
        CHECK.eq((first.json().get("cache"), first.json().get("replica")), ("miss", home_id),
                 "the first job on %s loads it into %s's cache" % (ds, home.name))
        settle(other, ds, home_id)
        ran, caches = run_on(other, ds, want, 24)
        CHECK.eq((sorted(ran), sorted(caches)), ([home_id], ["hit"]),
                 "jobs on %s sent to %s ran on %s and hit its cache" % (ds, other.name, home.name))
        CHECK.eq(cached_on(home, ds), [home_id], "%s never loaded %s" % (other.name, ds))
        CHECK.ok(any("offered to " + home_id in line for line in other.log),
                 "%s says it offered them to %s" % (other.name, home.name))
    L.check_stop(a)
    L.check_stop(b)


L.run_suite(main)
