# test_launch_groups.py: small whole-array jobs queued one behind another, of one op, dtype and
# length, run as one launch (queues.c's launch groups). A benchmark holds the device's one lane
# while batches queue behind it; then every op and dtype (and ties last) ends with the reference
# answer and a "launch_group" no larger than the run of like jobs it was queued in (at most 256);
# jobs that may not share a launch (another length or op in between, a named variant, a
# dataset) run alone; a job canceled while queued in a run stays canceled and the rest succeed.
import struct

import e2e_lib as L
from e2e_lib import CHECK

N = 50  # values per job


def runs(rng):
    """Runs of like jobs: (what, specs, ties)."""
    out = []
    for op in L.OPS:
        for dt in L.DTYPES:
            specs = [{"op": op, "dtype": dt, "data": L.gen_data(op, dt, N, rng)} for _ in range(12)]
            out.append(("%s %s" % (op, dt), specs, "first"))
    for dt in L.DTYPES:  # ties: the lowest index unless told last, within each job's own values
        for ties in ("first", "last"):
            specs = [{"op": "argmax", "dtype": dt, "ties": ties, "data": L.gen_ties(dt, N, rng)} for _ in range(12)]
            out.append(("argmax %s ties %s" % (dt, ties), specs, ties))
    specs = [{"op": "sum", "dtype": "float32", "data": L.gen_data("sum", "float32", N, rng)} for _ in range(600)]
    out.append(("600 sums", specs, "first"))
    return out


def submit(srv, specs):
    r = srv.req("POST", "/v1/jobs", [dict(s, device=L.DEVICE) for s in specs])
    CHECK.eq(r.status, 202, "a batch of %d queued behind the benchmark" % len(specs))
    return [j["id"] for j in r.json()] if r.status == 202 else []


def ended(srv, ids):
    out = []
    for r in srv.batch([dict(path="/v1/jobs/%s?wait=120&status=succeeded,failed,canceled" % i, timeout=130) for i in ids]):
        out.append(r.json() if r.status == 200 else {})
    return out


def groups_of(srv, rng):
    raw = struct.pack("<%di" % N, *range(N))
    dataset = srv.req("POST", "/v1/datasets?dtype=int32&shape=%d" % N, raw,
                      {"Content-Type": "application/octet-stream"}).json()["id"]
    named = "cpu_seq" if L.DEVICE == "cpu" else "harris7"
    mixed = [{"op": "sum", "dtype": "int32", "data": list(range(N))} for _ in range(5)]
    mixed[1] = dict(mixed[1], data=list(range(N + 1)))      # another length
    mixed[2] = dict(mixed[2], op="max")                      # another op
    mixed[3] = dict(mixed[3], algorithm=named)               # a named variant
    mixed[4] = {"op": "sum", "dtype": "int32", "dataset": dataset}
    canceled = [{"op": "sum", "dtype": "int64", "data": list(range(N))} for _ in range(3)]

    block = L.blocker(srv, 6, L.DEVICE)
    CHECK.eq(block.status, 202, "a benchmark holds the lane")
    cancel_ids = submit(srv, canceled)  # first: the cancel must come while the benchmark runs
    r = srv.req("DELETE", "/v1/jobs/%s" % cancel_ids[1]) if cancel_ids else None
    CHECK.ok(r is not None and r.status in (200, 202, 204), "cancel the middle one of three like jobs: %r" % r)
    all_runs = runs(rng)
    ids = [submit(srv, specs) for _, specs, _ in all_runs]
    mixed_ids = submit(srv, mixed)
    srv.req("GET", "/v1/jobs/%s?wait=120&status=succeeded,failed" % block.json()["id"], timeout=130)

    grouped = 0
    for (what, specs, ties), run_ids in zip(all_runs, ids):
        for k, (spec, job) in enumerate(zip(specs, ended(srv, run_ids))):
            w = "%s #%d" % (what, k)
            L.check_job(w, job, spec["op"], spec["dtype"], [N])
            L.check_result(w, spec["op"], spec["dtype"], [spec["data"]], None, ties, job.get("result"))
            g = job.get("launch_group", 1)
            CHECK.ok(isinstance(g, int) and 1 <= g <= min(len(specs), 256),
                     "%s: launch_group %r within the run of %d like jobs and 256" % (w, g, len(specs)))
            grouped += g > 1
    CHECK.ok(grouped > len(all_runs), "jobs queued behind the benchmark shared launches (%d did)" % grouped)

    docs = ended(srv, mixed_ids)
    for what, job in zip(("the first of five", "another length", "another op", "a named variant", "a dataset"), docs):
        CHECK.eq((job.get("status"), job.get("launch_group", 1)), ("succeeded", 1), "%s runs alone" % what)
    want = [sum(range(N)), sum(range(N + 1)), N - 1, sum(range(N)), sum(range(N))]
    CHECK.eq([d.get("result", {}).get("value") for d in docs], want, "and each has its own answer")
    CHECK.eq([d.get("status") for d in ended(srv, cancel_ids)], ["succeeded", "canceled", "succeeded"],
             "the canceled one of three stays canceled, the others run")


def main():
    srv = L.start_suite(args=["--streams", "1"])
    groups_of(srv, L.rng_for("test_launch_groups"))
    L.check_stop(srv)


L.run_suite(main)
