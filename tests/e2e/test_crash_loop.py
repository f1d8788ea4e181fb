# test_crash_loop.py: kill -9 in a loop under concurrent load: 8 clients submit jobs and upload
# datasets while the server is killed at 20 random moments and restarted. Every job that got a
# 2xx ends succeeded with the right answer, every dataset that got a 201 is readable with its
# sha256, PRAGMA integrity_check is ok, and no dataset file lacks its row or row its file.
import hashlib
import os
import random
import struct
import threading
import time

import e2e_lib as L
from e2e_lib import CHECK
from test_durability import finish_all, make_jobs

KILLS = 20
CLIENTS = 8


def main():
    if L.DEVICE == "gpu":
        raise L.Skip("crash recovery is the store's; covered by the cpu run")
    srv = L.start_suite()
    rng = L.rng_for("test_crash_loop")
    accepted, uploads = {}, {}
    for k in range(KILLS):
        jobs = make_jobs(rng, 48, 2000, "round %d" % k)
        res = {}

        def jobs_client():
            reqs = [dict(method="POST", path="/v1/jobs", may_fail=True,
                         body={"op": j["op"], "dtype": j["dtype"], "data": j["data"], "device": L.DEVICE}) for j in jobs]
            res["jobs"] = list(zip(jobs, srv.batch(reqs, parallel=CLIENTS - 1, timeout=20)))

        def upload_client():
            out = []
            for i in range(6):
                values = struct.pack("<256i", *[rng.randrange(-1000, 1000) for _ in range(256)])
                r = srv.req("POST", "/v1/datasets?dtype=int32&shape=256", values,
                            {"Content-Type": "application/octet-stream"}, timeout=20, may_fail=True)
                out.append((values, r))
            res["uploads"] = out

        threads = [threading.Thread(target=jobs_client), threading.Thread(target=upload_client)]
        for t in threads:
            t.start()
        time.sleep(random.Random(k).uniform(0.02, 0.4))
        srv.kill9()
        for t in threads:
            t.join()
        for j, r in res["jobs"]:
            if r.status in (200, 202):
                accepted[r.json()["id"]] = j
        for values, r in res["uploads"]:
            if r.status == 201:
                uploads[r.json()["id"]] = hashlib.sha256(values).hexdigest()
        srv.start()
    print("%d kills: %d jobs and %d datasets acknowledged" % (KILLS, len(accepted), len(uploads)), flush=True)
    CHECK.ok(len(accepted) > KILLS, "the load got jobs in between the kills (%d)" % len(accepted))
    finish_all(srv, accepted, "after %d kills" % KILLS)
    for d, sha in uploads.items():
        r = srv.req("GET", "/v1/datasets/" + d)
        CHECK.eq((r.status, r.status == 200 and r.json().get("sha256")), (200, sha), "dataset %s kept with its sha256" % d)
    L.check_stop(srv)

    if L.STORE == "sqlite":  # PostgreSQL keeps its own files consistent; SQLite's is ours to check
        CHECK.eq(L.store_rows(srv, "PRAGMA integrity_check")[0][0], "ok", "PRAGMA integrity_check")
    rows = {r[0] for r in L.store_rows(srv, "SELECT id FROM datasets")}
    folder = os.path.join(srv.data_dir, "datasets")
    files = {f[:-4] for f in os.listdir(folder) if f.endswith(".bin")}
    left = sorted(files - rows)
    if L.STORE == "postgresql":
        # replicas share the folder: a row-less file a killed replica named under way stays until
        # its lease has run out (the sweep then takes it); none of them was acknowledged
        named = {r[0] for r in L.store_rows(srv, "SELECT id FROM dataset_intents")}
        left = [d for d in left if d not in named]
        CHECK.eq(sorted(set(files - rows) & set(uploads)), [], "no acknowledged upload without its row")
    CHECK.eq(left, [], "no dataset file without its row")
    CHECK.eq(sorted(rows - files), [], "no dataset row without its file")
    CHECK.ok(set(uploads) <= rows, "every acknowledged upload has its row")


if __name__ == "__main__":
    L.run_suite(main)
