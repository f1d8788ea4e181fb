# e2e_lib.py: shared by the end-to-end suites: start and stop the real gpured binary (on SQLite,
# or with GPURED_TEST_STORE=postgresql on a throwaway PostgreSQL cluster, a database per server),
# HTTP through the real curl binary, a plain-Python reduction reference, checks of the job
# resource. Single-threaded except for the reader threads that drain each server's output and
# the watchdog timer that ends a suite still running at GPURED_TEST_WATCHDOG seconds.
import atexit
import faulthandler
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

BIN = os.environ.get("GPURED_BIN", "")
DEVICE = os.environ.get("GPURED_TEST_DEVICE", "cpu")
STORE = os.environ.get("GPURED_TEST_STORE", "sqlite")  # or postgresql
SKIP = 77

OPS = ["sum", "prod", "min", "max", "mean", "argmin", "argmax", "nansum", "nanmin", "nanmax", "count_nonzero"]
DTYPES = ["int32", "int64", "float32", "float64"]
DTYPE_SIZE = {"int32": 4, "int64": 8, "float32": 4, "float64": 8}
INT_RANGE = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
JOB_ID = re.compile(r"^j_[0-9a-f]+$")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
TERMINAL = ("succeeded", "failed", "canceled")

_servers = []
_cluster = None  # the suite's PostgreSQL cluster, started with its first server


def pg_cluster():
    """The suite's PostgreSQL cluster (pg_cluster.py), started on first use, removed at exit."""
    global _cluster
    if _cluster is None:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        import pg_cluster
        _cluster = pg_cluster.Cluster().start()
        atexit.register(_cluster.remove)
    return _cluster


def free_port():
    """A loopback port free now, for a helper server (Prometheus) the test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_only(what):
    """For a suite about the SQLite file itself: under GPURED_TEST_STORE=postgresql it skips."""
    if STORE != "sqlite":
        raise Skip("%s is about the SQLite store; it runs with GPURED_TEST_STORE=sqlite" % what)


def store_independent(what):
    """A suite the store does not change: its PostgreSQL copy skips, saying so."""
    if STORE != "sqlite":
        print("SKIPPED: %s does not depend on the store; it runs on SQLite" % what, flush=True)
        sys.exit(SKIP)


class Skip(Exception):
    pass


# ---------------------------------------------------------------- failures

class Checker:
    """Collects failed expectations so that one run reports every server fault, not the first."""

    def __init__(self):
        self.fails = []
        self.passes = 0

    def ok(self, cond, what):
        if cond:
            self.passes += 1
        else:
            self.fails.append(what)
            print("FAIL: " + what, flush=True)
        return bool(cond)

    def eq(self, got, want, what):
        if got == want:
            return self.ok(True, what)
        if isinstance(got, list) and isinstance(want, list) and max(len(got), len(want)) > 8:
            k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            return self.ok(False, "%s: lists differ first at [%d] (expected %d entries, got %d): expected %r, got %r"
                           % (what, k, len(want), len(got), want[k:k + 3], got[k:k + 3]))
        return self.ok(False, "%s: expected %r, got %r" % (what, want, got))


CHECK = Checker()


# A suite still running this long (ctest stops it at 900 s, and then prints only what it wrote)
# reports where it is and fails on its own.
WATCHDOG_S = float(os.environ.get("GPURED_TEST_WATCHDOG", "840"))


def _watchdog():
    print("WATCHDOG: the suite has run %g s; every thread's stack, then the servers" % WATCHDOG_S, flush=True)
    faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
    try:  # a server that exits meanwhile, or a gdb that hangs, must not keep the suite from failing
        for s in _servers:
            if s.alive():
                with open("/proc/%d/status" % s.proc.pid) as f:
                    state = next((ln.strip() for ln in f if ln.startswith("State:")), "?")
                print("%s pid %d is alive (%s); its threads:" % (s.name, s.proc.pid, state), flush=True)
                if shutil.which("gdb"):
                    subprocess.run(["gdb", "-p", str(s.proc.pid), "-batch", "-ex", "thread apply all bt"],
                                   stdin=subprocess.DEVNULL, timeout=60)
            s.print_log()
        _stop_all()
        if _cluster is not None:
            _cluster.remove()
    except Exception:
        traceback.print_exc(file=sys.stdout)
    finally:
        sys.stdout.flush()
        os._exit(1)


def run_suite(body):
    """Run body(), print a summary and exit 0 / 1 / 77. Server logs are printed on failure."""
    code = 0
    watchdog = threading.Timer(WATCHDOG_S, _watchdog)
    watchdog.daemon = True
    watchdog.start()
    try:
        body()
    except Skip as s:
        print("SKIPPED: %s" % s, flush=True)
        _stop_all()
        sys.exit(SKIP)
    except Exception:
        traceback.print_exc()
        CHECK.fails.append("exception: " + traceback.format_exc().splitlines()[-1])
    if CHECK.fails:
        code = 1
        for s in _servers:
            s.print_log()
    print("%d checks passed, %d failed" % (CHECK.passes, len(CHECK.fails)), flush=True)
    for f in CHECK.fails[:60]:
        print("  - " + f[:400])
    _stop_all()
    for s in _servers:
        if code:
            print("kept data dir of %s: %s" % (s.name, s.data_dir))
        else:
            shutil.rmtree(s.data_dir, ignore_errors=True)
    sys.exit(code)


def _stop_all():
    for s in _servers:
        if s.proc and s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


atexit.register(_stop_all)


# ---------------------------------------------------------------- HTTP through curl

class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def __iter__(self):
        return iter((self.status, self.headers, self.body))

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "Resp(%d, %r, %r)" % (self.status, self.headers.get("content-type"), self.body[:300])


def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _parse_headers(raw):
    """Status and lowercase headers of the last response block (skips 100 Continue)."""
    text = raw.decode("iso-8859-1")
    blocks = [b for b in re.split(r"\r?\n\r?\n", text) if b.startswith("HTTP/")]
    if not blocks:
        return 0, {}
    lines = blocks[-1].splitlines()
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            k = k.strip().lower()
            headers[k] = headers[k] + ", " + v.strip() if k in headers else v.strip()
    return status, headers


def http_batch(base, reqs, parallel=0, timeout=60):
    """Send every request of reqs through one curl process (keep-alive, or `parallel` at a
    time). A request is a dict: method, path, body (bytes/str/dict -> JSON), headers (dict;
    value None removes a header curl would add), timeout. Returns one Resp per request;
    status 0 when no response came."""
    tmp = tempfile.mkdtemp(prefix="gpured-curl-")
    try:
        cfg = []
        for i, r in enumerate(reqs):
            if i:
                cfg.append("next")
            method = r.get("method", "GET")
            cfg.append("url = " + _quote(base + r["path"]))
            cfg.append("request = " + _quote(method))
            cfg.append("dump-header = " + _quote(os.path.join(tmp, "h%d" % i)))
            cfg.append("output = " + _quote(os.path.join(tmp, "b%d" % i)))
            cfg.append("max-time = %g" % r.get("timeout", timeout))
            hdrs = {"Expect": None}
            body = r.get("body")
            if body is not None:
                if isinstance(body, (dict, list)):
                    body = json.dumps(body, separators=(",", ":"))
                if isinstance(body, str):
                    body = body.encode("utf-8")
                path = os.path.join(tmp, "d%d" % i)
                with open(path, "wb") as f:
                    f.write(body)
                cfg.append("data-binary = " + _quote("@" + path))
                hdrs["Content-Type"] = "application/json"
            hdrs.update(r.get("headers") or {})
            for k, v in hdrs.items():
                cfg.append("header = " + _quote(k + ":" if v is None else "%s: %s" % (k, v)))
        cfgpath = os.path.join(tmp, "config")
        with open(cfgpath, "w") as f:
            f.write("\n".join(cfg) + "\n")
        cmd = ["curl", "-s", "-S", "-K", cfgpath]
        if parallel:
            cmd += ["--parallel", "--parallel-max", str(parallel)]
        # each transfer ends by its max-time; a curl still running well past all of them has hung
        # itself (its process, not the server: a server that never answers is what max-time ends)
        limits = [r.get("timeout", timeout) for r in reqs]
        bound = (sum(limits) / parallel + max(limits) if parallel else sum(limits)) + 30
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=bound)
        except subprocess.TimeoutExpired as t:
            print("curl was still running %.0f s after its %d transfers' max-times allowed; killed" % (bound, len(reqs)),
                  flush=True)
            p = subprocess.CompletedProcess(cmd, -9, t.stdout, t.stderr or b"")
        out = []
        for i in range(len(reqs)):
            raw = _read(os.path.join(tmp, "h%d" % i))
            status, headers = _parse_headers(raw)
            out.append(Resp(status, headers, _read(os.path.join(tmp, "b%d" % i))))
        if p.returncode and not all(r.get("may_fail") for r in reqs):
            print("curl exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()[:500]))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def http(base, method, path, body=None, headers=None, timeout=60, may_fail=False):
    return http_batch(base, [dict(method=method, path=path, body=body, headers=headers,
                                  timeout=timeout, may_fail=may_fail)])[0]


# ---------------------------------------------------------------- the server

class Server:
    """One gpured process on a free loopback port with its own data dir."""

    def __init__(self, data_dir=None, args=(), name="gpured", env=None, flags=True):
        """env: extra environment; flags False: port, bind and data dir are left to env."""
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="gpured-e2e-")
        self.args = list(args)
        self.env = dict(os.environ, **(env or {}))
        if STORE == "postgresql" and "GPURED_STORE" not in self.env:  # a database of its own
            self.env["GPURED_STORE"] = pg_cluster().create_db("e2e_%d" % len(_servers))
            # a restart is a new replica: it runs the jobs left by the one killed once their lease
            # runs out, so the suites' restarts wait 2 s for that rather than the default 10
            self.env.setdefault("GPURED_LEASE", "2")
        self.flags = flags
        self.name = name
        self.proc = None
        self.port = None
        self.log = []
        self.generation = 0
        _servers.append(self)

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self, timeout=30):
        if not BIN or not os.access(BIN, os.X_OK):
            raise RuntimeError("GPURED_BIN is not an executable: %r" % BIN)
        self.generation += 1
        self.port = None
        cmd = [BIN, "serve"]
        if self.flags:
            cmd += ["--port", "0", "--bind", "127.0.0.1", "--data-dir", self.data_dir]
        cmd += self.args
        self.log.append("=== start %d: %s" % (self.generation, " ".join(cmd)))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env)
        found = threading.Event()
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=self._drain, args=(stream, found), daemon=True).start()
        deadline = time.time() + timeout
        while not found.wait(0.05):
            if self.proc.poll() is not None:
                time.sleep(0.2)
                raise RuntimeError("%s exited with %d before listening" % (self.name, self.proc.returncode))
            if time.time() > deadline:
                raise RuntimeError("%s: no 'listening on http://ADDRESS:PORT' line in %ds" % (self.name, timeout))
        while True:
            if http(self.base, "GET", "/healthz", timeout=5, may_fail=True).status == 200:
                return self
            if time.time() > deadline:
                raise RuntimeError("%s: /healthz never answered 200" % self.name)
            time.sleep(0.05)

    def _drain(self, stream, found):
        # any address: a server bound to 0.0.0.0 (as in the image) is reached on 127.0.0.1 too
        pat = re.compile(r"listening on http://[0-9.]+:(\d+)")
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log.append(line)
            m = pat.search(line)
            if m and self.port is None:
                self.port = int(m.group(1))
                found.set()

    def stop(self, timeout=60):
        """SIGTERM; returns the exit code (None if it had to be killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def print_log(self, tail=150):
        print("---- %s log (last %d lines of %d) ----" % (self.name, tail, len(self.log)))
        for line in self.log[-tail:]:
            print("  | " + line)
        print("---- end of %s log ----" % self.name, flush=True)

    # conveniences
    def req(self, method, path, body=None, headers=None, timeout=60, may_fail=False):
        return http(self.base, method, path, body, headers, timeout, may_fail)

    def batch(self, reqs, parallel=0, timeout=60):
        return http_batch(self.base, reqs, parallel, timeout)

    def get_json(self, path):
        r = self.req("GET", path)
        if r.status != 200:
            raise RuntimeError("GET %s -> %r" % (path, r))
        return r.json()


def start_suite(args=()):
    """Start a server for a suite; raise Skip when the suite targets a GPU and none is there."""
    srv = Server(args=args).start()
    if DEVICE == "gpu":
        devs = srv.get_json("/v1/devices")
        if not devs.get("gpus"):
            rc = srv.stop()
            raise Skip("GPURED_TEST_DEVICE=gpu but GET /v1/devices lists no GPUs (%s); stop rc %r"
                       % (json.dumps(devs)[:300], rc))
    return srv


def check_stop(srv):
    rc = srv.stop()
    CHECK.eq(rc, 0, "exit code after SIGTERM")


# ---------------------------------------------------------------- reference and data

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def result_is_int(op, dtype):
    return op == "count_nonzero" or (dtype.startswith("int") and op != "mean")


REAL = ("mean", "var", "std", "nanmean", "nanvar", "nanstd")
ACCUMULATE = REAL + ("sum", "prod", "nansum", "nanprod")  # NumPy's dtype= ops


def result_dtype(op, dtype, accumulate=False):
    """A result's dtype as API.md's table gives it (test_axes checks it against NumPy's own)."""
    if op in ("any", "all"):
        return "bool"
    if op == "count_nonzero":
        return "int64"
    if dtype == "float32":
        return "float64" if accumulate and op in ACCUMULATE else "float32"
    if dtype == "float64":
        return dtype
    return "float64" if op in REAL else "int64" if op in ACCUMULATE else dtype


def gen_data(op, dtype, n, rng):
    """n values of dtype that op can reduce without overflowing int64 (prod stays small)."""
    if dtype.startswith("int"):
        lo, hi = INT_RANGE[dtype]
        if op == "prod":
            vals, bits = [], 0
            for _ in range(n):
                v = rng.choice((1, 1, 1, -1, 2, 3)) if bits < 58 else rng.choice((1, -1))
                bits += {2: 1, 3: 2}.get(abs(v), 0)
                vals.append(v)
            rng.shuffle(vals)
            return vals
        if op in ("sum", "mean", "nansum") and dtype == "int64":
            lo, hi = -2**50, 2**50
        vals = [rng.randint(lo, hi) for _ in range(n)]
        return [v if rng.random() > 0.2 else 0 for v in vals] if op == "count_nonzero" else vals
    if op == "prod":
        vals = [rng.uniform(0.97, 1.03) * rng.choice((1, 1, 1, -1)) for _ in range(n)]
    elif dtype == "float32":
        vals = [rng.uniform(-1000.0, 1000.0) for _ in range(n)]
    else:
        vals = [rng.uniform(-1e6, 1e6) for _ in range(n)]
    if op == "count_nonzero":
        vals = [v if rng.random() > 0.2 else 0.0 for v in vals]
    return [f32(v) for v in vals] if dtype == "float32" else vals


def gen_ties(dtype, n, rng):
    """Data with many equal extremes, to tell ties first from last."""
    vals = [rng.choice((-2, -1, 0, 1, 2)) for _ in range(n)]
    return [float(v) + 0.5 for v in vals] if dtype.startswith("float") else vals


def ref_reduce(op, dtype, xs, ties="first"):
    """(value, index or None) of op over xs, in exact / float64 arithmetic (JSON has no NaN: the
    nan-ops are their plain ones here)."""
    if op == "count_nonzero":
        return sum(1 for x in xs if x != 0), None
    op = {"nansum": "sum", "nanmin": "min", "nanmax": "max"}.get(op, op)
    if op == "sum":
        return (sum(xs) if result_is_int(op, dtype) else math.fsum(xs)), None
    if op == "prod":
        p = 1 if result_is_int(op, dtype) else 1.0
        for x in xs:
            p *= x
        return p, None
    if op == "mean":
        return (sum(xs) / len(xs) if dtype.startswith("int") else math.fsum(xs) / len(xs)), None
    if op in ("min", "max"):
        return (min(xs) if op == "min" else max(xs)), None
    best = min(xs) if op == "argmin" else max(xs)
    idxs = [i for i, x in enumerate(xs) if x == best]
    return best, (idxs[0] if ties == "first" else idxs[-1])


def groups(rows, axis):
    """The lists each output reduces: axis None -> one, 0 -> each column, 1 -> each row."""
    if axis is None:
        return [[x for row in rows for x in row]]
    if axis == 0:
        return [[row[j] for row in rows] for j in range(len(rows[0]))]
    return [list(row) for row in rows]


def _is_num(v, want_int):
    if isinstance(v, bool):
        return False
    if want_int:
        return isinstance(v, int)
    return isinstance(v, float)


def value_matches(op, dtype, got, want, xs):
    """got (from JSON) against the reference want over inputs xs; returns a reason or None."""
    want_int = result_is_int(op, dtype)
    if not _is_num(got, want_int):
        return "value %r should be a JSON %s" % (got, "integer" if want_int else "real")
    single = result_dtype(op, dtype) == "float32"
    if single:  # written with the fewest digits that read back as that float32
        got = f32(got)
    if want_int or op in ("min", "max", "argmin", "argmax", "nanmin", "nanmax"):
        return None if got == want else "value %r != reference %r" % (got, want)
    if op == "prod":
        tol = 1e-9 * abs(want) + 1e-300
    else:
        scale = math.fsum(abs(x) for x in xs)
        tol = 1e-9 * (scale / len(xs) if op == "mean" else scale) + 1e-300
    tol += abs(want) * 2.0 ** -23 if single else 0  # the float64 answer rounded to float32: half an ulp
    return None if abs(got - want) <= tol else "value %r != reference %r (tol %g)" % (got, want, tol)


def result_shape(rows, axis, ndim, keepdims):
    """NumPy's shape of a reduction's result over the 2-D view rows of ndim-D data; None for one
    value (no keepdims, the whole array)."""
    whole = axis is None or ndim == 1
    if keepdims:
        return [1] if ndim == 1 else [1 if whole or axis == 0 else len(rows), 1 if whole or axis == 1 else len(rows[0])]
    return None if whole else [len(rows[0]) if axis == 0 else len(rows)]


def flat(v):
    """A result's nested values (or indices) as one list."""
    return [x for row in v for x in row] if v and isinstance(v[0], list) else v


def check_result(what, op, dtype, rows, axis, ties, result, ndim=2, keepdims=False):
    """Check a job's result against the reference; rows is the 2-D view of the input (a 1-D
    input is one row, and then axis 0 means the whole array; ndim says which it was)."""
    if not CHECK.ok(isinstance(result, dict), "%s: result is not an object: %r" % (what, result)):
        return
    is_arg = op.startswith("arg")
    gs = groups(rows, axis)
    shape = result_shape(rows, axis, ndim, keepdims)
    CHECK.eq(result.get("dtype"), result_dtype(op, dtype), what + ": the result's dtype")
    if shape is None:
        keys = {"value", "index", "dtype"} if is_arg else {"value", "dtype"}
        if not CHECK.eq(set(result), keys, what + ": result members"):
            return
        want, idx = ref_reduce(op, dtype, gs[0], ties)
        why = value_matches(op, dtype, result["value"], want, gs[0])
        CHECK.ok(why is None, "%s: %s" % (what, why))
        if is_arg:
            got = result["index"]
            CHECK.ok(_is_num(got, True) and got == idx, "%s: index %r != reference %r" % (what, got, idx))
        return
    keys = {"shape", "values", "indices", "dtype"} if is_arg else {"shape", "values", "dtype"}
    if not CHECK.eq(set(result), keys, what + ": result members") or \
            not CHECK.eq(result["shape"], shape, what + ": result shape"):
        return
    nested = [len(v) if isinstance(v, list) else None for v in result["values"]]
    CHECK.ok(nested == ([shape[1]] * shape[0] if len(shape) == 2 else [None] * shape[0]),
             "%s: values %r are not nested in shape %r" % (what, result["values"], shape))
    vals = flat(result["values"])
    indices = flat(result.get("indices"))
    if not CHECK.ok(isinstance(vals, list) and len(vals) == len(gs),
                    "%s: values has %r entries, expected %d" % (what, len(vals) if isinstance(vals, list) else vals, len(gs))):
        return
    bad = []
    for k, g in enumerate(gs):
        want, idx = ref_reduce(op, dtype, g, ties)
        why = value_matches(op, dtype, vals[k], want, g)
        if why:
            bad.append("[%d] %s" % (k, why))
        if is_arg:
            got = indices[k] if len(indices) > k else None
            if not (_is_num(got, True) and got == idx):
                bad.append("[%d] index %r != reference %r" % (k, got, idx))
    CHECK.ok(not bad, "%s: %d of %d outputs wrong: %s" % (what, len(bad), len(gs), "; ".join(bad[:4])))


def check_job(what, job, op, dtype, shape, axis=None, status="succeeded", algorithm=None, device=None):
    """The job resource's members (API.md) for a job that reached status on device (the suite's
    when None)."""
    if not CHECK.ok(isinstance(job, dict), "%s: job is not an object: %r" % (what, job)):
        return
    CHECK.ok(isinstance(job.get("id"), str) and JOB_ID.match(job["id"]), "%s: id %r" % (what, job.get("id")))
    CHECK.eq(job.get("status"), status, what + ": status")
    CHECK.eq(job.get("op"), op, what + ": op")
    CHECK.eq(job.get("dtype"), dtype, what + ": dtype")
    CHECK.eq(job.get("shape"), list(shape), what + ": shape")
    if len(shape) == 2 or axis is None:
        CHECK.eq(job.get("axis"), axis, what + ": axis")
    dev = job.get("device")
    if (device or DEVICE) == "cpu":
        CHECK.eq(dev, "cpu", what + ": device")
    else:
        CHECK.ok(isinstance(dev, str) and re.match(r"^gpu:\d+$", dev), "%s: device %r" % (what, dev))
    if status != "succeeded":
        return
    algo = job.get("algorithm")
    if algorithm and algorithm != "auto":
        CHECK.eq(algo, algorithm, what + ": algorithm")
    else:
        CHECK.ok(isinstance(algo, str) and algo and algo != "auto", "%s: algorithm %r" % (what, algo))
    t = job.get("timings_ms")
    CHECK.ok(isinstance(t, dict) and all(_num(t.get(k)) and t[k] >= 0 for k in ("queue", "h2d", "kernel", "d2h", "total")),
             "%s: timings_ms %r" % (what, t))
    n = 1
    for s in shape:
        n *= s
    CHECK.eq(job.get("bytes"), n * DTYPE_SIZE[dtype], what + ": bytes")
    CHECK.ok(job.get("gbps") is None or _num(job["gbps"]), "%s: gbps %r" % (what, job.get("gbps")))
    CHECK.eq(job.get("error"), None, what + ": error")
    for k in ("created_at", "started_at", "finished_at"):
        CHECK.ok(isinstance(job.get(k), str) and RFC3339.match(job[k]), "%s: %s %r" % (what, k, job.get(k)))


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_problem(what, r, status, field=None):
    """r is an RFC 9457 problem with this status (and this field member, when given)."""
    ok = CHECK.eq(r.status, status, what + ": HTTP status")
    ctype = r.headers.get("content-type", "")
    ok &= CHECK.ok(ctype.split(";")[0].strip() == "application/problem+json",
                   "%s: content-type %r, expected application/problem+json" % (what, ctype))
    try:
        p = r.json()
    except ValueError:
        return CHECK.ok(False, "%s: problem body is not JSON: %r" % (what, r.body[:200]))
    if not CHECK.ok(isinstance(p, dict), "%s: problem body is not an object" % what):
        return False
    ok &= CHECK.eq(p.get("status"), r.status, what + ": problem status member vs HTTP status")
    for k in ("type", "title", "detail", "instance"):
        ok &= CHECK.ok(isinstance(p.get(k), str) and p[k].strip(), "%s: problem member %r is %r" % (what, k, p.get(k)))
    if field is not None:
        want = field if isinstance(field, tuple) else (field,)
        ok &= CHECK.ok(p.get("field") in want, "%s: problem field %r, expected %s" % (what, p.get("field"), " or ".join(want)))
    return ok


def reshape(flat, r, c):
    return [flat[i * c:(i + 1) * c] for i in range(r)]


def rng_for(name):
    return random.Random(name)


def dataset_ids(srv, page):
    """Every dataset id, walking GET /v1/datasets newest first, page ids at a time."""
    ids, cursor = [], None
    for _ in range(100000):  # a cursor that never ends fails the test rather than hanging it
        r = srv.get_json("/v1/datasets?limit=%d" % page + ("&cursor=" + cursor if cursor else ""))
        ids += [d["id"] for d in r["datasets"]]
        cursor = r["next_cursor"]
        if cursor is None:
            return ids
    raise RuntimeError("the dataset list's pages never end")




def blocker(srv, seconds, device="cpu"):
    """POST (202) a benchmark that keeps a worker of device busy for about `seconds` in this build.
    It is sized from smaller ones timed first (each 4x the last until one takes seconds/8), since a
    sanitizer build runs it many times slower and a fixed size would hold a TSan run for minutes."""
    body = {"op": "sum", "dtype": "float32", "n": 1 << 14, "repeats": 8, "device": device}

    def timed():
        t0 = time.monotonic()
        r = srv.req("POST", "/v1/benchmarks", body, {"Prefer": "wait=300"}, timeout=310)
        if r.status != 200 or r.json().get("status") != "succeeded":
            raise RuntimeError("a timing benchmark: %r" % r)
        return time.monotonic() - t0

    while True:
        took = timed()
        if took >= seconds / 8 or body["n"] >= 1 << 26:
            break
        body["n"] = min(body["n"] * 4, 1 << 26)
    # a hiccup (another process, write-back) only ever makes a run slower, and a slow one would size
    # the blocker short: the faster of two
    took = min(took, timed())
    want = body["n"] * seconds / took  # elements x 8 repeats for `seconds`
    body["n"] = int(min(want, 1 << 26))
    body["repeats"] = int(min(32, max(1, 8 * want / body["n"])))  # n x repeats stays within 2^31
    return srv.req("POST", "/v1/benchmarks", body)


def raw_exchange(srv, request, quiet=1.0):
    """Send request bytes as they are; (everything the server sent until it closed or was quiet
    for `quiet` seconds, whether it closed)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(request)
    got, closed = b"", False
    s.settimeout(quiet)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            got += chunk
    except socket.timeout:
        pass
    s.close()
    return got, closed


def metric(srv, name):
    """The value of an integer sample of GET /metrics (name with its labels), or None."""
    text = srv.req("GET", "/metrics").body.decode()
    m = re.search(r"^%s (\d+)" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


def store_rows(srv, sql):
    """Rows of a read-only query on srv's store (its gpured.db, or its PostgreSQL database)."""
    if STORE == "postgresql":
        p = subprocess.run(["psql", "-X", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", srv.env["GPURED_STORE"], "-c", sql],
                           capture_output=True, text=True, check=True)
        return [tuple(line.split("\t")) for line in p.stdout.splitlines()]
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(srv.data_dir, "gpured.db"), uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()
