# test_openapi.py: GET /openapi.json is api/openapi.yaml, covers every route and method of the
# routing table (api/routes.c) and nothing else, validates answers this test provokes (non-finite
# results as strings, problems) with jsonschema_rs, then schemathesis (pinned, from PyPI into a
# venv in the build dir) runs every operation against the live server: no 5xx, status codes,
# content types, headers and bodies as the spec says.
import json
import os
import re
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

# Where the contract is looser than JSON Schema can say, per check (see the comments).
CONFIG = """
[checks]
enabled = true
# DELETE /v1/jobs/{id} cancels: the job stays readable (status canceled), it is not removed.
use_after_free.enabled = false

[[operations]]
include-path = "/v1/jobs"
include-method = "POST"
# A schema-valid body can still be refused by design: 422 when shape's product is not the element
# count, an integer dtype gets 1.5, a value is out of float32's range, rows are ragged, axis 1 on
# 1-D data, a device is absent; 400 for a variant name the device does not have.
checks.positive_data_acceptance.enabled = false

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
    for p, item in spec["paths"].items():
        for m, op in item.items():
            if m not in METHODS:
                continue
            for code, resp in op["responses"].items():
                resp = resolve(spec, resp)
                if code.startswith(("4", "5")):
                    CHECK.eq(list(resp.get("content", {})), ["application/problem+json"], "%s %s %s content" % (m, p, code))
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


def provoked(srv):
    """Answers with non-finite results, an axis result and problems, for the validator."""
    docs = []
    for data, want in (([1e308, 1e308], "Infinity"), ([-1e308, -1e308], "-Infinity"), ([1e308, 1e308, 0.0], "NaN")):
        op = "prod" if want == "NaN" else "sum"
        r = srv.req("POST", "/v1/jobs", {"op": op, "dtype": "float64", "data": data, "device": "cpu"}, {"Prefer": "wait=10"})
        if CHECK.eq(r.status, 200, "%s job" % want):
            job = r.json()
            CHECK.eq(job["result"], {"value": want}, "%s of %r is the string %r" % (op, data, want))
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
    return docs


def run_schemathesis(venv, srv, spec):
    art = os.path.join(O.build_dir(), "artifacts")
    os.makedirs(art, exist_ok=True)
    seed = os.environ.get("GPURED_SCHEMATHESIS_SEED", "1")
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(CONFIG)
        cfg = f.name
    # one worker: CPython 3.11 can fail compiling in threads ("AST constructor recursion depth mismatch")
    cmd = [os.path.join(venv, "bin", "schemathesis"), "--no-color", "--config-file", cfg, "run",
           srv.base + "/openapi.json", "--max-examples", "20", "--seed", seed, "--workers", "1",
           "--request-timeout", "30", "--report", "junit", "--report-junit-path",
           os.path.join(art, "schemathesis-junit.xml")]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=art)
    os.unlink(cfg)
    out = p.stdout + p.stderr
    tail = out.strip().splitlines()[-40:]
    print("\n".join(tail), flush=True)
    m = re.search(r"(\d+) generated, (\d+) passed", out)
    CHECK.eq(p.returncode, 0, "schemathesis exit code (failures above)")
    CHECK.ok(m and int(m.group(1)) >= 200 and m.group(1) == m.group(2),
             "schemathesis generated and passed: %s" % (m.group(0) if m else "no summary line"))
    # schemathesis leaves out the operation that serves the spec it reads (fetched above)
    n = sum(1 for p, item in spec["paths"].items() for m in item if m in METHODS and p != "/openapi.json")
    CHECK.ok("Selected: %d/%d" % (n, n) in out and "Tested: %d" % n in out, "schemathesis tested all %d operations" % n)


def main():
    srv = L.start_suite()
    r = srv.req("GET", "/openapi.json")
    CHECK.eq(r.status, 200, "GET /openapi.json")
    CHECK.eq(r.headers.get("content-type"), "application/json", "content-type of the spec")
    spec = r.json()
    check_spec(spec)
    venv = venv_with_schemathesis()
    validate(venv, spec, provoked(srv))
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
