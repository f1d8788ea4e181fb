# test_api_sequences.py: a stateful API fuzzer: seeded random sequences (GPURED_SEQ_SEED, GPURED_SEQ_STEPS)
# of what two tenants' clients do (jobs inline, on datasets, one-shot and matmul, with and without
# Prefer: wait and Idempotency-Key, replays and reused keys; GET, ?wait=, If-None-Match, /result, cancel;
# raw and .npy uploads, deletes, list pages with cursors; garbage limits, cursors, ids and tokens;
# ambiguous framing sent raw; a third tenant's token removed under its open event stream), each
# step checked against a model of what must exist: no 5xx, every 4xx a problem+json, every job ends with
# the reference's answer, pages give each of the tenant's ids once and no other tenant's, another
# tenant's id answers 404 exactly as an unknown one, a replay answers the same resource.
import ast
import atexit
import collections
import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import struct
import tempfile
import time

import e2e_lib as L
from e2e_lib import CHECK

SEED = int(os.environ.get("GPURED_SEQ_SEED") or random.SystemRandom().randrange(1 << 31))
STEPS = int(os.environ.get("GPURED_SEQ_STEPS") or 400)
TOKENS = {"alice": "a1" * 16, "bob": "b2" * 16, "ops": "0c" * 16}  # ops is an admin: only the final cross-check
TENANTS = ("alice", "bob")
WRONG_TOKEN = "c3" * 16
FMT = {"int32": "i", "int64": "q", "float32": "f", "float64": "d"}
NPY = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}
INLINE_MAX = 4096      # API.md: more outputs than this are kept as datasets
MODEL_VALUES_MAX = 20000  # datasets larger than this are not kept in the model (the blockers' products)
BLOCK_N = 512          # the blocker's operands: a naive CPU product long enough to keep jobs queued behind it
JOB_ID = re.compile(r"^j_[0-9a-f]{16}$")
DS_ID = re.compile(r"^d_[0-9a-f]{16}$")
TERMINAL = L.TERMINAL
OTHER = {"alice": "bob", "bob": "alice"}


# ---------------------------------------------------------------- values, .npy

def pack(dtype, flat):
    return struct.pack("<%d%s" % (len(flat), FMT[dtype]), *flat)


def unpack(dtype, raw):
    n = len(raw) // L.DTYPE_SIZE[dtype]
    return list(struct.unpack("<%d%s" % (n, FMT[dtype]), raw[:n * L.DTYPE_SIZE[dtype]]))


def npy_bytes(descr, shape, raw, version=1):
    """A .npy file written here (not by numpy) so that the suite needs nothing beyond Python."""
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    pre = 10 if version == 1 else 12
    pad = (-(pre + len(head) + 1)) % 64
    text = (head + " " * pad + "\n").encode("latin-1")
    size = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + size + text + raw


def parse_npy(body):
    """(descr, shape, value bytes) of a .npy, or a string saying what is wrong with it."""
    if body[:6] != b"\x93NUMPY" or len(body) < 10:
        return "not a .npy (starts %r)" % body[:10]
    if body[6] == 1:
        hlen, off = struct.unpack("<H", body[8:10])[0], 10
    else:
        hlen, off = struct.unpack("<I", body[8:12])[0], 12
    try:
        h = ast.literal_eval(body[off:off + hlen].decode("latin-1"))
    except (ValueError, SyntaxError) as ex:
        return "unreadable .npy header: %s" % ex
    if h.get("fortran_order"):
        return "a Fortran-order .npy"
    return h.get("descr"), list(h.get("shape")), body[off + hlen:]


def count_of(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def rows_of(flat, shape):
    """The 2-D view the reference reduces: a 1-D (or 0-D) array is one row."""
    if len(shape) == 2:
        return L.reshape(flat, shape[0], shape[1])
    return [list(flat)]


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def f32(x):
    return L.f32(x)


# ---------------------------------------------------------------- the model

class Dataset:
    def __init__(self, id, tenant, dtype, shape, flat, kept=False, prod_safe=False, doc=None):
        self.id, self.tenant, self.dtype, self.shape = id, tenant, dtype, list(shape)
        self.flat = flat  # None when too large to keep here (only listed and deleted then)
        self.kept, self.prod_safe, self.doc = kept, prod_safe, doc
        self.deleted = False
        self.blocker = False
        self.rank1 = None  # a blocker's (u, v): its values are u v^T
        self.last_used = None  # the latest last_used_at seen: jobs on it move it, only forward

    def same_record(self, got, what):
        """got is this dataset's record: as first seen but for last_used_at, which is null or a
        time no earlier than the last one seen."""
        rest = {k: v for k, v in got.items() if k != "last_used_at"}
        CHECK.eq(rest, {k: v for k, v in self.doc.items() if k != "last_used_at"}, what)
        used = got.get("last_used_at")
        CHECK.ok(used is None and self.last_used is None or
                 isinstance(used, str) and L.RFC3339.match(used) and used >= (self.last_used or ""),
                 "%s: last_used_at %r after %r" % (what, used, self.last_used))
        self.last_used = used if isinstance(used, str) else self.last_used

    @property
    def count(self):
        return count_of(self.shape)


class Job:
    def __init__(self, tenant, kind, op, dtype, shape, axis, ties="first"):
        self.id = None
        self.tenant, self.kind, self.op, self.dtype = tenant, kind, op, dtype
        self.shape, self.axis, self.ties = list(shape), axis, ties
        self.flat = None          # reductions: the input values (flat)
        self.dataset = None       # reductions on a dataset: its id
        self.mm = None            # matmul: {"a": rows, "b": rows, "c": rows|None, "alpha", "beta", "ds": {name: id}}
        self.uses = set()         # datasets the job holds against DELETE until it ends
        self.algorithm = None
        self.canceled = False     # our DELETE answered 200
        self.cancel_refused = False
        self.final = None         # the first final resource seen: it never changes afterwards
        self.committed = False    # seen final through a route that reads the store (or waits for the commit)
        self.last = None          # last status seen through routes that answer from memory first (monotone)
        self.etags = {}           # ETag -> the status it was sent with
        self.kept = []            # dataset ids its result was kept in

    @property
    def eff_axis(self):
        return None if len(self.shape) == 1 else self.axis

    @property
    def outputs(self):
        if self.kind == "matmul":
            return self.shape[0] * self.shape[1]
        a = self.eff_axis
        return 1 if a is None else self.shape[1] if a == 0 else self.shape[0]

    def bytes(self):
        es = L.DTYPE_SIZE[self.dtype]
        if self.kind == "matmul":
            return sum(len(x) * len(x[0]) * es for x in (self.mm["a"], self.mm["b"], self.mm["c"]) if x)
        return count_of(self.shape) * es


# ---------------------------------------------------------------- the fuzzer

class Fuzz:
    def __init__(self, srv, rng, tokens_path):
        self.srv, self.rng, self.tokens_path = srv, rng, tokens_path
        self.jobs = collections.OrderedDict()   # id -> Job
        self.ds = collections.OrderedDict()     # id -> Dataset
        self.keys = {}                          # (tenant, key) -> dict(kind, method, path, body, ctype, id, model)
        self.gone = set()                       # ids of jobs deleted once finished
        self.nkey = 0
        self.step = 0
        self.label = "setup"
        self.trace = collections.deque(maxlen=50)
        self.codes = collections.Counter()
        self.ops = collections.Counter()
        self.blocker = {}                       # tenant -> its blocker dataset
        self.no_wait = False
        self.outcomes = collections.Counter()   # how cancels and deletes went (printed: is the suite reaching them?)
        self.t0 = time.time()

    # ------------------------------------------------ HTTP

    def call(self, auth, method, path, body=None, headers=None, label=None, timeout=90):
        """One request as auth (a tenant, "wrong", or None for no token); every answer goes through observe."""
        h = {}
        if auth == "wrong":
            h["Authorization"] = "Bearer " + WRONG_TOKEN
        elif auth:
            h["Authorization"] = "Bearer " + TOKENS[auth]
        h.update(headers or {})
        t = time.time()
        r = self.srv.req(method, path, body, h, timeout=timeout, may_fail=True)
        dt = time.time() - t
        shown = body if isinstance(body, (dict, list)) else ("<%d bytes>" % len(body) if body is not None else "")
        shown = json.dumps(shown)[:160] if isinstance(shown, (dict, list)) else shown
        extra = " ".join("%s: %s" % (k, v) for k, v in (headers or {}).items())
        self.trace.append("step %d [%s] %s %s %s as %s %s %s -> %d %s" % (
            self.step, self.label, method, path, "(" + extra + ")" if extra else "", auth, shown, "",
            r.status, r.body[:160].decode("utf-8", "replace") if r.status >= 400 else ""))
        self.observe(label or "%s %s" % (method, path), r)
        r.elapsed = dt
        return r

    def batch(self, reqs, parallel):
        """Requests (auth, method, path, body, headers) sent `parallel` at a time through one curl."""
        out = []
        for auth, method, path, body, headers in reqs:
            h = {"Authorization": "Bearer " + TOKENS[auth]}
            h.update(headers or {})
            out.append(dict(method=method, path=path, body=body, headers=h, may_fail=True))
        rs = self.srv.batch(out, parallel=parallel)
        for (auth, method, path, body, headers), r in zip(reqs, rs):
            r.elapsed = None
            self.trace.append("step %d [%s] (parallel) %s %s as %s -> %d" % (self.step, self.label, method, path, auth,
                                                                              r.status))
            self.observe("%s %s (one of %d in parallel)" % (method, path, len(reqs)), r)
        return rs

    def what(self, s):
        return s if s.startswith("step ") else "step %d (%s): %s" % (self.step, self.label, s)

    def observe(self, what, r):
        """Every answer: a response came, no 5xx (none is expected here: no GPU faults, no full disk), and a
        4xx is an RFC 9457 problem."""
        self.codes[r.status] += 1
        what = self.what(what)
        if not CHECK.ok(r.status != 0, "%s: no HTTP response (server %s)" % (what, "alive" if self.srv.alive() else "EXITED")):
            return
        CHECK.ok(r.status < 500, "%s: server error %d: %r" % (what, r.status, r.body[:300]))
        if r.status < 400:
            return
        ctype = r.headers.get("content-type", "").split(";")[0].strip()
        CHECK.ok(ctype == "application/problem+json", "%s: %d with content-type %r" % (what, r.status, ctype))
        try:
            p = r.json()
        except ValueError:
            CHECK.ok(False, "%s: %d body is not JSON: %r" % (what, r.status, r.body[:200]))
            return
        CHECK.ok(isinstance(p, dict) and p.get("status") == r.status and
                 all(isinstance(p.get(k), str) and p[k].strip() for k in ("type", "title", "detail", "instance")),
                 "%s: %d problem lacks a member or disagrees on status: %r" % (what, r.status, p))
        if r.status == 401:
            CHECK.eq(r.headers.get("www-authenticate"), 'Bearer realm="gpured"', what + ": 401 WWW-Authenticate")
        if r.status == 405:
            CHECK.ok(r.headers.get("allow"), "%s: 405 without Allow" % what)
        if r.status == 429:
            CHECK.ok(r.headers.get("retry-after"), "%s: 429 without Retry-After" % what)

    def problem(self, what, r, status, field=None):
        return L.check_problem(self.what(what), r, status, field)

    def fresh_id(self, prefix):
        """A well-formed id that names nothing (every id the server made is in the model)."""
        while True:
            i = "%s_%016x" % (prefix, self.rng.getrandbits(64))
            if i not in self.jobs and i not in self.ds:
                return i

    def same_as_unknown(self, what, r, foreign, u, unknown):
        """r answered a request naming another tenant's id foreign; u the same request naming unknown."""
        self.problem(what + " (another tenant's id)", r, 404)

        def norm(resp, ident):
            try:
                p = resp.json()
            except ValueError:
                return None
            if not isinstance(p, dict):
                return p
            return {k: v.replace(ident, "<id>") if isinstance(v, str) else v for k, v in p.items()}
        CHECK.eq(norm(r, foreign), norm(u, unknown), self.what(what + ": another tenant's id answers exactly as an unknown id"))
        CHECK.eq(r.headers.get("content-type"), u.headers.get("content-type"), self.what(what + ": same content-type as unknown"))

    def new_key(self):
        self.nkey += 1
        return "seq-%d-%d-%s" % (SEED, self.nkey, self.rng.choice(["a", "B", "x y", "k.1", "~!@#"]))

    # ------------------------------------------------ choosing

    def forget(self, job):
        """A finished job deleted (204): it and the datasets its result was kept in are gone."""
        self.jobs.pop(job.id, None)
        self.gone.add(job.id)
        for d in job.kept:
            if d in self.ds:
                self.ds[d].deleted = True

    def own_jobs(self, tenant):
        return [j for j in self.jobs.values() if j.tenant == tenant]

    def own_ds(self, tenant, live=True, pred=None):
        return [d for d in self.ds.values() if d.tenant == tenant and (not live or not d.deleted) and
                (pred is None or pred(d))]

    def pick(self, xs):
        return self.rng.choice(xs) if xs else None

    def prefer_header(self):
        w = self.rng.choice([None, None, None, 0, 1, 2, 5])
        if self.no_wait and w:  # behind a blocker: a waiting POST would find its job ended, not queued
            w = 0
        return w, ({"Prefer": "wait=%d" % w} if w is not None else {})

    # ------------------------------------------------ job resources

    def seen(self, job, doc, source, what):
        """A job resource from source (post, get, wait, cancel, replay, list, result): it agrees with the model;
        a final one is checked against the reference once and never changes after."""
        if not CHECK.ok(isinstance(doc, dict), self.what("%s: job resource is %r" % (what, doc))):
            return
        w = self.what(what)
        CHECK.eq(doc.get("id"), job.id, w + ": id")
        CHECK.eq(doc.get("tenant"), job.tenant, w + ": tenant")
        CHECK.eq(doc.get("op"), job.op, w + ": op")
        CHECK.eq(doc.get("dtype"), job.dtype, w + ": dtype")
        CHECK.eq(doc.get("shape"), job.shape, w + ": shape")
        st = doc.get("status")
        if not CHECK.ok(st in ("queued", "running") + TERMINAL, "%s: status %r" % (w, st)):
            return
        CHECK.eq(doc.get("bytes"), job.bytes(), w + ": bytes")
        if job.kind == "matmul":
            for k in ("a", "b", "c"):
                rows = job.mm[k]
                want = None if rows is None else dict({"shape": [len(rows), len(rows[0])]},
                                                       **({"dataset": job.mm["ds"][k]} if job.mm["ds"].get(k) else {}))
                CHECK.eq(doc.get(k), want, w + ": operand " + k)
            CHECK.eq((doc.get("alpha"), doc.get("beta")), (job.mm["alpha"], job.mm["beta"]), w + ": alpha, beta")
        else:
            CHECK.eq(doc.get("axis"), job.axis, w + ": axis")
            CHECK.eq(doc.get("ties"), job.ties, w + ": ties")
            CHECK.eq(doc.get("dataset", "<absent>"), job.dataset or "<absent>", w + ": dataset member")
            if job.dataset and L.DEVICE == "cpu":
                CHECK.eq(doc.get("cache", "<absent>"), None, w + ": cache on the CPU")
        if st != "succeeded":
            CHECK.eq(doc.get("result"), None, w + ": result of a %s job" % st)
        if source in ("post", "get", "wait", "cancel", "replay"):
            rank = {"queued": 0, "running": 1}
            if job.last is not None:
                CHECK.ok(rank.get(st, 2) >= rank.get(job.last, 2), "%s: status went back from %s to %s" % (w, job.last, st))
                if job.last in TERMINAL:
                    CHECK.eq(st, job.last, w + ": a final status changed")
            job.last = st
        if source in ("list", "result") and st not in TERMINAL and job.committed:
            CHECK.ok(False, "%s: the store shows %s after the job's final state was stored" % (w, st))
        if st not in TERMINAL:
            return
        if source in ("list", "result", "cancel"):
            job.committed = True
        if job.final is not None:
            CHECK.eq(doc, job.final, w + ": a final job resource changed")
            return
        job.final = doc
        job.last = st
        self.check_final(job, doc, w)

    def check_final(self, job, doc, w):
        st = doc["status"]
        if job.canceled:
            CHECK.eq(st, "canceled", w + ": a job whose cancel answered 200")
        elif st == "canceled":
            CHECK.ok(False, "%s: canceled, but no cancel of ours answered 200" % w)
        if st == "failed":
            CHECK.ok(False, "%s: the job failed: %r" % (w, doc.get("error")))
        t = doc.get("timings_ms")
        CHECK.ok(isinstance(t, dict) and all(isinstance(t.get(k), (int, float)) and t[k] >= 0
                                             for k in ("queue", "h2d", "kernel", "d2h", "total")),
                 "%s: timings_ms %r" % (w, t))
        CHECK.ok(isinstance(doc.get("finished_at"), str) and L.RFC3339.match(doc["finished_at"]),
                 "%s: finished_at %r" % (w, doc.get("finished_at")))
        if st != "succeeded":
            return
        CHECK.eq(doc.get("error"), None, w + ": error of a succeeded job")
        dev = doc.get("device")
        CHECK.ok(dev == "cpu" if L.DEVICE == "cpu" else bool(re.match(r"^gpu:\d+$", str(dev))), "%s: device %r" % (w, dev))
        algo = doc.get("algorithm")
        if job.algorithm and job.algorithm != "auto":
            CHECK.eq(algo, job.algorithm, w + ": algorithm")
        else:
            CHECK.ok(isinstance(algo, str) and algo and algo != "auto", "%s: algorithm %r" % (w, algo))
        if job.kind == "matmul":
            self.check_product(job, doc.get("result"), w)
        else:
            self.check_reduction(job, doc.get("result"), w)

    def check_reduction(self, job, res, w):
        rows = rows_of(job.flat, job.shape)
        if job.outputs <= INLINE_MAX:
            L.check_result(w, job.op, job.dtype, rows, job.eff_axis, job.ties, res)
            return
        arg = job.op.startswith("arg")
        keys = {"dataset", "shape", "data", "dtype"} | ({"indices_dataset", "indices_data"} if arg else set())
        if not CHECK.eq(set(res or {}), keys, w + ": members of a result kept as datasets"):
            return
        rtype = L.result_dtype(job.op, job.dtype)
        CHECK.eq(res["dtype"], rtype, w + ": kept result's dtype")
        n = job.outputs
        CHECK.eq(res["shape"], [n], w + ": kept result's shape")
        CHECK.eq(res["data"], "/v1/datasets/%s/data" % res["dataset"], w + ": kept result's data link")
        vals = self.kept_values(job, res["dataset"], rtype, [n], w + " values",
                                path=None if self.rng.random() < 0.5 else "/v1/jobs/%s/result" % job.id)
        idx = None
        if arg:
            CHECK.eq(res["indices_data"], "/v1/datasets/%s/data" % res["indices_dataset"], w + ": indices link")
            idx = self.kept_values(job, res["indices_dataset"], "int64", [n], w + " indices",
                                   path=None if self.rng.random() < 0.5 else "/v1/jobs/%s/result?part=indices" % job.id)
        if vals is None or (arg and idx is None):
            return
        bad = []
        for k, g in enumerate(L.groups(rows, job.eff_axis)):
            want, wi = L.ref_reduce(job.op, job.dtype, g, job.ties)
            why = L.value_matches(job.op, job.dtype, vals[k], want, g)
            if why:
                bad.append("[%d] %s" % (k, why))
            if arg and idx[k] != wi:
                bad.append("[%d] index %r != %r" % (k, idx[k], wi))
        CHECK.ok(not bad, "%s: %d of %d kept outputs wrong: %s" % (w, len(bad), n, "; ".join(bad[:4])))

    def kept_values(self, job, ds_id, dtype, shape, w, path=None):
        """Download a result's dataset (through /v1/datasets or the job's /result as .npy), check its record,
        and enter it in the model as the job's tenant's dataset."""
        r = self.call(job.tenant, "GET", path or "/v1/datasets/%s/data" % ds_id, headers={"Accept": "application/x-npy"})
        if not CHECK.eq(r.status, 200, self.what(w + ": download kept dataset %s" % ds_id)):
            return None
        got = parse_npy(r.body)
        if not CHECK.ok(isinstance(got, tuple), self.what("%s: %s" % (w, got))):
            return None
        descr, shp, raw = got
        CHECK.eq((descr, shp, len(raw)), (NPY[dtype], shape, count_of(shape) * L.DTYPE_SIZE[dtype]),
                 self.what(w + ": kept dataset's .npy"))
        vals = unpack(dtype, raw)
        rec = self.call(job.tenant, "GET", "/v1/datasets/" + ds_id)
        if CHECK.eq(rec.status, 200, self.what(w + ": GET kept dataset record")):
            doc = rec.json()
            CHECK.eq((doc.get("tenant"), doc.get("dtype"), doc.get("shape"), doc.get("bytes"), doc.get("sha256"),
                      doc.get("job")), (job.tenant, dtype, shape, len(raw), hashlib.sha256(raw).hexdigest(), job.id),
                     self.what(w + ": kept dataset record"))
            d = Dataset(ds_id, job.tenant, dtype, shape, vals if len(vals) <= MODEL_VALUES_MAX else None,
                        kept=True, doc=doc)
            if ds_id not in self.ds:
                self.ds[ds_id] = d
                job.kept.append(ds_id)
        return vals

    def check_product(self, job, res, w):
        m, n = job.shape
        small = m * n <= INLINE_MAX
        keys = {"dataset", "shape", "data", "dtype"} | ({"values"} if small else set())
        if not CHECK.eq(set(res or {}), keys, w + ": matmul result members"):
            return
        CHECK.eq(res["dtype"], job.dtype, w + ": product dtype")
        CHECK.eq(res["shape"], [m, n], w + ": product shape")
        CHECK.eq(res["data"], "/v1/datasets/%s/data" % res["dataset"], w + ": product data link")
        if small and self.rng.random() < 0.7:
            vals = [x for row in res["values"] for x in row] if isinstance(res["values"], list) else None
            # the kept product is an ordinary dataset of the job's tenant: record it, and its bytes agree
            doc = None
            rec = self.call(job.tenant, "GET", "/v1/datasets/" + res["dataset"])
            if CHECK.eq(rec.status, 200, self.what(w + ": GET product dataset")):
                doc = rec.json()
                CHECK.eq((doc.get("tenant"), doc.get("dtype"), doc.get("shape")), (job.tenant, job.dtype, [m, n]),
                         self.what(w + ": product dataset record"))
                if vals is not None and all(isinstance(v, float) for v in vals):
                    CHECK.eq(doc.get("sha256"), hashlib.sha256(pack(job.dtype, vals)).hexdigest(),
                             self.what(w + ": the product dataset holds the inline values"))
            if res["dataset"] not in self.ds:
                self.ds[res["dataset"]] = Dataset(res["dataset"], job.tenant, job.dtype, [m, n], vals, kept=True, doc=doc)
                job.kept.append(res["dataset"])
        else:
            vals = self.kept_values(job, res["dataset"], job.dtype, [m, n], w + " product",
                                    path=None if self.rng.random() < 0.5 else "/v1/jobs/%s/result" % job.id)
            if small and vals is not None:
                CHECK.eq(res["values"], L.reshape(vals, m, n), self.what(w + ": inline values = the kept product"))
        if vals is None:
            return
        mm = job.mm
        if mm.get("rank1"):  # the blockers: a = b = u v^T, so a @ b = u (v . u) v^T, exactly in float64
            u, v = mm["rank1"]
            s = sum(x * y for x, y in zip(u, v))
            bad = sum(1 for i in range(m) for k in range(n) if vals[i * n + k] != mm["alpha"] * u[i] * s * v[k])
            CHECK.eq(bad, 0, self.what(w + ": wrong entries in the %dx%d blocker product" % (m, n)))
            return
        a, b, c = mm["a"], mm["b"], mm["c"]
        eps = 2.0 ** -24 if job.dtype == "float32" else 2.0 ** -53
        kk = len(b)
        bad = []
        for i in range(m):
            for k in range(n):
                terms = [a[i][t] * b[t][k] for t in range(kk)]
                want = mm["alpha"] * math.fsum(terms)
                scale = abs(mm["alpha"]) * math.fsum(abs(x) for x in terms)
                if mm["beta"] != 0:
                    want += mm["beta"] * c[i][k]
                    scale += abs(mm["beta"] * c[i][k])
                got = vals[i * n + k]
                if not isinstance(got, float) or abs(got - want) > 8 * (kk + 2) * eps * scale + 1e-300:
                    bad.append("[%d][%d] %r != %r" % (i, k, got, want))
        CHECK.ok(not bad, "%s: %d of %d product entries wrong: %s" % (w, len(bad), m * n, "; ".join(bad[:4])))

    # ------------------------------------------------ submitting

    def submit(self, tenant, job, method, path, body, headers, prefer, key=None, what="submit"):
        """POST a job the model expects to be accepted; returns the Resp."""
        h = dict(headers)
        if key:
            h["Idempotency-Key"] = key
        r = self.call(tenant, method, path, body, h)
        if not CHECK.ok(r.status in (200, 202), self.what("%s: %s %s answered %d: %r" % (what, method, path, r.status, r.body[:300]))):
            return r
        doc = r.json()
        job.id = doc.get("id")
        if not CHECK.ok(isinstance(job.id, str) and JOB_ID.match(job.id) and job.id not in self.jobs,
                        self.what("%s: a new job id, got %r" % (what, job.id))):
            return r
        self.jobs[job.id] = job
        CHECK.eq(r.headers.get("location"), "/v1/jobs/" + job.id, self.what(what + ": Location"))
        CHECK.eq(r.headers.get("idempotent-replayed"), None, self.what(what + ": a new submission is not a replay"))
        self.check_prefer(what, r, prefer, doc)
        if r.status == 200:
            job.committed = True
        self.seen(job, doc, "post", what)
        if key:
            ctype = h.get("Content-Type", "application/json")
            self.keys[(tenant, key)] = dict(kind="job", method=method, path=path, body=body, ctype=ctype,
                                            id=job.id, model=job)
        return r

    def check_prefer(self, what, r, prefer, doc):
        if prefer is not None:
            CHECK.eq(r.headers.get("preference-applied"), "wait=%d" % prefer,
                     self.what(what + ": Preference-Applied for Prefer: wait=%d (status %d)" % (prefer, r.status)))
        else:
            CHECK.eq(r.headers.get("preference-applied"), None, self.what(what + ": Preference-Applied without Prefer"))
        st = doc.get("status") if isinstance(doc, dict) else None
        if r.status == 200:
            CHECK.ok(prefer and st in TERMINAL, self.what("%s: 200 with Prefer %r and status %s" % (what, prefer, st)))
        elif prefer:
            # 202 to a client that waits: the job had not ended when the wait ran out
            CHECK.ok(st not in TERMINAL or r.elapsed >= prefer - 0.2,
                     self.what("%s: 202 after %.2fs of Prefer: wait=%d with status %s" % (what, r.elapsed, prefer, st)))

    def gen_values(self, op, dtype, n):
        if op.startswith("arg") and self.rng.random() < 0.4:
            return L.gen_ties(dtype, n, self.rng)
        return L.gen_data(op, dtype, n, self.rng)

    def reduce_options(self, job, body):
        """axis and ties members, randomly, in body; the model's job takes them."""
        nd = len(job.shape)
        axis = self.rng.choice(["absent", None, 0] + ([1] if nd == 2 else []))
        if axis != "absent":
            body["axis"] = axis
        job.axis = None if axis == "absent" else axis
        if job.op.startswith("arg") or self.rng.random() < 0.1:
            t = self.rng.choice(["absent", "first", "last"])
            if t != "absent":
                body["ties"] = t
                job.ties = t

    def op_job_inline(self, tenant):
        op, dtype = self.rng.choice(L.OPS), self.rng.choice(L.DTYPES)
        two_d = self.rng.random() < 0.45
        r, c = self.rng.randint(1, 6), self.rng.randint(1, 6)
        n = r * c if two_d else self.rng.randint(1, 40)
        flat = self.gen_values(op, dtype, n)
        body = {"op": op, "dtype": dtype, "data": L.reshape(flat, r, c) if two_d else flat, "device": L.DEVICE}
        shape = [r, c] if two_d else [n]
        if not two_d and self.rng.random() < 0.25:  # a 2-D view of flat data
            rr = self.rng.choice(divisors(n))
            shape = [rr, n // rr]
            body["shape"] = shape
        job = Job(tenant, "reduce", op, dtype, shape, None)
        job.flat = flat
        self.reduce_options(job, body)
        if self.rng.random() < 0.2:
            job.algorithm = "auto"
            body["algorithm"] = "auto"
        prefer, ph = self.prefer_header()
        key = self.new_key() if self.rng.random() < 0.35 else None
        if key and self.rng.random() < 0.3:
            # a request refused (4xx) does not take the key: the valid one after it is new, not a replay
            bad = dict(body, data=[]) if self.rng.random() < 0.5 else dict(body, op="median")
            rb = self.call(tenant, "POST", "/v1/jobs", bad, {"Idempotency-Key": key})
            self.problem("refused first try with a key", rb, 422 if bad["data"] == [] else 400, "data" if bad["data"] == [] else "op")
        self.submit(tenant, job, "POST", "/v1/jobs", body, ph, prefer, key, "inline job")

    def ds_ops(self, d):
        """Ops whose reference the dataset's values allow (no integer overflow in the server's int64)."""
        ops = ["min", "max", "argmin", "argmax"]
        if not d.dtype.startswith("int") or sum(abs(x) for x in d.flat) < 2 ** 62:
            ops += ["sum", "mean"]
        if d.prod_safe:
            ops.append("prod")
        return ops

    def op_job_dataset(self, tenant):
        mine = self.own_ds(tenant, live=False, pred=lambda d: d.flat is not None)
        roll = self.rng.random()
        if roll < 0.12 or not mine:
            return self.foreign_dataset_job(tenant)
        d = self.pick(mine)
        op = self.rng.choice(self.ds_ops(d))
        body = {"op": op, "dataset": d.id, "device": L.DEVICE}
        shape = [d.count] if len(d.shape) < 2 else list(d.shape)
        v = self.rng.random()
        if v < 0.3:
            rr = self.rng.choice(divisors(d.count))
            shape = [rr, d.count // rr]
            body["shape"] = shape
        elif v < 0.4:
            shape = [d.count]
            body["shape"] = shape
        if d.count > 2 * INLINE_MAX and self.rng.random() < 0.5:  # more outputs than shown inline: kept as datasets
            shape = [d.count // 2, 2]
            body["shape"] = shape
        if self.rng.random() < 0.3:
            body["dtype"] = d.dtype
        job = Job(tenant, "reduce", op, d.dtype, shape, None)
        job.flat, job.dataset = d.flat, d.id
        job.uses.add(d.id)
        self.reduce_options(job, body)
        if shape == [d.count // 2, 2] and d.count > 2 * INLINE_MAX:
            body["axis"], job.axis = 1, 1
        prefer, ph = self.prefer_header()
        key = self.new_key() if self.rng.random() < 0.25 else None
        if d.deleted:
            r = self.call(tenant, "POST", "/v1/jobs", body, ph)
            return self.problem("job on a deleted dataset", r, 404, "dataset")
        w = self.rng.random()
        if w < 0.1:
            if w < 0.06:  # a dtype that is not the dataset's
                r = self.call(tenant, "POST", "/v1/jobs", dict(body, dtype=self.rng.choice([t for t in L.DTYPES if t != d.dtype])))
                self.problem("job with another dtype than its dataset's", r, 422, "dtype")
            else:  # a view that does not hold the dataset's values
                r = self.call(tenant, "POST", "/v1/jobs", dict(body, shape=[d.count + 1]))
                self.problem("job with a view of another size", r, 422, "shape")
            if self.rng.random() < 0.4:
                self.delete_ds(tenant, d)  # the refused job held it only while it was parsed
            return
        self.submit(tenant, job, "POST", "/v1/jobs", body, ph, prefer, key, "dataset job")

    def foreign_dataset_job(self, tenant):
        """A job naming another tenant's dataset answers as one naming no dataset (matmul operands too)."""
        theirs = self.own_ds(OTHER[tenant], live=False)
        if not theirs:
            return
        d = self.pick(theirs)
        unknown = self.fresh_id("d")
        own = self.pick(self.own_ds(tenant, pred=lambda x: len(x.shape) == 2))
        roll = self.rng.random()
        if roll < 0.4 or (roll < 0.7 and (len(d.shape) != 2 or not d.dtype.startswith("float"))):
            mk = lambda i: {"op": "max", "dataset": i, "device": L.DEVICE}
        elif roll < 0.7:
            mk = lambda i: {"op": "matmul", "a": {"data": [[1.0] * d.shape[0]]}, "b": {"dataset": i},
                            "device": L.DEVICE}
        elif own is not None:
            # a is the caller's own dataset, looked up (and held) before b is found missing
            mk = lambda i: {"op": "matmul", "a": {"dataset": own.id}, "b": {"dataset": i}, "device": L.DEVICE}
        else:
            return
        r = self.call(tenant, "POST", "/v1/jobs", mk(d.id))
        u = self.call(tenant, "POST", "/v1/jobs", mk(unknown))
        self.same_as_unknown("job on another tenant's dataset", r, d.id, u, unknown)
        if "a" in mk("") and "dataset" in mk("")["a"] and self.rng.random() < 0.4:
            self.delete_ds(tenant, own)  # the refused jobs hold nothing: 204 unless a job of ours uses it

    def op_job_oneshot(self, tenant):
        op, dtype = self.rng.choice(L.OPS), self.rng.choice(L.DTYPES)
        npy = self.rng.random() < 0.5
        two_d = self.rng.random() < 0.4
        r, c = self.rng.randint(1, 5), self.rng.randint(1, 5)
        n = r * c if two_d else self.rng.randint(1, 30)
        flat = self.gen_values(op, dtype, n)
        raw = pack(dtype, flat)
        q = {"op": op, "device": L.DEVICE}
        if npy:
            body = npy_bytes(NPY[dtype], [r, c] if two_d else [n], raw, self.rng.choice([1, 1, 2]))
            ctype = "application/x-npy"
            if self.rng.random() < 0.3:
                q["dtype"] = dtype
            shape = [r, c] if two_d else [n]
        else:
            body, ctype = raw, "application/octet-stream"
            q["dtype"] = dtype
            shape = [n]
            if two_d:
                shape = [r, c]
                q["shape"] = "%d,%d" % (r, c)
        job = Job(tenant, "reduce", op, dtype, shape, None)
        job.flat = flat
        ax = self.rng.choice(["absent", "null", "0"] + (["1"] if len(shape) == 2 else []))
        if ax != "absent":
            q["axis"] = ax
            job.axis = None if ax == "null" else int(ax)
        if op.startswith("arg") and self.rng.random() < 0.5:
            q["ties"] = job.ties = self.rng.choice(["first", "last"])
        path = "/v1/jobs?" + "&".join("%s=%s" % kv for kv in q.items())
        prefer, ph = self.prefer_header()
        hdrs = dict(ph, **{"Content-Type": ctype})
        roll = self.rng.random()
        if roll < 0.05 and npy:
            other = self.rng.choice([t for t in L.DTYPES if t != dtype])
            q2 = dict(q, dtype=other)
            rr = self.call(tenant, "POST", "/v1/jobs?" + "&".join("%s=%s" % kv for kv in q2.items()), body, hdrs)
            return self.problem(".npy one-shot with another ?dtype=", rr, 422, "dtype")
        if roll < 0.08:  # query arguments beside a JSON body would be ignored: refused
            rr = self.call(tenant, "POST", "/v1/jobs?op=sum", {"op": "sum", "dtype": "int32", "data": [1]})
            return self.problem("JSON body with ?op=", rr, 400)
        key = self.new_key() if self.rng.random() < 0.35 else None
        self.submit(tenant, job, "POST", path, body, hdrs, prefer, key, "one-shot job")

    def op_job_matmul(self, tenant):
        dtype = self.rng.choice(["float32", "float64"])
        cands = self.own_ds(tenant, pred=lambda d: d.dtype == dtype and len(d.shape) == 2 and d.flat is not None
                            and d.count <= 64)
        m, k, n = self.rng.randint(1, 5), self.rng.randint(1, 5), self.rng.randint(1, 5)
        ds = {}

        def vals(r, c):
            xs = [self.rng.uniform(-4, 4) for _ in range(r * c)]
            return L.reshape([f32(x) for x in xs] if dtype == "float32" else xs, r, c)
        a = b = None
        if cands and self.rng.random() < 0.6:
            d = self.pick(cands)
            rows = L.reshape(d.flat, d.shape[0], d.shape[1])
            if self.rng.random() < 0.5:
                a, ds["a"], m, k = rows, d.id, d.shape[0], d.shape[1]
            else:
                b, ds["b"], k, n = rows, d.id, d.shape[0], d.shape[1]
        a = a or vals(m, k)
        b = b or vals(k, n)
        c = vals(m, n) if self.rng.random() < 0.4 else None
        alpha = self.rng.choice([1.0, 2.0, -0.5, 0.25])
        beta = self.rng.choice([0.0, 1.0, -1.0, 0.5]) if c else 0.0
        body = {"op": "matmul", "device": L.DEVICE, "alpha": alpha, "beta": beta}
        if self.rng.random() < 0.7 or not ds:
            body["dtype"] = dtype
        for name, rows in (("a", a), ("b", b), ("c", c)):
            if rows is not None:
                body[name] = {"dataset": ds[name]} if name in ds else {"data": rows}
        job = Job(tenant, "matmul", "matmul", dtype, [m, n], None)
        job.mm = {"a": a, "b": b, "c": c, "alpha": alpha, "beta": beta, "ds": ds}
        job.uses = set(ds.values())
        if self.rng.random() < 0.2:
            job.algorithm = self.rng.choice(["cpu_naive", "cpu_tiled"] if L.DEVICE == "cpu" else ["naive", "tiled16"])
            body["algorithm"] = job.algorithm
        if self.rng.random() < 0.06 and "b" not in ds:  # a's columns are not b's rows
            bad = dict(body, b={"data": vals(k + 1, n)})
            return self.problem("matmul with mismatched shapes", self.call(tenant, "POST", "/v1/jobs", bad), 422, "b")
        prefer, ph = self.prefer_header()
        key = self.new_key() if self.rng.random() < 0.25 else None
        self.submit(tenant, job, "POST", "/v1/jobs", body, ph, prefer, key, "matmul job")

    # ------------------------------------------------ replays

    def op_replay(self, tenant):
        recs = [(k, v) for k, v in self.keys.items() if k[0] == tenant]
        if not recs:
            return
        (t, key), rec = self.rng.choice(sorted(recs, key=lambda kv: kv[0][1]))
        roll = self.rng.random()
        if roll < 0.6:
            return self.replay_same(tenant, key, rec)
        if roll < 0.85:
            return self.replay_other_body(tenant, key, rec)
        return self.key_of_other_tenant(OTHER[tenant], key, rec)

    def replay_same(self, tenant, key, rec):
        prefer, ph = self.prefer_header() if rec["kind"] == "job" else (None, {})
        h = dict(ph, **{"Idempotency-Key": key, "Content-Type": rec["ctype"]})
        r = self.call(tenant, rec["method"], rec["path"], rec["body"], h)
        if rec["kind"] == "dataset":
            d = rec["model"]
            if d.deleted:  # the key's dataset is gone: nothing to answer with
                return self.problem("replay of a deleted dataset's upload", r, 404)
            if CHECK.eq(r.status, 201, self.what("dataset replay (%r)" % r.body[:200])):
                d.same_record(r.json(), self.what("dataset replay: the original record"))
                CHECK.eq(r.headers.get("idempotent-replayed"), "true", self.what("dataset replay: Idempotent-Replayed"))
                CHECK.eq(r.headers.get("location"), "/v1/datasets/" + d.id, self.what("dataset replay: Location"))
            return
        job = rec["model"]
        if job.id in self.gone:  # the key's job was deleted: nothing to answer with
            return self.problem("replay of a deleted job's submission", r, 404)
        if not CHECK.ok(r.status in (200, 202), self.what("job replay answered %d: %r" % (r.status, r.body[:200]))):
            return
        doc = r.json()
        CHECK.eq(doc.get("id"), job.id, self.what("job replay: the same job"))
        CHECK.eq(r.headers.get("idempotent-replayed"), "true", self.what("job replay: Idempotent-Replayed"))
        CHECK.eq(r.headers.get("location"), "/v1/jobs/" + job.id, self.what("job replay: Location"))
        self.check_prefer("job replay", r, prefer, doc)
        if r.status == 200:
            job.committed = True
        self.seen(job, doc, "replay", "job replay")

    def mutate(self, rec):
        """The recorded request with another body (or query): the same key then names another request."""
        body, path = rec["body"], rec["path"]
        if isinstance(body, dict):
            body = json.loads(json.dumps(body))
            if "data" in body:
                body["data"] = body["data"] + ([body["data"][-1]] if not isinstance(body["data"][0], list) else [])
                if isinstance(rec["body"]["data"][0], list):
                    body["op"] = "min" if body["op"] != "min" else "max"
            elif "dataset" in body:
                body["op"] = "min" if body["op"] != "min" else "max"
            else:
                body["alpha"] = body.get("alpha", 1.0) + 1.0
            return path, body
        if rec["kind"] == "job" and self.rng.random() < 0.5:  # another ?op=
            return re.sub(r"op=(\w+)", lambda m: "op=" + ("min" if m.group(1) != "min" else "max"), path), body
        b = bytearray(body)
        b[-1] ^= 0x01  # another last value (the size and the .npy header stay)
        return path, bytes(b)

    def replay_other_body(self, tenant, key, rec):
        path, body = self.mutate(rec)
        h = {"Idempotency-Key": key, "Content-Type": rec["ctype"]}
        r = self.call(tenant, rec["method"], path, body, h)
        self.problem("the key of another request", r, 422, "Idempotency-Key")

    def key_of_other_tenant(self, tenant, key, rec):
        """Keys are each tenant's: the other tenant's same key and request make its own resource."""
        if (tenant, key) in self.keys:
            return
        if rec["kind"] == "job":
            job0 = rec["model"]
            if job0.uses:  # it names the first tenant's datasets: 404 for this one, and the key stays free
                r = self.call(tenant, rec["method"], rec["path"], rec["body"],
                              {"Idempotency-Key": key, "Content-Type": rec["ctype"]})
                return self.problem("another tenant's request on the first's datasets", r, 404)
            job = Job(tenant, job0.kind, job0.op, job0.dtype, job0.shape, job0.axis, job0.ties)
            job.flat, job.mm, job.algorithm = job0.flat, job0.mm, job0.algorithm
            self.submit(tenant, job, rec["method"], rec["path"], rec["body"], {"Content-Type": rec["ctype"]}, None,
                        key, "the same key from another tenant")
            return
        d0 = rec["model"]
        d = self.upload(tenant, d0.dtype, d0.shape, d0.flat, rec["ctype"] == "application/x-npy", key,
                        prod_safe=d0.prod_safe, path=rec["path"], body=rec["body"], what="the same key from another tenant")
        if d:
            CHECK.ok(d.id != d0.id, self.what("another tenant's key made its own dataset"))

    # ------------------------------------------------ reading jobs

    def op_get_job(self, tenant):
        mine = self.own_jobs(tenant)
        roll = self.rng.random()
        if roll < 0.15 or not mine:
            return self.foreign_job(tenant)
        job = self.pick(mine)
        h = {}
        old = None
        if job.etags and self.rng.random() < 0.5:
            old = self.rng.choice(sorted(job.etags))
            h["If-None-Match"] = old if self.rng.random() < 0.8 else '"other", ' + old
        r = self.call(tenant, "GET", "/v1/jobs/" + job.id, headers=h)
        self.job_answer(job, r, old, "GET job")

    def job_answer(self, job, r, old, what):
        """A GET of job (with If-None-Match old, when given): 200 with its resource and ETag, or 304."""
        tag = r.headers.get("etag")
        if r.status == 304:
            CHECK.ok(old is not None, self.what(what + ": 304 without If-None-Match"))
            CHECK.eq(r.body, b"", self.what(what + ": 304 has no body"))
            CHECK.eq(tag, old, self.what(what + ": 304 carries the matched ETag"))
            was = job.etags.get(old)
            if job.final is not None and job.committed:
                CHECK.eq(was, job.final["status"], self.what(what + ": 304 for an ETag of status %s after the job ended %s"
                                                             % (was, job.final["status"])))
            return
        if not CHECK.eq(r.status, 200, self.what(what + " (%r)" % r.body[:200])):
            return
        doc = r.json()
        CHECK.ok(tag and tag.startswith('"') and tag.endswith('"'), self.what(what + ": ETag %r" % tag))
        st = doc.get("status")
        if tag in job.etags:
            CHECK.eq(st, job.etags[tag], self.what(what + ": one ETag for two statuses"))
        if old is not None and tag == old:
            CHECK.ok(False, self.what(what + ": 200 with the very ETag that was sent in If-None-Match"))
        job.etags[tag] = st
        self.seen(job, doc, "get", what)

    def foreign_job(self, tenant):
        theirs = self.own_jobs(OTHER[tenant])
        unknown = self.fresh_id("j")
        if not theirs or self.rng.random() < 0.2:
            bad = self.rng.choice([unknown, "j_xyz", "j_" + "0" * 15, self.fresh_id("d"), "j_" + "F" * 16])
            r = self.call(tenant, self.rng.choice(["GET", "DELETE"]), "/v1/jobs/" + bad)
            return self.problem("an id that names no job", r, 404)
        j = self.pick(theirs)
        sub = self.rng.choice(["", "", "/result", "?wait=1"])
        method = "DELETE" if sub == "" and self.rng.random() < 0.4 else "GET"
        r = self.call(tenant, method, "/v1/jobs/" + j.id + sub)
        u = self.call(tenant, method, "/v1/jobs/" + unknown + sub)
        self.same_as_unknown("%s /v1/jobs/{other's}%s" % (method, sub), r, j.id, u, unknown)

    def op_wait(self, tenant):
        mine = self.own_jobs(tenant)
        if not mine:
            return
        if self.rng.random() < 0.1:
            bad = self.rng.choice(["abc", "-1", "1.5", ""])
            r = self.call(tenant, "GET", "/v1/jobs/%s?wait=%s" % (self.pick(mine).id, bad))
            if bad == "":
                return CHECK.ok(r.status in (200, 400), self.what("?wait= empty: %d" % r.status))
            return self.problem("?wait=%s" % bad, r, 400, "wait")
        # the ones still in flight are the interesting ones; which are is the model's view (no timing read here)
        job = self.pick([j for j in mine if j.final is None] or mine) if self.rng.random() < 0.7 else self.pick(mine)
        n = self.rng.choice([0, 1, 2])
        before = job.last
        r = self.call(tenant, "GET", "/v1/jobs/%s?wait=%d" % (job.id, n))
        self.job_answer(job, r, None, "GET ?wait=%d" % n)
        if r.status != 200:
            return
        st = r.json().get("status")
        slack = 3.0
        CHECK.ok(r.elapsed <= n + slack, self.what("?wait=%d answered after %.2fs" % (n, r.elapsed)))
        if before in TERMINAL:
            CHECK.ok(r.elapsed < 1.5, self.what("?wait=%d on a finished job took %.2fs" % (n, r.elapsed)))
        elif before is not None and st == before and n > 0:
            # the status the wait began with is at least the one seen before: unchanged means it waited it out
            CHECK.ok(r.elapsed >= n - 0.25, self.what("?wait=%d answered after %.2fs with its status unchanged (%s)"
                                                      % (n, r.elapsed, st)))

    def op_result(self, tenant):
        mine = self.own_jobs(tenant)
        if not mine or self.rng.random() < 0.1:
            return self.foreign_job_result(tenant)
        job = self.pick(mine)
        part = None
        if job.kind == "reduce" and self.rng.random() < 0.3:
            part = self.rng.choice(["indices", "values", "bogus"])
        npy = self.rng.random() < 0.4
        path = "/v1/jobs/%s/result" % job.id + ("?part=" + part if part else "")
        h = {"Accept": "application/x-npy"} if npy else {}
        r = self.call(tenant, "GET", path, headers=h)
        if part == "bogus":
            if r.status != 409:  # a job not succeeded may say that first
                self.problem("?part=bogus", r, 400, "part")
            return
        if r.status == 409:
            self.problem("result of a job without one", r, 409)
            CHECK.ok(job.final is None or job.final["status"] != "succeeded" or
                     (part == "indices" and not job.op.startswith("arg")),
                     self.what("409 for the result of a succeeded job (%r)" % r.body[:200]))
            return
        if part == "indices" and not job.op.startswith("arg"):
            return CHECK.ok(False, self.what("?part=indices of a %s job answered %d, expected 409" % (job.op, r.status)))
        if r.status == 404:
            gone = [d for d in job.kept if self.ds[d].deleted]
            self.problem("result whose kept dataset was deleted", r, 404)
            return CHECK.ok(gone, self.what("404 for the result of one's own job (%r)" % r.body[:200]))
        if not CHECK.eq(r.status, 200, self.what("GET result (%r)" % r.body[:200])):
            return
        if job.final is None:  # it succeeded meanwhile: learn its final resource (and check it) first
            g = self.call(tenant, "GET", "/v1/jobs/" + job.id)
            if g.status == 200:
                self.seen(job, g.json(), "result", "GET job after its result")
        if job.final is None:
            return
        job.committed = True
        res = job.final.get("result")
        kept = res.get("indices_dataset" if part == "indices" else "dataset")
        CHECK.ok(not kept or kept not in self.ds or not self.ds[kept].deleted,
                 self.what("a result whose kept dataset %s was deleted still answers 200" % kept))
        if not npy:
            return CHECK.eq(r.json(), res, self.what("GET result: the job resource's result"))
        got = parse_npy(r.body)
        if not CHECK.ok(isinstance(got, tuple), self.what("result .npy: %s" % (got,))):
            return
        descr, shape, raw = got
        kept = res.get("indices_dataset" if part == "indices" else "dataset")
        if kept:
            d = self.ds.get(kept)
            CHECK.ok(d is not None and descr == NPY[d.dtype] and shape == d.shape,
                     self.what("result .npy of a kept result: %r %r" % (descr, shape)))
            if d is not None and d.flat is not None:
                CHECK.eq(unpack(d.dtype, raw), d.flat, self.what("result .npy = the kept dataset's values"))
            return
        if part == "indices":
            want = [res["index"]] if "index" in res else res["indices"]
            dt = "int64"
        else:
            want = [res["value"]] if "value" in res else res["values"]
            dt = res["dtype"]
            if dt == "float32":  # JSON gives a float32 in its fewest digits
                want = [L.f32(x) for x in want]
        CHECK.eq((descr, shape), (NPY[dt], [] if ("value" in res) else [len(want)]), self.what("result .npy header"))
        CHECK.eq(unpack(dt, raw), want, self.what("result .npy values = the JSON result's"))

    def foreign_job_result(self, tenant):
        theirs = self.own_jobs(OTHER[tenant])
        if not theirs:
            return
        j, unknown = self.pick(theirs), self.fresh_id("j")
        q = self.rng.choice(["", "?part=indices"])
        h = self.rng.choice([{}, {"Accept": "application/x-npy"}])
        r = self.call(tenant, "GET", "/v1/jobs/%s/result%s" % (j.id, q), headers=h)
        u = self.call(tenant, "GET", "/v1/jobs/%s/result%s" % (unknown, q), headers=h)
        self.same_as_unknown("another tenant's result", r, j.id, u, unknown)

    # ------------------------------------------------ cancel

    def op_cancel(self, tenant):
        mine = self.own_jobs(tenant)
        if not mine:
            return self.foreign_job(tenant)
        job = self.pick([j for j in mine if j.final is None] or mine) if self.rng.random() < 0.8 else self.pick(mine)
        self.cancel(tenant, job)

    def cancel(self, tenant, job):
        was_final = job.final is not None and job.committed
        r = self.call(tenant, "DELETE", "/v1/jobs/" + job.id)
        self.outcomes["cancel %d" % r.status] += 1
        if r.status == 200:
            CHECK.ok(not was_final and not job.canceled, self.what("cancel of a job already ended answered 200"))
            CHECK.ok(not job.cancel_refused, self.what("cancel answered 200 after an earlier 409"))
            job.canceled = True
            doc = r.json()
            CHECK.eq(doc.get("status"), "canceled", self.what("cancel 200: status"))
            CHECK.eq(r.headers.get("location"), "/v1/jobs/" + job.id, self.what("cancel 200: Location"))
            self.seen(job, doc, "cancel", "cancel")
            return
        if r.status == 204:  # it had ended: deleted, with its kept result
            CHECK.eq(r.body, b"", self.what("204 has no body"))
            self.forget(job)
            for m, sub in (("GET", ""), ("DELETE", "")):
                self.problem("%s a deleted job%s" % (m, sub), self.call(tenant, m, "/v1/jobs/" + job.id + sub), 404)
            return
        self.problem("cancel of a job that ran", r, 409)
        if not job.canceled:
            job.cancel_refused = True

    # ------------------------------------------------ datasets

    def upload(self, tenant, dtype, shape, flat, npy, key=None, prod_safe=False, path=None, body=None, what="upload",
               version=1):
        raw = pack(dtype, flat)
        if body is None:
            if npy:
                body, path = npy_bytes(NPY[dtype], shape, raw, version), "/v1/datasets"
            else:
                body = raw
                path = "/v1/datasets?dtype=%s&shape=%s" % (dtype, ",".join(str(s) for s in shape))
        ctype = "application/x-npy" if npy else "application/octet-stream"
        h = {"Content-Type": ctype}
        if key:
            h["Idempotency-Key"] = key
        r = self.call(tenant, "POST", path, body, h)
        if not CHECK.eq(r.status, 201, self.what("%s %s %s %s (%r)" % (what, "npy" if npy else "raw", dtype, shape, r.body[:200]))):
            return None
        doc = r.json()
        did = doc.get("id")
        if not CHECK.ok(isinstance(did, str) and DS_ID.match(did) and did not in self.ds,
                        self.what("%s: a new dataset id, got %r" % (what, did))):
            return None
        CHECK.eq(r.headers.get("location"), "/v1/datasets/" + did, self.what(what + ": Location"))
        CHECK.eq(r.headers.get("idempotent-replayed"), None, self.what(what + ": not a replay"))
        CHECK.eq({k: doc.get(k) for k in ("tenant", "dtype", "shape", "bytes", "sha256")},
                 {"tenant": tenant, "dtype": dtype, "shape": list(shape), "bytes": len(raw),
                  "sha256": hashlib.sha256(raw).hexdigest()}, self.what(what + ": record"))
        CHECK.eq(sorted(doc), ["bytes", "created_at", "dtype", "id", "last_used_at", "sha256", "shape", "tenant"],
                 self.what(what + ": members"))
        CHECK.eq(doc.get("last_used_at"), None, self.what(what + ": never used yet"))
        d = Dataset(did, tenant, dtype, shape, flat if len(flat) <= MODEL_VALUES_MAX else None, prod_safe=prod_safe, doc=doc)
        self.ds[did] = d
        if key:
            self.keys[(tenant, key)] = dict(kind="dataset", method="POST", path=path, body=body, ctype=ctype, id=did, model=d)
        return d

    def ds_values(self, dtype, n, prod_safe):
        if prod_safe:
            return L.gen_data("prod", dtype, n, self.rng)
        if n > 64:  # long ones: small enough that sums of thousands fit an int64
            if dtype.startswith("int"):
                return [self.rng.randint(-10 ** 6, 10 ** 6) for _ in range(n)]
            return [f32(self.rng.uniform(-1000, 1000)) for _ in range(n)]
        return L.gen_data("sum", dtype, n, self.rng)

    def op_upload(self, tenant):
        kind = self.rng.choices(["1d", "2d", "square", "long", "0d"], [4, 3, 2, 1, 0.5])[0]
        dtype = self.rng.choice(L.DTYPES)
        npy = self.rng.random() < 0.5
        if kind == "1d":
            shape = [self.rng.randint(1, 64)]
        elif kind == "2d":
            shape = [self.rng.randint(1, 8), self.rng.randint(1, 8)]
        elif kind == "square":
            dtype = self.rng.choice(["float32", "float64"])
            k = self.rng.randint(1, 5)
            shape = [k, self.rng.choice([k, self.rng.randint(1, 5)])]
        elif kind == "long":
            shape = [2 * INLINE_MAX + 2 * self.rng.randint(1, 50)]
            if self.rng.random() < 0.5:
                shape = [shape[0] // 2, 2]
        else:
            shape, npy = [], True
        prod_safe = kind != "long" and self.rng.random() < 0.35
        flat = self.ds_values(dtype, max(1, count_of(shape)), prod_safe)
        key = self.new_key() if self.rng.random() < 0.3 else None
        self.upload(tenant, dtype, shape, flat, npy, key, prod_safe, version=self.rng.choice([1, 1, 1, 2]))

    def op_bad_upload(self, tenant):
        """Uploads the API refuses: each leaves nothing (the next list walk would show it)."""
        raw = pack("int32", [1, 2, 3, 4])
        ct_raw, ct_npy = {"Content-Type": "application/octet-stream"}, {"Content-Type": "application/x-npy"}
        cases = [
            ("JSON values", "/v1/datasets", {"values": [1, 2, 3]}, {}, 415, None),
            ("raw without ?dtype=", "/v1/datasets?shape=4", raw, ct_raw, 400, "dtype"),
            ("raw without ?shape=", "/v1/datasets?dtype=int32", raw, ct_raw, 400, "shape"),
            ("raw of the wrong size", "/v1/datasets?dtype=int32&shape=5", raw, ct_raw, 422, None),
            ("raw with an unknown dtype", "/v1/datasets?dtype=int8&shape=4", raw, ct_raw, 400, "dtype"),
            (".npy with ?dtype=", "/v1/datasets?dtype=int32", npy_bytes("<i4", [4], raw), ct_npy, 400, "dtype"),
            ("not a .npy", "/v1/datasets", b"NOTNUMPY" + raw, ct_npy, 400, None),
            ("big-endian .npy", "/v1/datasets", npy_bytes(">i4", [4], raw), ct_npy, 415, None),
            ("9-D .npy", "/v1/datasets", npy_bytes("<i4", [1] * 7 + [2, 2], raw), ct_npy, 422, None),
            ("truncated .npy", "/v1/datasets", npy_bytes("<i4", [5], raw), ct_npy, 400, None),
        ]
        what, path, body, h, status, field = self.rng.choice(cases)
        r = self.call(tenant, "POST", path, body, h)
        self.problem("upload: " + what, r, status, field)

    def op_get_ds(self, tenant):
        mine = self.own_ds(tenant, live=False)
        if not mine or self.rng.random() < 0.2:
            return self.foreign_ds(tenant)
        d = self.pick(mine)
        data = self.rng.random() < 0.5
        r = self.call(tenant, "GET", "/v1/datasets/%s%s" % (d.id, "/data" if data else ""))
        if d.deleted:
            return self.problem("a deleted dataset", r, 404)
        if not CHECK.eq(r.status, 200, self.what("GET own dataset %s (%r)" % (d.id, r.body[:200]))):
            return
        if not data:
            if d.doc is None:
                d.doc = r.json()
            return d.same_record(r.json(), self.what("GET dataset: its record"))
        CHECK.eq(r.headers.get("content-type"), "application/x-npy", self.what("GET dataset data: content-type"))
        got = parse_npy(r.body)
        if CHECK.ok(isinstance(got, tuple), self.what("dataset data: %s" % (got,))):
            descr, shape, raw = got
            CHECK.eq((descr, shape), (NPY[d.dtype], d.shape), self.what("dataset data: .npy dtype and shape"))
            CHECK.ok(r.body[6] == 1 and len(r.body) - len(raw) in (64, 128, 192), self.what("dataset data: a version 1.0 .npy"))
            if d.flat is not None:
                CHECK.eq(unpack(d.dtype, raw), d.flat, self.what("dataset data: the values uploaded"))
            if d.doc:
                CHECK.eq(hashlib.sha256(raw).hexdigest(), d.doc.get("sha256"), self.what("dataset data: its sha256"))

    def foreign_ds(self, tenant):
        theirs = self.own_ds(OTHER[tenant], live=False)
        unknown = self.fresh_id("d")
        if not theirs:
            return
        d = self.pick(theirs)
        sub, method = self.rng.choice([("", "GET"), ("/data", "GET"), ("", "DELETE")])
        r = self.call(tenant, method, "/v1/datasets/" + d.id + sub)
        u = self.call(tenant, method, "/v1/datasets/" + unknown + sub)
        self.same_as_unknown("%s another tenant's dataset%s" % (method, sub), r, d.id, u, unknown)
        if method == "DELETE" and not d.deleted:  # and the owner still has it
            o = self.call(d.tenant, "GET", "/v1/datasets/" + d.id)
            CHECK.eq(o.status, 200, self.what("the owner's dataset after another tenant's DELETE"))

    def op_delete_ds(self, tenant):
        mine = self.own_ds(tenant, live=False)
        if not mine:
            return self.foreign_ds(tenant)
        live = [d for d in mine if not d.deleted]
        d = self.pick(live) if live and self.rng.random() < 0.85 else self.pick(mine)
        self.delete_ds(tenant, d)

    def users(self, d):
        return [j for j in self.jobs.values() if d.id in j.uses]

    def delete_ds(self, tenant, d):
        busy = [j for j in self.users(d) if not (j.final is not None and j.committed)]
        r = self.call(tenant, "DELETE", "/v1/datasets/" + d.id)
        self.outcomes["delete %d" % r.status] += 1
        if d.deleted:
            return self.problem("DELETE of a deleted dataset", r, 404)
        if r.status == 409:
            self.problem("DELETE of a dataset in use", r, 409)
            CHECK.ok(busy, self.what("DELETE %s answered 409 though every job using it has ended" % d.id))
            g = self.call(tenant, "GET", "/v1/datasets/" + d.id)
            CHECK.eq(g.status, 200, self.what("a dataset whose DELETE was refused is still there"))
            return
        if not CHECK.eq(r.status, 204, self.what("DELETE own dataset (%r)" % r.body[:200])):
            return
        d.deleted = True
        CHECK.eq(r.body, b"", self.what("204 has no body"))
        # the jobs held it until their final state was stored: each has ended now
        for j in self.users(d):
            g = self.call(tenant, "GET", "/v1/jobs/" + j.id)
            if g.status == 200:
                st = g.json().get("status")
                CHECK.ok(st in TERMINAL, self.what("job %s on dataset %s is %s after the DELETE answered 204"
                                                   % (j.id, d.id, st)))
                self.job_answer(j, g, None, "GET a user of a deleted dataset")
        g = self.call(tenant, "GET", "/v1/datasets/%s%s" % (d.id, self.rng.choice(["", "/data"])))
        self.problem("a deleted dataset", g, 404)

    # ------------------------------------------------ lists

    def walk(self, auth, kind, query="", limit=None, what="list"):
        """Every page of /v1/{kind}{query} through next_cursor; the entries, or None when a page failed."""
        limit = limit or self.rng.choice([1, 2, 3, 5, 8, 50, 1000])
        out, cursor = [], None
        for _ in range(5000):
            q = "?limit=%d%s%s" % (limit, query, "&cursor=" + cursor if cursor else "")
            r = self.call(auth, "GET", "/v1/%s%s" % (kind, q))
            if not CHECK.eq(r.status, 200, self.what("%s page %s (%r)" % (what, q, r.body[:200]))):
                return None
            body = r.json()
            items, nxt = body.get(kind), body.get("next_cursor", "<absent>")
            if not CHECK.ok(isinstance(items, list) and (nxt is None or isinstance(nxt, str)),
                            self.what("%s page %s: %r" % (what, q, body))):
                return None
            CHECK.ok(len(items) <= limit, self.what("%s: %d entries on a page of limit %d" % (what, len(items), limit)))
            CHECK.ok(nxt is None or items, self.what("%s: an empty page with a next_cursor" % what))
            CHECK.ok(len(items) == limit or nxt is None, self.what("%s: a short page (%d of %d) with a next_cursor"
                                                                   % (what, len(items), limit)))
            out += items
            if nxt is None:
                return out
            cursor = nxt
        CHECK.ok(False, self.what("%s: the pages never end" % what))
        return None

    def ordered_once(self, what, ids):
        CHECK.eq(len(ids), len(set(ids)), self.what(what + ": an id listed twice"))
        CHECK.eq(ids, sorted(ids, reverse=True), self.what(what + ": newest first"))

    def list_jobs(self, tenant, query="", limit=None):
        entries = self.walk(tenant, "jobs", query, limit, "GET /v1/jobs%s as %s" % (query, tenant))
        if entries is None:
            return
        ids = [e.get("id") for e in entries]
        what = "job list%s of %s" % (query, tenant)
        self.ordered_once(what, ids)
        mine = [j for j in self.jobs.values() if j.tenant == tenant]
        if query.startswith("&op="):
            mine = [j for j in mine if j.op == query[4:]]
        elif query == "&status=canceled":
            mine = [j for j in mine if j.canceled]
        if query in ("", "&status=canceled", "&tenant=" + tenant) or query.startswith("&op="):
            CHECK.eq(sorted(ids), sorted(j.id for j in mine), self.what(what + ": exactly the tenant's jobs"))
        elif query == "&status=succeeded":
            must = {j.id for j in mine if j.final is not None and j.committed and j.final["status"] == "succeeded"}
            may = {j.id for j in mine if not j.canceled}
            CHECK.ok(must <= set(ids) <= may, self.what(what + ": %d missing, %d not its own or canceled"
                                                        % (len(must - set(ids)), len(set(ids) - may))))
        for e in entries:
            j = self.jobs.get(e.get("id"))
            CHECK.eq(e.get("tenant"), tenant, self.what(what + ": an entry's tenant"))
            if j is not None and j.tenant == tenant:
                if query == "&status=succeeded":
                    CHECK.eq(e.get("status"), "succeeded", self.what(what + ": status filter"))
                self.seen(j, e, "list", what + " entry")

    def list_ds(self, tenant, limit=None):
        before = {d.id for d in self.own_ds(tenant)}
        entries = self.walk(tenant, "datasets", "", limit, "GET /v1/datasets as %s" % tenant)
        if entries is None:
            return
        ids = [e.get("id") for e in entries]
        what = "dataset list of %s" % tenant
        self.ordered_once(what, ids)
        extra = set(ids) - before
        if extra:  # results kept by jobs that ended since we last looked: learn them
            for j in self.own_jobs(tenant):
                if j.final is None:
                    g = self.call(tenant, "GET", "/v1/jobs/" + j.id)
                    if g.status == 200:
                        self.job_answer(j, g, None, "GET a job to learn its kept result")
        now = {d.id for d in self.own_ds(tenant)}
        CHECK.ok(before <= set(ids), self.what(what + ": missing %s" % sorted(before - set(ids))[:5]))
        CHECK.ok(set(ids) <= now, self.what(what + ": ids that are not the tenant's live datasets: %s"
                                            % sorted(set(ids) - now)[:5]))
        for e in entries:
            d = self.ds.get(e.get("id"))
            CHECK.eq(e.get("tenant"), tenant, self.what(what + ": an entry's tenant"))
            if d is not None and d.doc is not None:
                d.same_record(e, self.what(what + ": entry = the dataset's record"))

    def op_list(self, tenant):
        roll = self.rng.random()
        if roll < 0.4:
            q = self.rng.choice(["", "", "&op=" + self.rng.choice(L.OPS + ["matmul"]), "&status=canceled",
                                 "&status=succeeded", "&tenant=" + tenant])
            self.list_jobs(tenant, q)
        elif roll < 0.7:
            self.list_ds(tenant)
        elif roll < 0.8:
            # ?tenant= naming another tenant, from one that is not admin: an empty list
            kind = self.rng.choice(["jobs", "datasets"])
            r = self.call(tenant, "GET", "/v1/%s?tenant=%s" % (kind, OTHER[tenant]))
            if CHECK.eq(r.status, 200, self.what("?tenant=other")):
                CHECK.eq(r.json().get(kind), [], self.what("?tenant= naming another tenant lists nothing"))
        else:
            self.foreign_cursor(tenant)

    def foreign_cursor(self, tenant):
        """A cursor is only a position: another tenant's id (or an unknown one) pages the caller's own, older ids."""
        kind = self.rng.choice(["jobs", "datasets"])
        pool = [j.id for j in self.own_jobs(OTHER[tenant])] if kind == "jobs" else [d.id for d in self.own_ds(OTHER[tenant], live=False)]
        cur = self.pick(pool) or self.fresh_id(kind[0])
        r = self.call(tenant, "GET", "/v1/%s?limit=1000&cursor=%s" % (kind, cur))
        if not CHECK.eq(r.status, 200, self.what("a foreign cursor (%r)" % r.body[:200])):
            return
        ids = [e.get("id") for e in r.json().get(kind, [])]
        if kind == "jobs":
            mine = {j.id for j in self.own_jobs(tenant)}
            CHECK.eq(sorted(ids), sorted(i for i in mine if i < cur), self.what("jobs older than another tenant's cursor"))
        else:
            mine = {d.id for d in self.own_ds(tenant)}
            CHECK.ok(set(ids) <= mine | {i for i in ids if i not in self.ds}, self.what("datasets under a foreign cursor"))
            CHECK.ok(all(i < cur for i in ids), self.what("datasets under a cursor are older than it"))
            CHECK.ok({i for i in mine if i < cur} <= set(ids), self.what("datasets under a foreign cursor: missing"))

    def op_garbage(self, tenant):
        roll = self.rng.randrange(9)
        kind = self.rng.choice(["jobs", "datasets"])
        if roll == 0:
            lim = self.rng.choice(["0", "-1", "1001", "abc", "1e3", "%20", "99999999999999999999"])
            r = self.call(tenant, "GET", "/v1/%s?limit=%s" % (kind, lim))
            self.problem("?limit=%s" % lim, r, 400, "limit")
        elif roll == 1:
            cur = self.rng.choice(["zz", "j_12", "d_" + "0" * 17, "%00", "j_XYZW000000000000", "x" * 300,
                                   ("d_" if kind == "jobs" else "j_") + "0" * 16])
            r = self.call(tenant, "GET", "/v1/%s?cursor=%s" % (kind, cur))
            self.problem("?cursor=%s" % cur[:20], r, 400, "cursor")
        elif roll == 2:
            q = self.rng.choice(["status=done", "op=median", "status=", "tenant=No%20Such"])
            r = self.call(tenant, "GET", "/v1/jobs?" + q)
            if q == "status=":
                return CHECK.ok(r.status in (200, 400), self.what("?status= empty: %d" % r.status))
            self.problem("?%s" % q, r, 400, q.split("=")[0])
        elif roll == 3:
            auth = self.rng.choice([None, "wrong"])
            path = self.rng.choice(["/v1/jobs", "/v1/datasets", "/v1/jobs/" + self.fresh_id("j"), "/v1/devices"])
            method = self.rng.choice(["GET", "POST"]) if path in ("/v1/jobs", "/v1/datasets") else "GET"
            body = {"op": "sum", "dtype": "int32", "data": [1]} if method == "POST" else None
            r = self.call(auth, method, path, body)
            self.problem("%s without a valid token" % path, r, 401)
        elif roll == 4:
            body = self.rng.choice(['{"op": "sum", "dtype": "int32", "data": [1, 2', '{"op": "sum", "dtype": "int32", "data": [1], "bogus": 1}',
                                    '{"op": "sum", "dtype": "int32", "data": []}', '[1, 2, 3]',
                                    '{"op": "sum", "dtype": "int32", "data": [1], "axis": 1}'])
            r = self.call(tenant, "POST", "/v1/jobs", body)
            self.problem("malformed job %s" % body[:40], r, 422 if '[]' in body or '"axis": 1' in body else 400)
        elif roll == 5:
            r = self.call(tenant, self.rng.choice(["PUT", "PATCH"]), self.rng.choice(["/v1/jobs", "/v1/datasets"]))
            self.problem("a method the route has not", r, 405)
        elif roll == 6:
            key = self.rng.choice(["x" * 256, "caf\u00e9"])
            r = self.call(tenant, "POST", "/v1/jobs", {"op": "sum", "dtype": "int32", "data": [1]}, {"Idempotency-Key": key})
            self.problem("a malformed Idempotency-Key", r, 400, "Idempotency-Key")
        elif roll == 7:
            self.framing(tenant)
        else:
            self.op_bad_upload(tenant)

    def framing(self, tenant):
        """A job whose body's length is said two ways: 400, the connection closed, no job made (the
        model's list checks would find one)."""
        body = json.dumps({"op": "sum", "dtype": "int32", "data": [1, 2]}).encode()
        two = self.rng.random() < 0.5
        lengths = (b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(body) + 1) + body if two else
                   b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % (len(body), len(body))
                   + body + b"\r\n0\r\n\r\n")
        got, closed = L.raw_exchange(self.srv, b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                                     b"Content-Type: application/json\r\n" % TOKENS[tenant].encode() + lengths)
        self.trace.append("step %d [%s] raw POST /v1/jobs with %s -> %r" % (
            self.step, self.label, "two Content-Lengths" if two else "Content-Length and chunked", got[:40]))
        CHECK.ok(got.startswith(b"HTTP/1.1 400 ") and closed, self.what("ambiguous framing: 400 and closed (%r)" % got[:80]))

    def op_revoke(self, tenant):
        """carol's token is added, her event stream opened, and her token removed again: the stream
        ends and a new request of hers is 401 (the other tenants' tokens go on working)."""
        carol = "0d" * 16
        base = "alice %s\nbob %s\nops %s admin\n" % (TOKENS["alice"], TOKENS["bob"], TOKENS["ops"])

        def load(text, want, who):
            with open(self.tokens_path, "w") as f:
                f.write(text)
            self.srv.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 10
            while self.srv.req("GET", "/v1/devices", headers={"Authorization": "Bearer " + carol}).status != want \
                    and time.time() < deadline:
                time.sleep(0.05)
            CHECK.eq(self.srv.req("GET", "/v1/devices", headers={"Authorization": "Bearer " + carol}).status, want,
                     self.what(who))

        load(base + "carol %s\n" % carol, 200, "carol's token works once added")
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        s.sendall(b"GET /v1/events?heartbeat=300 HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n" % carol.encode())
        head = s.recv(4096)
        CHECK.ok(head.startswith(b"HTTP/1.1 200"), self.what("carol's stream opens (%r)" % head[:60]))
        load(base, 401, "carol's token fails once removed")
        s.settimeout(5)
        ended = False
        try:
            while s.recv(4096):
                pass
            ended = True
        except (ConnectionResetError, BrokenPipeError):
            ended = True
        except socket.timeout:
            pass
        s.close()
        CHECK.ok(ended, self.what("carol's open stream ends within 5 s of her token's removal"))
        self.trace.append("step %d [%s] carol's stream %s" % (self.step, self.label, "ended" if ended else "went on"))

    # ------------------------------------------------ bursts: queued jobs to cancel and datasets in use

    def blocker_ds(self, tenant):
        d = self.blocker.get(tenant)
        if d is not None and not d.deleted:
            return d
        n = BLOCK_N
        u = [self.rng.randint(-3, 3) for _ in range(n)]
        v = [self.rng.randint(-3, 3) for _ in range(n)]
        flat = [float(x * y) for x in u for y in v]
        d = self.upload(tenant, "float64", [n, n], flat, self.rng.random() < 0.5, what="blocker upload")
        if d:
            d.rank1, d.blocker = (u, v), True
            self.blocker[tenant] = d
        return d

    def op_burst(self, tenant):
        """A slow product first (cpu_naive on 512x512), then jobs that queue behind it: cancel some, try to
        delete a dataset that one of them uses (409), have the other tenant try to cancel one (404)."""
        d = self.blocker_ds(tenant)
        if d is None:
            return
        alpha = self.rng.choice([1.0, 2.0])
        body = {"op": "matmul", "a": {"dataset": d.id}, "b": {"dataset": d.id}, "alpha": alpha, "device": L.DEVICE,
                "algorithm": "cpu_naive" if L.DEVICE == "cpu" else "naive"}
        job = Job(tenant, "matmul", "matmul", "float64", [BLOCK_N, BLOCK_N], None)
        job.mm = {"a": [[0.0] * BLOCK_N] * BLOCK_N, "b": [[0.0] * BLOCK_N] * BLOCK_N, "c": None, "alpha": alpha,
                  "beta": 0.0, "ds": {"a": d.id, "b": d.id}, "rank1": d.rank1}
        job.uses, job.algorithm = {d.id}, body["algorithm"]
        self.submit(tenant, job, "POST", "/v1/jobs", body, {}, None, None, "blocker")
        behind = []
        self.no_wait = True
        for _ in range(self.rng.randint(2, 5)):
            who = self.rng.choice(TENANTS)
            n0 = len(self.jobs)
            self.rng.choice([self.op_job_inline, self.op_job_dataset, self.op_job_oneshot])(who)
            if len(self.jobs) > n0:
                behind.append(list(self.jobs.values())[-1])
        self.no_wait = False
        for j in behind:
            a = self.rng.random()
            if a < 0.15:
                self.race_cancel(j.tenant, j)
            elif a < 0.45:
                self.cancel(j.tenant, j)
            elif a < 0.6:
                r = self.call(OTHER[j.tenant], "DELETE", "/v1/jobs/" + j.id)
                u = self.fresh_id("j")
                self.same_as_unknown("cancel of another tenant's queued job", r, j.id,
                                     self.call(OTHER[j.tenant], "DELETE", "/v1/jobs/" + u), u)
            elif a < 0.8 and j.dataset:
                self.delete_ds(j.tenant, self.ds[j.dataset])
        if self.rng.random() < 0.3:
            self.delete_ds(tenant, d)  # in use by the blocker (409), unless it has ended already

    # ------------------------------------------------ races: requests in parallel

    def op_race(self, tenant):
        self.rng.choice([self.race_key, self.race_key, self.race_delete])(tenant)

    def race_key(self, tenant):
        """One Idempotency-Key sent k times at once: one resource, made by exactly one of them; the others
        replay it or answer 409 (the key still in flight)."""
        key, k = self.new_key(), self.rng.randint(2, 5)
        if self.rng.random() < 0.6:
            op, dtype = self.rng.choice(L.OPS), self.rng.choice(L.DTYPES)
            flat = self.gen_values(op, dtype, self.rng.randint(1, 30))
            body = {"op": op, "dtype": dtype, "data": flat, "device": L.DEVICE}
            rs = self.batch([(tenant, "POST", "/v1/jobs", body, {"Idempotency-Key": key})] * k, k)
            ok = [r for r in rs if r.status in (200, 202)]
            job = Job(tenant, "reduce", op, dtype, [len(flat)], None)
            job.flat = flat
            rec = dict(kind="job", method="POST", path="/v1/jobs", body=body, ctype="application/json", model=job)
        else:
            dtype = self.rng.choice(L.DTYPES)
            flat = self.ds_values(dtype, self.rng.randint(1, 40), False)
            path = "/v1/datasets?dtype=%s&shape=%d" % (dtype, len(flat))
            body = pack(dtype, flat)
            h = {"Idempotency-Key": key, "Content-Type": "application/octet-stream"}
            rs = self.batch([(tenant, "POST", path, body, h)] * k, k)
            ok = [r for r in rs if r.status == 201]
            d = Dataset(None, tenant, dtype, [len(flat)], flat)
            rec = dict(kind="dataset", method="POST", path=path, body=body, ctype="application/octet-stream", model=d)
        for r in rs:
            self.outcomes["race key %d%s" % (r.status, " replayed" if r.headers.get("idempotent-replayed") else "")] += 1
            if r.status == 409:
                self.problem("the same key in flight", r, 409, "Idempotency-Key")
        if not CHECK.ok(ok and len(ok) + sum(r.status == 409 for r in rs) == k,
                        self.what("%d parallel POSTs with one key: %s" % (k, [r.status for r in rs]))):
            return
        ids = {r.json().get("id") for r in ok}
        CHECK.eq(len(ids), 1, self.what("parallel POSTs with one key: one resource (%s)" % sorted(map(str, ids))))
        made = [r for r in ok if r.headers.get("idempotent-replayed") is None]
        CHECK.eq(len(made), 1, self.what("parallel POSTs with one key: made by exactly one (statuses %s, replayed %s)"
                                         % ([r.status for r in rs], [r.headers.get("idempotent-replayed") for r in rs])))
        rid = ids.pop()
        if rid in self.jobs or rid in self.ds or not isinstance(rid, str):
            return CHECK.ok(False, self.what("parallel POSTs with one key answered a known id %r" % rid))
        model = rec["model"]
        model.id = rid
        rec["id"] = rid
        self.keys[(tenant, key)] = rec
        if rec["kind"] == "job":
            self.jobs[rid] = model
            for r in ok:
                self.seen(model, r.json(), "race", "parallel POST with one key")  # no order among them: no monotony
        else:
            model.doc = ok[0].json()
            for r in ok:
                model.same_record(r.json(), self.what("parallel uploads with one key: one record"))
            self.ds[rid] = model

    def race_delete(self, tenant):
        """DELETEs of a dataset racing jobs on it: at most one DELETE succeeds; a job is either refused with
        404 or accepted, and then runs to the right answer (the final checks), which it could not without
        its file."""
        d = self.pick(self.own_ds(tenant, pred=lambda x: x.flat is not None and x.count <= 64 and not x.blocker))
        if d is None:
            return
        reqs, jobs = [], []
        for _ in range(self.rng.randint(1, 2)):
            reqs.append((tenant, "DELETE", "/v1/datasets/" + d.id, None, None))
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.choice(self.ds_ops(d))
            reqs.append((tenant, "POST", "/v1/jobs", {"op": op, "dataset": d.id, "device": L.DEVICE}, None))
        self.rng.shuffle(reqs)
        rs = self.batch(reqs, len(reqs))
        deleted = 0
        for (auth, method, path, body, _), r in zip(reqs, rs):
            if method == "DELETE":
                CHECK.ok(r.status in (204, 404, 409), self.what("racing DELETE answered %d" % r.status))
                deleted += r.status == 204
                self.outcomes["race delete %d" % r.status] += 1
                continue
            self.outcomes["race job %d" % r.status] += 1
            if r.status == 404:
                self.problem("a job racing its dataset's DELETE", r, 404, "dataset")
                continue
            if not CHECK.eq(r.status, 202, self.what("a job racing its dataset's DELETE (%r)" % r.body[:200])):
                continue
            job = Job(tenant, "reduce", body["op"], d.dtype, [d.count] if len(d.shape) < 2 else d.shape, None)
            job.flat, job.dataset, job.uses = d.flat, d.id, {d.id}
            job.id = r.json().get("id")
            if CHECK.ok(isinstance(job.id, str) and job.id not in self.jobs, self.what("racing job id %r" % job.id)):
                self.jobs[job.id] = job
                jobs.append(job)
                self.seen(job, r.json(), "race", "a job racing its dataset's DELETE")
        CHECK.ok(deleted <= 1, self.what("%d DELETEs of one dataset answered 204" % deleted))
        if deleted:
            # a job accepted before the DELETE began holds it (409); one after is refused (404): so every job
            # on it, the racing ones too, had ended when the DELETE answered 204
            d.deleted = True
            for j in self.users(d):
                g = self.call(tenant, "GET", "/v1/jobs/" + j.id)
                if g.status == 200:
                    CHECK.ok(g.json().get("status") in TERMINAL, self.what(
                        "job %s on dataset %s is %s after a racing DELETE answered 204" % (j.id, d.id, g.json().get("status"))))
                    self.job_answer(j, g, None, "GET a job on a raced dataset")
        g = self.call(tenant, "GET", "/v1/datasets/" + d.id)
        CHECK.eq(g.status, 404 if deleted else 200, self.what("the raced dataset after %d deletes" % deleted))

    def race_cancel(self, tenant, job):
        """Cancels of one queued job at once: at most one 200, and at most one 204 (a DELETE that found
        it ended, by then or by another of them, deleted it; one after that finds none)."""
        k = self.rng.randint(2, 4)
        rs = self.batch([(tenant, "DELETE", "/v1/jobs/" + job.id, None, None)] * k, k)
        wins = [r for r in rs if r.status == 200]
        deletes = [r for r in rs if r.status == 204]
        CHECK.ok(len(wins) <= 1 and len(deletes) <= 1 and all(r.status in (200, 204, 404, 409) for r in rs) and
                 (deletes or all(r.status != 404 for r in rs)),
                 self.what("%d parallel cancels of one job: %s" % (k, [r.status for r in rs])))
        for r in rs:
            self.outcomes["race cancel %d" % r.status] += 1
            if r.status in (404, 409):
                self.problem("a parallel cancel", r, r.status)
        if wins and not job.canceled and not job.cancel_refused:
            job.canceled = True
            self.seen(job, wins[0].json(), "cancel", "parallel cancel")
        elif wins:
            CHECK.ok(False, self.what("a parallel cancel answered 200 for a job canceled or refused before"))
        elif not job.canceled and not deletes:
            job.cancel_refused = True
        if deletes:
            self.forget(job)

    # ------------------------------------------------ checkpoints and the end

    def checkpoint(self):
        for t in TENANTS:
            self.list_jobs(t)
            self.list_ds(t)

    def settle(self, limit_s=240):
        """Wait for every job to end (GET ?wait=5); the ones that do not are failures."""
        deadline = time.time() + limit_s
        while time.time() < deadline:
            left = [j for j in self.jobs.values() if j.final is None]
            if not left:
                return
            for t in TENANTS:
                mine = [j for j in left if j.tenant == t]
                if not mine:
                    continue
                rs = self.srv.batch([dict(path="/v1/jobs/%s?wait=5" % j.id,
                                          headers={"Authorization": "Bearer " + TOKENS[t]}) for j in mine])
                for j, r in zip(mine, rs):
                    self.observe("GET ?wait=5 while settling", r)
                    r.elapsed = 0
                    self.job_answer(j, r, None, "GET ?wait=5 while settling")
        left = [j.id for j in self.jobs.values() if j.final is None]
        CHECK.ok(not left, self.what("%d jobs never ended: %s" % (len(left), left[:5])))

    def final(self):
        self.label = "final"
        self.settle()
        for j in self.jobs.values():
            if j.final is None:
                continue
            want = "canceled" if j.canceled else "succeeded"
            CHECK.eq(j.final["status"], want, self.what("job %s's final status" % j.id))
            if j.cancel_refused:
                CHECK.ok(j.final["status"] != "canceled", self.what("job %s canceled after its cancel answered 409" % j.id))
        # the store has every final state now: the lists show them (and nothing else changes the store)
        for t in TENANTS:
            for lim in (1, self.rng.choice([2, 3, 7]), 1000):
                self.list_jobs(t, limit=lim)
                self.list_ds(t, limit=lim)
            self.list_jobs(t, "&status=canceled")
            self.list_jobs(t, "&status=succeeded")
            self.list_jobs(t, "&op=" + self.rng.choice(L.OPS))
        for j in self.jobs.values():
            j.committed = j.committed or j.final is not None
        # an admin's ?tenant=NAME page is that tenant's, entry for entry
        for t in TENANTS:
            mine = self.walk(t, "jobs", "", 1000, "jobs of %s" % t)
            adm = self.walk("ops", "jobs", "&tenant=" + t, self.rng.choice([3, 1000]), "admin's jobs of %s" % t)
            CHECK.eq(adm, mine, self.what("the admin's ?tenant=%s jobs = that tenant's own list" % t))
            mine = self.walk(t, "datasets", "", 1000, "datasets of %s" % t)
            adm = self.walk("ops", "datasets", "&tenant=" + t, 1000, "admin's datasets of %s" % t)
            CHECK.eq(adm, mine, self.what("the admin's ?tenant=%s datasets = that tenant's own list" % t))
        for i in sorted(self.gone)[:20]:  # a deleted job is gone for its tenant and for the admin
            self.problem("GET a deleted job", self.call("ops", "GET", "/v1/jobs/" + i), 404)
        # every deleted dataset is gone on every route; every live one is readable
        for d in self.ds.values():
            if d.deleted:
                for m, sub in (("GET", ""), ("GET", "/data"), ("DELETE", "")):
                    self.problem("%s a deleted dataset%s" % (m, sub), self.call(d.tenant, m, "/v1/datasets/" + d.id + sub), 404)
        # conditional list requests: with the store idle, the ETag of a page holds until the page changes
        t = self.rng.choice(TENANTS)
        r1 = self.call(t, "GET", "/v1/jobs?limit=5")
        tag = r1.headers.get("etag")
        if CHECK.ok(r1.status == 200 and tag, self.what("a job page has an ETag (%r)" % r1.headers)):
            r2 = self.call(t, "GET", "/v1/jobs?limit=5", headers={"If-None-Match": tag})
            CHECK.eq((r2.status, r2.body), (304, b""), self.what("If-None-Match on an unchanged job page"))
            self.op_upload(t)
            r3 = self.call(t, "GET", "/v1/jobs?limit=5", headers={"If-None-Match": tag})
            CHECK.eq(r3.status, 304, self.what("If-None-Match on the job page after an upload (it changes no job)"))
            self.op_job_inline(t)
            r4 = self.call(t, "GET", "/v1/jobs?limit=5", headers={"If-None-Match": tag})
            CHECK.eq(r4.status, 200, self.what("If-None-Match with a page's ETag from before a job of the tenant's"))
            CHECK.ok(r4.headers.get("etag") not in (None, tag), self.what("a page's ETag after a change"))
        # every job's ETag now names its final status: a GET with it is a 304
        for j in list(self.jobs.values())[-40:]:
            tags = [k for k, v in j.etags.items() if j.final and v == j.final["status"]]
            if tags:
                r = self.call(j.tenant, "GET", "/v1/jobs/" + j.id, headers={"If-None-Match": tags[0]})
                CHECK.eq(r.status, 304, self.what("If-None-Match with the final ETag of %s" % j.id))

    STEP_WEIGHTS = [
        ("job_inline", 14), ("job_dataset", 11), ("job_oneshot", 6), ("job_matmul", 5), ("replay", 8),
        ("get_job", 10), ("wait", 4), ("result", 6), ("cancel", 5), ("upload", 9), ("delete_ds", 5),
        ("get_ds", 5), ("list", 5), ("garbage", 5), ("burst", 2), ("race", 3), ("revoke", 1),
    ]

    def run(self):
        names = [n for n, _ in self.STEP_WEIGHTS]
        weights = [w for _, w in self.STEP_WEIGHTS]
        for t in TENANTS:  # something to work on from the start
            self.label = "seed datasets"
            self.op_upload(t)
            self.op_upload(t)
        for self.step in range(1, STEPS + 1):
            name = self.rng.choices(names, weights)[0]
            tenant = self.rng.choice(TENANTS)
            self.label = "%s as %s" % (name, tenant)
            self.ops[name] += 1
            t = time.time()
            getattr(self, "op_" + name)(tenant)
            if time.time() - t > 2:  # where the time goes, on a loaded machine
                print("step %d (%s) took %.1fs" % (self.step, self.label, time.time() - t), flush=True)
            if not self.srv.alive():
                CHECK.ok(False, self.what("the server exited (rc %r)" % self.srv.proc.returncode))
                return
            if self.step % 80 == 0:
                self.label = "checkpoint"
                self.checkpoint()
        self.step += 1
        self.final()


def main():
    if L.DEVICE != "cpu" and L.DEVICE != "gpu":
        raise L.Skip("GPURED_TEST_DEVICE=%s is neither cpu nor gpu" % L.DEVICE)
    tmp = tempfile.mkdtemp(prefix="gpured-seq-")
    atexit.register(shutil.rmtree, tmp, True)  # only the tokens file: nothing to keep for a post-mortem
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write("alice %s\nbob %s\nops %s admin\n" % (TOKENS["alice"], TOKENS["bob"], TOKENS["ops"]))
    srv = L.Server(args=["--tokens-file", path]).start()
    if L.DEVICE == "gpu":
        devs = srv.req("GET", "/v1/devices", headers={"Authorization": "Bearer " + TOKENS["ops"]}).json()
        if not devs.get("gpus"):
            srv.stop()
            raise L.Skip("GPURED_TEST_DEVICE=gpu but this server has no GPU")
    print("seed %d, %d steps (replay: GPURED_SEQ_SEED=%d GPURED_SEQ_STEPS=%d)" % (SEED, STEPS, SEED, STEPS), flush=True)
    fz = Fuzz(srv, random.Random(SEED), path)
    try:
        fz.run()
    finally:
        print("%.1fs; steps %s; answers %s; %s; %d jobs (%d canceled), %d datasets (%d deleted)" % (
            time.time() - fz.t0, dict(fz.ops), dict(sorted(fz.codes.items())), dict(sorted(fz.outcomes.items())), len(fz.jobs),
            sum(1 for j in fz.jobs.values() if j.canceled), len(fz.ds), sum(1 for d in fz.ds.values() if d.deleted)),
            flush=True)
        if CHECK.fails:
            print("seed %d: the last requests before the end (replay with GPURED_SEQ_SEED=%d):" % (SEED, SEED))
            for line in fz.trace:
                print("  > " + line)
    L.check_stop(srv)


if __name__ == "__main__":
    L.run_suite(main)
