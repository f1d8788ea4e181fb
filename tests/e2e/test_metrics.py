# test_metrics.py: GET /metrics against what the test itself did: the text format parses strictly,
# names and types follow Prometheus conventions, job counts by op (matmul too) and final status, bytes, stage
# histograms (counts, sums and bucket placement from the jobs' own timings), HTTP requests by
# route and status, gauges back to zero when idle, device memory as /v1/devices reports it.
import threading
import time

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

FINAL = ("succeeded", "failed", "canceled")
OPS = L.OPS + ["matmul"]
STAGES = ("queue", "h2d", "kernel", "d2h", "total")
FAMILIES = {
    "gpured_http_requests_total": "counter", "gpured_jobs_total": "counter",
    "gpured_job_stage_seconds": "histogram", "gpured_processed_bytes_total": "counter",
    "gpured_jobs_queued": "gauge", "gpured_jobs_running": "gauge", "gpured_parked_requests": "gauge",
    "gpured_device_info": "gauge", "gpured_device_memory_total_bytes": "gauge",
    "gpured_device_memory_used_bytes": "gauge", "gpured_device_utilization_ratio": "gauge",
}


def check_format(m, what):
    CHECK.ok(not m.problems, "%s: exposition problems: %s" % (what, m.problems[:5]))
    for fam, typ in FAMILIES.items():
        CHECK.eq(m.types.get(fam), typ, "%s: # TYPE of %s" % (what, fam))
        CHECK.ok(m.helps.get(fam), "%s: # HELP of %s" % (what, fam))
    for fam, typ in m.types.items():
        CHECK.ok(fam.startswith("gpured_"), "%s: family %s lacks the gpured_ prefix" % (what, fam))
        CHECK.ok((typ == "counter") == fam.endswith("_total"), "%s: %s is a %s: only counters end in _total" % (what, fam, typ))
    # every histogram: cumulative buckets, +Inf == _count
    hists = {}
    for (name, labels), v in m.samples.items():
        if name == "gpured_job_stage_seconds_bucket":
            d = dict(labels)
            le = d.pop("le")
            hists.setdefault(tuple(sorted(d.items())), []).append((float(le), le, v))
    for key, buckets in hists.items():
        buckets.sort()
        counts = [v for _, _, v in buckets]
        CHECK.ok(counts == sorted(counts), "%s: buckets of %r are not cumulative: %r" % (what, key, counts))
        CHECK.ok(buckets[-1][0] == float("inf"), "%s: %r has no +Inf bucket" % (what, key))
        CHECK.eq(counts[-1], m.get("gpured_job_stage_seconds_count", **dict(key)), "%s: +Inf bucket vs _count of %r" % (what, key))
    return hists


def delta(m1, m0, name, **labels):
    return m1.get(name, **labels) - m0.get(name, **labels)


def scrape_until(srv, ok, timeout=3):
    """HTTP requests are counted once their connection is done with them, which can trail the
    client by a moment: scrape until ok(m) holds or the time is up, and return the last scrape."""
    deadline = time.time() + timeout
    while True:
        m = O.scrape(srv)
        if ok(m) or time.time() > deadline:
            return m
        time.sleep(0.05)


def main():
    srv = L.start_suite()
    rng = L.rng_for("test_metrics")
    r = srv.req("GET", "/metrics")
    CHECK.eq(r.status, 200, "GET /metrics")
    CHECK.ok(r.headers.get("content-type", "").startswith("text/plain; version=0.0.4"),
             "content-type %r" % r.headers.get("content-type"))
    m0 = O.Metrics(r.body.decode())
    check_format(m0, "fresh server")

    devs = srv.get_json("/v1/devices")
    names = ["cpu"] + [g["id"] for g in devs["gpus"]]
    for d in names:
        for op in OPS:
            for st in FINAL:
                CHECK.ok(("gpured_jobs_total", tuple(sorted(dict(device=d, op=op, status=st).items()))) in m0.samples,
                         "gpured_jobs_total has no series for %s/%s/%s" % (d, op, st))
    CHECK.eq(m0.get("gpured_device_memory_total_bytes", device="cpu"), devs["cpu"]["memory_bytes"], "cpu memory gauge")
    for g in devs["gpus"]:
        CHECK.eq(m0.get("gpured_device_memory_total_bytes", device=g["id"]), g["memory_bytes"], "%s memory gauge" % g["id"])
        used = m0.samples.get(("gpured_device_memory_used_bytes", (("device", g["id"]),)))
        CHECK.ok(used is not None and 0 < used <= g["memory_bytes"], "%s memory in use %r" % (g["id"], used))
        CHECK.eq(m0.get("gpured_device_info", device=g["id"], name=g["name"]), 1, "%s info" % g["id"])
        # NVML comes with the driver the GPU machine runs, so the series must be there
        busy = m0.samples.get(("gpured_device_utilization_ratio", (("device", g["id"]),)))
        CHECK.ok(busy is not None and 0 <= busy <= 1, "%s utilisation %r (NVML)" % (g["id"], busy))
    for fam in ("gpured_device_memory_used_bytes", "gpured_device_utilization_ratio"):
        CHECK.ok((fam, (("device", "cpu"),)) not in m0.samples, "no %s series for the cpu" % fam)

    # jobs: every op, a few sizes, waited for; then the counters against the jobs' own documents
    specs = []
    for op in L.OPS:
        for _ in range(rng.randint(1, 3)):
            dt = rng.choice(L.DTYPES)
            specs.append({"op": op, "dtype": dt, "data": L.gen_data(op, dt, rng.randint(1, 20000), rng), "device": L.DEVICE})
    for _ in range(rng.randint(1, 3)):  # products count as op "matmul", their stages as every job's
        dt, m, k, n = rng.choice(["float32", "float64"]), rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 40)
        specs.append({"op": "matmul", "dtype": dt, "device": L.DEVICE,
                      "a": {"data": L.reshape([rng.uniform(-1, 1) for _ in range(m * k)], m, k)},
                      "b": {"data": L.reshape([rng.uniform(-1, 1) for _ in range(k * n)], k, n)}})
    jobs = []
    for s, r in zip(specs, srv.batch([dict(method="POST", path="/v1/jobs", body=s, headers={"Prefer": "wait=10"}) for s in specs])):
        if CHECK.eq(r.status, 200, "POST %s %s with Prefer: wait" % (s["op"], s["dtype"])):
            jobs.append(r.json())
    CHECK.ok(any(j["op"] == "matmul" and j["status"] == "succeeded" for j in jobs), "a matmul job succeeded")
    m1 = O.scrape(srv)
    hists = check_format(m1, "after %d jobs" % len(jobs))
    for d in names:
        mine = [j for j in jobs if j["device"] == d]
        for op in OPS:
            want = sum(1 for j in mine if j["op"] == op and j["status"] == "succeeded")
            CHECK.eq(delta(m1, m0, "gpured_jobs_total", device=d, op=op, status="succeeded"), want, "jobs_total %s %s succeeded" % (d, op))
        CHECK.eq(delta(m1, m0, "gpured_processed_bytes_total", device=d), sum(j["bytes"] for j in mine), "processed bytes on %s" % d)
        for st in STAGES:
            ts = [j["timings_ms"][st] for j in mine if j["timings_ms"][st] > 0 or st in ("queue", "total")]
            lbl = dict(device=d, stage=st)
            CHECK.eq(delta(m1, m0, "gpured_job_stage_seconds_count", **lbl), len(ts), "stage %s count on %s" % (st, d))
            got = delta(m1, m0, "gpured_job_stage_seconds_sum", **lbl)
            want = sum(t / 1e3 for t in ts)
            CHECK.ok(abs(got - want) <= 1e-8 * len(ts) + 1e-9, "stage %s sum on %s: %r s, jobs say %r s" % (st, d, got, want))
            # each job in the first bucket whose bound is >= its time
            key = tuple(sorted(lbl.items()))
            CHECK.ok(len(hists.get(key, [])) > 10, "stage %s on %s: %d buckets" % (st, d, len(hists.get(key, []))))
            for le, lab, _ in hists.get(key, []):
                got_b = delta(m1, m0, "gpured_job_stage_seconds_bucket", le=lab, **lbl)
                want_b = sum(1 for t in ts if t / 1e3 <= le)
                if not CHECK.eq(got_b, want_b, "stage %s on %s: jobs in bucket le=%s" % (st, d, lab)):
                    break

    # a burst without waiting, canceled newest first: canceled + succeeded add up, gauges stay sane
    burst = [{"op": "sum", "dtype": "float64", "data": L.gen_data("sum", "float64", 100000, rng), "device": L.DEVICE}
             for _ in range(24)]
    gauges, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            g = O.scrape(srv)
            gauges.append([(s, d, g.get(s, device=d)) for s in ("gpured_jobs_queued", "gpured_jobs_running") for d in names])

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    ids = [r.json()["id"] for r in srv.batch([dict(method="POST", path="/v1/jobs", body=b) for b in burst], parallel=6)
           if CHECK.eq(r.status, 202, "burst POST")]
    cancels = srv.batch([dict(method="DELETE", path="/v1/jobs/" + j) for j in sorted(ids, reverse=True)])
    n_cancel = sum(1 for r in cancels if r.status == 200)
    # 200: canceled while queued; 409: running; 204: it had ended, and is deleted
    CHECK.ok(all(r.status in (200, 204, 409) for r in cancels), "cancel answers %r" % sorted({r.status for r in cancels}))
    live = [j for j, r in zip(sorted(ids, reverse=True), cancels) if r.status != 204]
    final = {}
    deadline = time.time() + 60
    while time.time() < deadline:
        final = {j: srv.get_json("/v1/jobs/" + j)["status"] for j in live}
        if all(s in FINAL for s in final.values()):
            break
        time.sleep(0.1)
    stop.set()
    t.join()
    print("burst: %d jobs, %d canceled while queued; %d gauge samples" % (len(ids), n_cancel, len(gauges)), flush=True)
    CHECK.eq(sum(1 for s in final.values() if s == "canceled"), n_cancel, "canceled jobs vs 200 answers to DELETE")
    bad = [s for g in gauges for s in g if not (0 <= s[2] <= len(ids)) or (s[0] == "gpured_jobs_running" and s[2] > 1)]
    CHECK.ok(not bad, "gauges out of range during the burst (one worker per device): %r" % bad[:5])
    m2 = O.scrape(srv)
    ended = {st: sum(delta(m2, m1, "gpured_jobs_total", device=d, op="sum", status=st) for d in names)
             for st in ("canceled", "succeeded")}  # on whichever device ran them (deleted ones name none now)
    CHECK.eq(ended["canceled"], n_cancel, "jobs_total canceled")
    CHECK.eq(ended["succeeded"], len(ids) - n_cancel, "jobs_total burst succeeded")
    for d in names:
        for g in ("gpured_jobs_queued", "gpured_jobs_running"):
            CHECK.eq(m2.get(g, device=d), 0, "%s{device=%s} once idle" % (g, d))
    CHECK.eq(m2.get("gpured_parked_requests"), 0, "parked requests once idle")
    CHECK.eq(srv.get_json("/readyz").get("queued"), 0, "/readyz queued once idle")

    # HTTP requests by route, method and status
    reqs = ([dict(path="/v1/devices")] * 3 + [dict(path="/v1/jobs/j_0000000000000000")] * 2 +
            [dict(method="PUT", path="/v1/jobs"), dict(path="/no/such/path"),
             dict(method="POST", path="/v1/jobs", body="{}", headers={"Content-Type": "text/plain"}),
             dict(method="POST", path="/v1/jobs", body="{")])
    want = {("/v1/devices", "GET", "200"): 3, ("/v1/jobs/{id}", "GET", "404"): 2, ("/v1/jobs", "other", "405"): 1,
            ("unmatched", "GET", "404"): 1, ("/v1/jobs", "POST", "415"): 1, ("/v1/jobs", "POST", "400"): 1}
    m3 = O.scrape(srv)
    for r in srv.batch(reqs):
        CHECK.ok(r.status in (200, 400, 404, 405, 415), "request answered %d" % r.status)

    def got(m):
        return {k: delta(m, m3, "gpured_http_requests_total", route=k[0], method=k[1], code=k[2]) for k in want}
    m4 = scrape_until(srv, lambda m: got(m) == want)
    CHECK.eq(got(m4), want, "http_requests_total deltas")
    CHECK.ok(delta(m4, m3, "gpured_http_requests_total", route="/metrics", method="GET", code="200") >= 1,
             "scrapes are counted too")

    L.check_stop(srv)


if __name__ == "__main__":
    L.run_suite(main)
