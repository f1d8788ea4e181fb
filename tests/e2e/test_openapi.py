# test_openapi.py: GET /openapi.json is api/openapi.yaml, covers every route and method of the
# routing table (api/routes.c) and nothing else, validates answers this test provokes (non-finite
# results as strings, problems, jobs and datasets with their tenant, 401s, idempotent replays) with
# jsonschema_rs, then schemathesis (pinned, from PyPI into a venv in the build dir) runs every
# operation against the live server: no 5xx, status codes, content types, headers and bodies as the
# spec says, and 401 where the spec asks for a token. The server runs with a tokens file (tenant
# alice, admin root); every request carries alice's token unless it says otherwise.
import atexit
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

O.cpu_label_only("test_openapi")
O.with_debian_python("yaml")

SCHEMATHESIS = "4.32.5"
SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
METHODS = ("get", "post", "delete")
# what the spec leaves open (security: []); every other operation needs a token
OPEN = {("/healthz", "get"), ("/readyz", "get"), ("/", "get"), ("/assets/{}", "get")}
TOKENS = {"alice": secrets.token_hex(16), "root": secrets.token_hex(16)}
NO_TOKEN = {"Authorization": None}      # curl sends no Authorization header


def bearer(tenant):
    return {"Authorization": "Bearer " + TOKENS[tenant]}


class TokenServer(L.Server):
    """A Server whose requests carry alice's token, unless headers name Authorization themselves."""

    def req(self, method, path, body=None, headers=None, timeout=60, may_fail=False):
        return super().req(method, path, body, dict(bearer("alice"), **(headers or {})), timeout, may_fail)

    def batch(self, reqs, parallel=0, timeout=60):
        reqs = [dict(r, headers=dict(bearer("alice"), **(r.get("headers") or {}))) for r in reqs]
        return super().batch(reqs, parallel, timeout)


def tokens_file():
    fd, path = tempfile.mkstemp(prefix="gpured-tokens-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write("# TENANT  TOKEN  [admin]\n\nalice  %s\nroot   %s   admin\n" % (TOKENS["alice"], TOKENS["root"]))
    atexit.register(os.unlink, path)
    return path


# Where the contract is looser than JSON Schema can say, per check (see the comments).
CONFIG = """
[checks]
enabled = true
# DELETE /v1/jobs/{id} of a queued job cancels it (200): the job stays readable (status canceled);
# only a finished one's DELETE (204) removes it.
use_after_free.enabled = false

[[operations]]
include-path = "/v1/jobs"
include-method = "POST"
# A schema-valid body can still be refused by design: 422 when shape's product is not the element
# count, an integer dtype gets 1.5, a value is out of float32's range, rows are ragged, axis 1 on
# 1-D data, a device is absent; 400 for a variant name the device does not have.
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path = "/v1/events"
# An event stream does not end: each request would wait out --request-timeout. test_events.py
# checks the stream's events against the Event schema instead.
enabled = false

[[operations]]
include-path = "/v1/benchmarks"
include-method = "POST"
# Only bodies the spec says are wrong: a valid one can keep the CPU busy for minutes (n up to
# 2^28, 100 repeats of every variant). A small valid one is checked against the spec above.
generation.mode = "negative"
"""


def venv_with_schemathesis():
    """<build>/ops-venv with the pinned schemathesis; raises Skip only when PyPI cannot be had."""
    venv = os.path.join(O.build_dir(), "ops-venv")
    st = os.path.join(venv, "bin", "schemathesis")
    try:
        have = subprocess.run([st, "--version"], capture_output=True, text=True).stdout
    except OSError:
        have = ""
    if SCHEMATHESIS in have:
        return venv
    print("installing schemathesis==%s into %s" % (SCHEMATHESIS, venv), flush=True)
    p = subprocess.run([sys.executable, "-m", "venv", "--clear", venv], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("python -m venv failed (python3-venv installed?): %s" % p.stderr[-500:])
    p = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--disable-pip-version-check",
                        "schemathesis==" + SCHEMATHESIS], capture_output=True, text=True)
    if p.returncode:
        raise L.Skip("cannot install schemathesis==%s from PyPI: %s" % (SCHEMATHESIS, p.stderr.strip()[-500:]))
    return venv


def routes_table():
    """{(path with {} for ids, method)} from the gr_routes table in api/routes.c."""
    with open(os.path.join(SRC, "api", "routes.c")) as f:
        text = f.read()
    table = text[text.index("gr_routes[] = {"):]
    out = set()
    for path, *handlers in re.findall(r'\{"([^"]+)",\s*(\w+),\s*(\w+),\s*(\w+),', table):
        for method, h in zip(METHODS, handlers):
            if h != "NULL":
                out.add((re.sub(r"\{\w+\}", "{}", path), method))
    return out


def check_spec(spec):
    import yaml
    with open(os.path.join(SRC, "api", "openapi.yaml")) as f:
        CHECK.ok(yaml.safe_load(f) == spec, "GET /openapi.json differs from api/openapi.yaml (rebuild?)")
    CHECK.ok(str(spec.get("openapi", "")).startswith("3."), "openapi version %r" % spec.get("openapi"))
    ops = {(re.sub(r"\{\w+\}", "{}", p), m) for p, item in spec["paths"].items() for m in item if m in METHODS}
    routes = routes_table()
    CHECK.ok(len(routes) >= 10, "read %d routes from api/routes.c" % len(routes))
    CHECK.eq(sorted(routes - ops), [], "routes the spec does not describe")
    CHECK.eq(sorted(ops - routes), [], "spec operations the server does not route")
    CHECK.eq(spec.get("components", {}).get("securitySchemes", {}).get("bearerAuth", {}).get("scheme"), "bearer",
             "securitySchemes.bearerAuth is http bearer")
    CHECK.eq(spec.get("security"), [{"bearerAuth": []}], "bearerAuth applies to every operation but the open ones")
    opened = set()
    for p, item in spec["paths"].items():
        for m, op in item.items():
            if m not in METHODS:
                continue
            if op.get("security") == []:
                opened.add((re.sub(r"\{\w+\}", "{}", p), m))
            else:
                CHECK.ok("401" in op["responses"], "%s %s needs a token: it answers 401" % (m, p))
            for code, resp in op["responses"].items():
                resp = resolve(spec, resp)
                if code.startswith(("4", "5")):
                    CHECK.eq(list(resp.get("content", {})), ["application/problem+json"], "%s %s %s content" % (m, p, code))
    CHECK.eq(sorted(opened), sorted(OPEN), "operations open without a token (security: [])")
    nums = spec["components"]["schemas"]["Number"]["anyOf"]
    CHECK.ok(any(set(s.get("enum", [])) == {"NaN", "Infinity", "-Infinity"} for s in nums),
             "Number schema spells out the non-finite strings: %r" % nums)


def resolve(spec, obj):
    while "$ref" in obj:
        node = spec
        for part in obj["$ref"].lstrip("#/").split("/"):
            node = node[part]
        obj = node
    return obj


def validate(venv, spec, docs):
    """[(name, doc)] against components/schemas/NAME, with jsonschema_rs from the venv."""
    prog = (
        "import json, sys, jsonschema_rs\n"
        "spec, docs = json.load(sys.stdin)\n"
        "for name, doc in docs:\n"
        "    root = dict(spec, **{'$ref': '#/components/schemas/' + name})\n"
        "    errs = [e.message for e in jsonschema_rs.Draft202012Validator(root).iter_errors(doc)]\n"
        "    print(json.dumps(errs))\n")
    p = subprocess.run([os.path.join(venv, "bin", "python"), "-c", prog], input=json.dumps([spec, docs]),
                       capture_output=True, text=True)
    if not CHECK.eq(p.returncode, 0, "jsonschema_rs run: %s" % p.stderr[-400:]):
        return
    for (name, doc), line in zip(docs, p.stdout.splitlines()):
        errs = json.loads(line)
        CHECK.ok(not errs, "%s does not match schema %s: %s (%s)" % (json.dumps(doc)[:200], name, errs[:3], name))


def provoked(srv, spec):
    """Answers with non-finite results, an axis result, problems, tenants and replays, for the validator."""
    docs = []
    for data, want in (([1e308, 1e308], "Infinity"), ([-1e308, -1e308], "-Infinity"), ([1e308, 1e308, 0.0], "NaN")):
        op = "prod" if want == "NaN" else "sum"
        r = srv.req("POST", "/v1/jobs", {"op": op, "dtype": "float64", "data": data, "device": "cpu"}, {"Prefer": "wait=10"})
        if CHECK.eq(r.status, 200, "%s job" % want):
            job = r.json()
            CHECK.eq(job["result"], {"value": want, "dtype": "float64"}, "%s of %r is the string %r" % (op, data, want))
            docs.append(("Job", job))
    r = srv.req("POST", "/v1/jobs", {"op": "argmin", "dtype": "int32", "data": [[3, 1], [0, 5]], "axis": 0,
                                     "device": "cpu"}, {"Prefer": "wait=10"})
    if CHECK.eq(r.status, 200, "axis job"):
        docs.append(("Job", r.json()))
        docs.append(("Result", srv.get_json("/v1/jobs/%s/result" % r.json()["id"])))
    r = srv.req("POST", "/v1/benchmarks", {"op": "max", "dtype": "int32", "n": 1000, "repeats": 2, "device": "cpu"},
                {"Prefer": "wait=30"}, timeout=60)
    if CHECK.eq(r.status, 200, "benchmark job"):
        docs.append(("Job", r.json()))
        CHECK.ok(r.json().get("result", {}).get("rows"), "benchmark rows %r" % r.json().get("result"))
        docs.append(("BenchmarkResult", srv.get_json("/v1/jobs/%s/result" % r.json()["id"])))
    # a result kept as datasets (over 4096 outputs, with indices) and a matmul product
    r = srv.req("POST", "/v1/jobs", {"op": "argmax", "dtype": "int32", "data": [[k % 5, 1] for k in range(4097)],
                                     "axis": 1, "device": "cpu"}, {"Prefer": "wait=30"})
    if CHECK.eq(r.status, 200, "kept result job"):
        CHECK.ok("indices_dataset" in r.json()["result"], "4097 outputs are kept as datasets")
        docs.append(("Job", r.json()))
        docs.append(("Result", srv.get_json("/v1/jobs/%s/result" % r.json()["id"])))
    r = srv.req("POST", "/v1/jobs", {"op": "matmul", "dtype": "float64", "a": {"data": [[1, 2], [3, 4]]},
                                     "b": {"data": [[5], [6]]}, "device": "cpu"}, {"Prefer": "wait=30"})
    if CHECK.eq(r.status, 200, "matmul job"):
        docs.append(("Job", r.json()))
        docs.append(("Result", srv.get_json("/v1/jobs/%s/result" % r.json()["id"])))
    docs.append(("JobList", srv.get_json("/v1/jobs?limit=3")))
    for body, code in (('{"op": "sum"', 400), ({"op": "sum", "dtype": "int32", "data": []}, 422)):
        r = srv.req("POST", "/v1/jobs", body)
        CHECK.eq(r.status, code, "problem %d" % code)
        docs.append(("Problem", r.json()))
    return docs + tenants(srv) + idempotent(srv, spec)


def tenants(srv):
    """Jobs and datasets carry their tenant: alice's own, kept results too; root (admin) lists alice's."""
    docs = []
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=3", b"\x01\0\0\0\x02\0\0\0\x03\0\0\0",
                {"Content-Type": "application/octet-stream"})
    if CHECK.eq(r.status, 201, "upload a dataset"):
        ds = r.json()
        CHECK.eq(ds.get("tenant"), "alice", "an uploaded dataset is its token's tenant's")
        docs += [("Dataset", ds), ("Dataset", srv.get_json("/v1/datasets/" + ds["id"]))]
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": ds["id"], "device": "cpu"}, {"Prefer": "wait=10"})
        if CHECK.eq(r.status, 200, "job on the dataset"):
            CHECK.eq((r.json().get("tenant"), r.json().get("result")), ("alice", {"value": 6, "dtype": "int64"}), "job on alice's dataset")
            docs.append(("Job", r.json()))
    jobs = srv.get_json("/v1/jobs?limit=50")["jobs"]
    CHECK.ok(jobs and all(j.get("tenant") == "alice" for j in jobs), "alice's jobs carry tenant alice: %r"
             % sorted({j.get("tenant") for j in jobs}, key=str))
    kept = [j["result"]["indices_dataset"] for j in jobs if "indices_dataset" in (j.get("result") or {})]
    if CHECK.ok(kept, "a job of alice kept its result as datasets"):
        d = srv.get_json("/v1/datasets/" + kept[0])
        CHECK.eq(d.get("tenant"), "alice", "a result kept as a dataset is its job's tenant's")
        docs.append(("Dataset", d))
    docs.append(("DatasetList", srv.get_json("/v1/datasets?limit=5")))
    for what in ("jobs", "datasets"):
        r = srv.req("GET", "/v1/%s?tenant=alice&limit=5" % what, headers=bearer("root"))
        if CHECK.eq(r.status, 200, "admin lists alice's %s" % what):
            page = r.json()
            CHECK.ok(page[what] and all(x.get("tenant") == "alice" for x in page[what]),
                     "admin's ?tenant=alice lists alice's %s only: %r" % (what, [x.get("tenant") for x in page[what]]))
            docs.append(("JobList" if what == "jobs" else "DatasetList", page))
        r = srv.req("GET", "/v1/%s?tenant=root" % what)
        if CHECK.eq(r.status, 200, "alice asks for root's %s" % what):
            CHECK.eq(r.json()[what], [], "?tenant= naming another tenant lists nothing for a non-admin (%s)" % what)
    return docs


def idempotent(srv, spec):
    """A replay with the same Idempotency-Key answers the same job with Idempotent-Replayed; another body 422."""
    docs = []
    replayed = resolve(spec, spec["components"]["headers"]["IdempotentReplayed"])["schema"]["const"]
    key = {"Idempotency-Key": "openapi-" + secrets.token_hex(8)}
    job = {"op": "max", "dtype": "int64", "data": [4, 9, 2], "device": "cpu"}
    first = srv.req("POST", "/v1/jobs", job, dict(key, Prefer="wait=10"))
    again = srv.req("POST", "/v1/jobs", job, dict(key, Prefer="wait=10"))
    if CHECK.eq((first.status, again.status), (200, 200), "a job and its replay"):
        CHECK.eq(again.json()["id"], first.json()["id"], "the replay answers the same job")
        CHECK.eq(again.headers.get("location"), "/v1/jobs/" + first.json()["id"], "the replay's Location")
        CHECK.eq(again.headers.get("idempotent-replayed"), replayed, "Idempotent-Replayed on the replay")
        CHECK.ok("idempotent-replayed" not in first.headers, "no Idempotent-Replayed on the first answer")
        docs.append(("Job", again.json()))
    r = srv.req("POST", "/v1/jobs", dict(job, data=[1]), key)
    if CHECK.eq(r.status, 422, "the key again with another body"):
        CHECK.eq(r.json().get("field"), "Idempotency-Key", "the 422 names the Idempotency-Key")
        docs.append(("Problem", r.json()))
    # a key is the tenant's, whatever the route: the upload takes another
    key = {"Idempotency-Key": "openapi-" + secrets.token_hex(8)}
    body, hdrs = b"\0" * 16, dict(key, **{"Content-Type": "application/octet-stream"})
    first = srv.req("POST", "/v1/datasets?dtype=float64&shape=2", body, hdrs)
    again = srv.req("POST", "/v1/datasets?dtype=float64&shape=2", body, hdrs)
    if CHECK.eq((first.status, again.status), (201, 201), "an upload and its replay"):
        CHECK.eq(again.json()["id"], first.json()["id"], "the replayed upload answers the same dataset")
        CHECK.eq(again.headers.get("idempotent-replayed"), replayed, "Idempotent-Replayed on the replayed upload")
        docs.append(("Dataset", again.json()))
    return docs


def unauthorized(srv, spec):
    """Every operation the spec secures answers its 401 without a token (and with a wrong one); the open
    ones answer without. Returns the problems, for the validator."""
    docs = []
    resp = resolve(spec, spec["components"]["responses"]["Unauthorized"])
    schema = resp["content"]["application/problem+json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    www = resolve(spec, resp["headers"]["WWW-Authenticate"])["schema"]["pattern"]
    ids = {"JobIdPath": "j_0000000000000001", "DatasetIdPath": "d_0000000000000001"}
    bodies = {"/v1/jobs": {"op": "sum", "dtype": "int32", "data": [1], "device": "cpu"},
              "/v1/benchmarks": {"op": "sum", "dtype": "int32", "n": 10, "repeats": 1, "device": "cpu"}}
    wrong = {"Authorization": "Bearer " + secrets.token_hex(16)}
    for p, item in spec["paths"].items():
        path = p
        for prm in item.get("parameters", []):
            name = prm["$ref"].rsplit("/", 1)[-1]
            path = path.replace("{%s}" % resolve(spec, prm)["name"], ids[name])
        path = path.replace("{name}", "app.js")
        for m, op in item.items():
            if m not in METHODS:
                continue
            url, body, hdrs = path, bodies.get(p) if m == "post" else None, {}
            if (p, m) == ("/v1/datasets", "post"):
                url, body, hdrs = "/v1/datasets?dtype=int32&shape=1", b"\0\0\0\0", {"Content-Type": "application/octet-stream"}
            what = "%s %s" % (m.upper(), url)
            if op.get("security") == []:
                r = srv.req(m.upper(), url, body, dict(hdrs, **NO_TOKEN))
                CHECK.eq(r.status, 200, "%s answers without a token" % what)
                continue
            for auth, how in ((NO_TOKEN, "without a token"), (wrong, "with a wrong token")):
                r = srv.req(m.upper(), url, body, dict(hdrs, **auth))
                if not CHECK.eq(r.status, 401, "%s %s" % (what, how)):
                    continue
                CHECK.eq(r.headers.get("content-type"), "application/problem+json", "%s %s: content type" % (what, how))
                CHECK.ok(re.search(www, r.headers.get("www-authenticate", "")),
                         "%s %s: WWW-Authenticate %r matches %r" % (what, how, r.headers.get("www-authenticate"), www))
                docs.append((schema, r.json()))
    return docs


def run_schemathesis(venv, srv, spec):
    art = os.path.join(O.build_dir(), "artifacts")
    os.makedirs(art, exist_ok=True)
    seed = os.environ.get("GPURED_SCHEMATHESIS_SEED", "1")
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(CONFIG)
        cfg = f.name
    # one worker: CPython 3.11 can fail compiling in threads ("AST constructor recursion depth mismatch")
    # the token fetches the spec too; ignored_auth (on: every check is) sends requests without it and
    # with a wrong one to each secured operation and wants them refused
    cmd = [os.path.join(venv, "bin", "schemathesis"), "--no-color", "--config-file", cfg, "run",
           srv.base + "/openapi.json", "-H", "Authorization: Bearer " + TOKENS["alice"],
           "--max-examples", "20", "--seed", seed, "--workers", "1",
           "--request-timeout", "30", "--report", "junit", "--report-junit-path",
           os.path.join(art, "schemathesis-junit.xml")]
    print("$ " + " ".join(cmd).replace(TOKENS["alice"], "<alice's token>"), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=art)
    os.unlink(cfg)
    out = p.stdout + p.stderr
    tail = out.strip().splitlines()[-40:]
    print("\n".join(tail), flush=True)
    m = re.search(r"(\d+) generated, (\d+) passed", out)
    CHECK.eq(p.returncode, 0, "schemathesis exit code (failures above)")
    CHECK.ok(m and int(m.group(1)) >= 200 and m.group(1) == m.group(2),
             "schemathesis generated and passed: %s" % (m.group(0) if m else "no summary line"))
    # schemathesis leaves out the operation that serves the spec it reads (fetched above), and the
    # config the event stream
    n = sum(1 for p, item in spec["paths"].items() for m in item if m in METHODS and p != "/openapi.json")
    CHECK.ok("Selected: %d/%d" % (n - 1, n) in out and "Tested: %d" % (n - 1) in out,
             "schemathesis tested all %d operations but the event stream" % (n - 1))


def main():
    L.store_independent("test_openapi")
    srv = TokenServer(args=["--tokens-file", tokens_file()]).start()     # cpu only: no GPU check
    r = srv.req("GET", "/healthz", headers=NO_TOKEN)
    CHECK.eq((r.status, r.json() if r.status == 200 else r.body), (200, {"status": "ok"}), "/healthz without a token")
    r = srv.req("GET", "/openapi.json")
    CHECK.eq(r.status, 200, "GET /openapi.json")
    CHECK.eq(r.headers.get("content-type"), "application/json", "content-type of the spec")
    spec = r.json()
    check_spec(spec)
    venv = venv_with_schemathesis()
    validate(venv, spec, provoked(srv, spec) + unauthorized(srv, spec))
    run_schemathesis(venv, srv, spec)
    series = O.scrape(srv).series("gpured_http_requests_total")
    errors = [(lbl, v) for lbl, v in series if lbl["code"].startswith("5") or lbl["code"] == "0"]
    print("benchmarks accepted during the run: %d" % sum(v for lbl, v in series
                                                         if lbl["route"] == "/v1/benchmarks" and lbl["code"].startswith("2")))
    CHECK.eq(errors, [], "answers with 5xx or none at all, as the server counted them")
    CHECK.ok(srv.alive(), "server alive after the run")
    L.check_stop(srv)


if __name__ == "__main__":
    L.run_suite(main)
