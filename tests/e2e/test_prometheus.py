# test_prometheus.py: gpured under a real Prometheus (Debian's prometheus package). promtool
# check metrics passes on /metrics; a Prometheus scraping the test server every second with
# deploy/prometheus/alerts.yaml loaded has the series with the right labels and values (jobs by
# device, op and status; stage and HTTP histograms; store commits; queue capacity; disk free;
# build info equal to /v1/devices' build), the target up and every alert rule healthy; every
# query of deploy/grafana/gpured.json runs without error there and names only metrics gpured
# exports.
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import e2e_lib as L
from e2e_lib import CHECK

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
ALERTS = os.path.join(ROOT, "deploy", "prometheus", "alerts.yaml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "gpured.json")
CAPACITY = 777


def api(base, path, **params):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise RuntimeError("%s: %s" % (path, doc))
    return doc["data"]


def query(base, expr):
    return api(base, "/api/v1/query", query=expr)["result"]


def start_prometheus(srv, workdir):
    port = L.free_port()
    cfg = os.path.join(workdir, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "rule_files: [%s]\n"
                "scrape_configs:\n"
                "  - job_name: gpured\n"
                "    static_configs: [{targets: ['127.0.0.1:%d']}]\n" % (json.dumps(ALERTS), srv.port))
    log = open(os.path.join(workdir, "prometheus.log"), "w")
    p = subprocess.Popen(["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                          "--web.listen-address=127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
    return p, "http://127.0.0.1:%d" % port


def wait_for(what, fn, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            got = fn()
            if got:
                return got
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("Prometheus never had " + what)


def one(base, expr):
    r = query(base, expr)
    return float(r[0]["value"][1]) if len(r) == 1 else None


def check_series(srv, base, sums):
    build = srv.get_json("/v1/devices")["build"]
    info = query(base, "gpured_build_info")
    CHECK.eq([{k: s["metric"].get(k) for k in ("job", "version", "commit", "cuda")} for s in info],
             [dict(build, job="gpured")], "gpured_build_info has /v1/devices' build as labels")
    CHECK.eq(one(base, 'up{job="gpured"}'), 1.0, "the target is up")
    CHECK.eq(one(base, 'gpured_jobs_total{job="gpured",device="cpu",op="sum",status="succeeded"}'), float(sums),
             "gpured_jobs_total counts the sums by device, op and status")
    CHECK.eq(one(base, 'gpured_jobs_total{device="cpu",op="max",status="failed"}'), 0.0, "and none failed")
    CHECK.eq(one(base, 'gpured_queue_capacity{device="cpu"}'), float(CAPACITY), "gpured_queue_capacity")
    CHECK.eq(one(base, 'gpured_device_up{device="cpu"}'), 1.0, "gpured_device_up")
    free = one(base, "gpured_data_dir_free_bytes")
    CHECK.ok(free is not None and free > 0, "gpured_data_dir_free_bytes %r" % free)
    stages = {s["metric"]["stage"] for s in query(base, 'gpured_job_stage_seconds_count{device="cpu"}')}
    CHECK.eq(stages, {"queue", "h2d", "kernel", "d2h", "total"}, "stage histograms by stage")
    total = one(base, 'gpured_job_stage_seconds_bucket{device="cpu",stage="total",le="+Inf"}')
    CHECK.eq(total, float(sums), "the total stage's +Inf bucket holds every job")
    posts = one(base, 'gpured_http_request_duration_seconds_count{route="/v1/jobs"}')
    CHECK.ok(posts is not None and posts >= sums, "HTTP duration histogram by route: %r >= %d" % (posts, sums))
    commits = one(base, "gpured_store_commit_seconds_count")
    CHECK.ok(commits is not None and commits >= 1, "store commit histogram: %r" % commits)
    q = one(base, 'histogram_quantile(0.5, rate(gpured_store_commit_seconds_bucket[1m]))')
    CHECK.ok(q is None or q >= 0, "a quantile of the commit histogram computes: %r" % q)


def check_rules(base):
    groups = api(base, "/api/v1/rules")["groups"]
    CHECK.eq([g["name"] for g in groups], ["gpured"], "alerts.yaml's group is loaded")
    rules = groups[0]["rules"] if groups else []
    with open(ALERTS) as f:
        names = re.findall(r"^\s*- alert: (\w+)", f.read(), re.M)
    CHECK.eq([r["name"] for r in rules], names, "every alert rule is loaded")
    wait_for("every rule evaluated", lambda: all(r.get("health") == "ok" for r in api(base, "/api/v1/rules")["groups"][0]["rules"]))
    for r in api(base, "/api/v1/rules")["groups"][0]["rules"]:
        CHECK.eq((r["health"], r.get("lastError", "")), ("ok", ""), "rule %s evaluates" % r["name"])
    firing = [a["labels"]["alertname"] for a in api(base, "/api/v1/alerts")["alerts"]]
    CHECK.eq(firing, [], "no alert pending or firing on a healthy server")


def check_dashboard(base, metrics):
    """metrics: /metrics' text, whose # TYPE lines name every family gpured exports (the GPUs'
    have no series on a machine without one, but are named)."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exported = set(re.findall(r"^# TYPE (\w+) ", metrics, re.M))
    # rates need two scrapes in their window: until then every rate query is empty, NaN or not
    wait_for("rates over the scrapes", lambda: query(base, "rate(gpured_job_stage_seconds_count[1m])"))
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    CHECK.ok(len(exprs) >= 10, "the dashboard has its queries (%d)" % len(exprs))
    variables = {v["name"] for v in dash.get("templating", {}).get("list", [])}
    used = set(re.findall(r"\$\{(\w+)\}", json.dumps(dash)))
    CHECK.eq((sorted(used - variables), "__inputs" in dash), ([], False),
             "the dashboard names only its own variables, and declares no import inputs it does not use")
    for expr in exprs:
        names = {re.sub(r"_(bucket|count|sum)$", "", n) for n in re.findall(r"\bgpured_\w+", expr)}
        CHECK.eq(sorted(names - exported), [],
                 "the dashboard's metrics exist: %s" % expr[:120])
        concrete = expr.replace("$__rate_interval", "1m").replace("$instance", ".*").replace("$device", ".*")
        try:
            got = query(base, concrete)
            ok = True
        except (OSError, RuntimeError) as e:
            got, ok = [], str(e)
        CHECK.eq(ok, True, "the dashboard query runs in Prometheus: %s" % expr[:120])
        # a panel shows no data, not NaN, where the CPU has no such stage or cache
        CHECK.eq([r["metric"] for r in got if r.get("value", [0, "0"])[1] == "NaN"], [],
                 "the dashboard query gives no NaN on the CPU: %s" % expr[:120])


def main():
    L.store_independent("test_prometheus (metrics are the store's and the device's alike)")
    if L.DEVICE == "gpu":
        raise L.Skip("the scrape and rules are device-independent; covered by the cpu run")
    if not shutil.which("prometheus") or not shutil.which("promtool"):
        raise RuntimeError("prometheus and promtool are needed (apt-get install prometheus)")
    srv = L.start_suite(args=["--queue-capacity", str(CAPACITY)])
    sums = 5
    for i in range(sums):
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [i, 1]}, {"Prefer": "wait=10"})
        CHECK.eq(r.status, 200, "sum %d" % i)
    metrics = srv.req("GET", "/metrics")
    lint = subprocess.run(["promtool", "check", "metrics"], input=metrics.body, capture_output=True)
    CHECK.eq((lint.returncode, lint.stdout + lint.stderr), (0, b""), "promtool check metrics passes on /metrics")

    workdir = tempfile.mkdtemp(prefix="gpured-prom-")
    prom, base = start_prometheus(srv, workdir)
    try:
        wait_for("the server ready", lambda: urllib.request.urlopen(base + "/-/ready", timeout=5).status == 200)
        wait_for("a scrape of gpured", lambda: query(base, "gpured_build_info"))
        check_series(srv, base, sums)
        check_rules(base)
        check_dashboard(base, metrics.body.decode())
    except Exception:
        with open(os.path.join(workdir, "prometheus.log")) as f:
            print("---- prometheus log (tail) ----\n" + "".join(f.readlines()[-40:]))
        raise
    finally:
        prom.terminate()
        prom.wait(timeout=30)
    shutil.rmtree(workdir, ignore_errors=True)
    L.check_stop(srv)


L.run_suite(main)
