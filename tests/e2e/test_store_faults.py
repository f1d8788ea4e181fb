# test_store_faults.py: the store's file taken away under the running server: /readyz answers 503
# with the reason, new jobs and uploads are refused (never acknowledged and then lost), the
# process serves on; with the file back in place everything works again.
import os

import e2e_lib as L
from e2e_lib import CHECK


def main():
    L.store_only("test_store_faults (the gpured.db file renamed away)")
    if L.DEVICE == "gpu":
        raise L.Skip("store faults are device-independent; covered by the cpu run")
    srv = L.start_suite()
    db = os.path.join(srv.data_dir, "gpured.db")
    before = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1, 2]}, {"Prefer": "wait=10"})
    CHECK.eq(before.status, 200, "a job before the fault")
    os.rename(db, db + ".away")
    ready = srv.req("GET", "/readyz")
    if L.check_problem("/readyz with the store file gone", ready, 503):
        CHECK.ok("removed" in ready.json()["detail"], "it says why: %r" % ready.json()["detail"])
    job = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [3, 4]})
    L.check_problem("a job while the store file is gone", job, 500)
    up = srv.req("POST", "/v1/datasets?dtype=int32&shape=2", b"\1" * 8, {"Content-Type": "application/octet-stream"})
    L.check_problem("an upload while the store file is gone", up, 500)
    CHECK.eq(srv.req("GET", "/healthz").status, 200, "the process serves on")
    got = srv.req("GET", "/v1/jobs/" + before.json()["id"])
    CHECK.ok(got.status == 200 or L.check_problem("a read while the store file is gone", got, 500),
             "reads answer, or say the store failed")
    os.rename(db + ".away", db)
    CHECK.eq(srv.req("GET", "/readyz").status, 200, "ready again with the file back")
    again = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [5, 6]}, {"Prefer": "wait=10"})
    CHECK.eq((again.status, again.json().get("result")), (200, {"value": 11, "dtype": "int64"}), "jobs run again")
    srv.kill9()
    srv.start()
    CHECK.eq(srv.req("GET", "/v1/jobs/" + again.json()["id"]).json().get("status"), "succeeded", "and are kept")
    listed = [j["id"] for j in srv.get_json("/v1/jobs")["jobs"]]
    CHECK.eq(len(listed), 2, "only the two acknowledged jobs exist (%r)" % listed)
    L.check_stop(srv)


L.run_suite(main)
