# ops_lib.py: shared by the operability suites (metrics, OpenAPI, dashboard, deployment): a strict
# parser of the Prometheus text format, Debian's python for Debian's python modules, and the
# rule that these device-independent suites run under the cpu label only. Single-threaded.
import os
import re
import sys

import e2e_lib as L

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(r"^(%s)(?:\{(.*)\})? (\S+)(?: -?\d+)?$" % NAME)
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class Metrics:
    """A parsed exposition: families {name: type}, samples {(name, labels tuple): value}, problems []."""

    def __init__(self, text):
        self.types, self.helps, self.samples, self.problems = {}, {}, {}, []
        for n, line in enumerate(text.split("\n"), 1):
            if not line:
                continue
            if line.startswith("#"):
                self._comment(n, line)
                continue
            m = SAMPLE.match(line)
            if not m:
                self.problems.append("line %d is not a sample: %r" % (n, line))
                continue
            name, labels, value = m.group(1), self._labels(n, m.group(2) or ""), m.group(3)
            try:
                v = float(value)
            except ValueError:
                self.problems.append("line %d: value %r is not a number" % (n, value))
                continue
            fam = self.family_of(name)
            if fam not in self.types:
                self.problems.append("line %d: sample %s before its # TYPE line" % (n, name))
            key = (name, labels)
            if key in self.samples:
                self.problems.append("line %d: duplicate sample %s%r" % (n, name, labels))
            self.samples[key] = v
        if not text.endswith("\n"):
            self.problems.append("the exposition does not end with a newline")

    def _comment(self, n, line):
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
            name = parts[2]
            rest = parts[3] if len(parts) > 3 else ""
            table = self.helps if parts[1] == "HELP" else self.types
            if name in table:
                self.problems.append("line %d: second # %s for %s" % (n, parts[1], name))
            if parts[1] == "TYPE" and rest not in TYPES:
                self.problems.append("line %d: unknown type %r" % (n, rest))
            table[name] = rest

    def _labels(self, n, s):
        out, pos = [], 0
        while pos < len(s):
            m = LABEL.match(s, pos)
            if not m:
                self.problems.append("line %d: unreadable labels {%s}" % (n, s))
                break
            out.append((m.group(1), m.group(2)))
            pos = m.end()
        return tuple(sorted(out))

    def family_of(self, name):
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and self.types.get(base) in ("histogram", "summary"):
                return base
        return name

    def get(self, metric, **labels):
        """The sample's value, 0 when absent (counters that never moved are not all listed)."""
        return self.samples.get((metric, tuple(sorted(labels.items()))), 0.0)

    def series(self, name):
        """[(labels dict, value)] of every sample named name."""
        return [(dict(k[1]), v) for k, v in self.samples.items() if k[0] == name]


def scrape(srv):
    r = srv.req("GET", "/metrics")
    if r.status != 200:
        raise RuntimeError("GET /metrics -> %r" % r)
    return Metrics(r.body.decode("utf-8"))


def cpu_label_only(what):
    """These suites do not depend on the device: the gpu-labelled copy skips, saying so."""
    if L.DEVICE != "cpu":
        print("SKIPPED: %s does not depend on the device; it runs under the cpu label" % what, flush=True)
        sys.exit(L.SKIP)


def with_debian_python(module):
    """Debian ships python3-MODULE for /usr/bin/python3; if this interpreter (e.g. a pyenv one)
    cannot import it, run this script again under Debian's."""
    try:
        __import__(module)
        return
    except ImportError:
        pass
    deb = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(deb) and os.access(deb, os.X_OK):
        os.execv(deb, [deb] + sys.argv)


def build_dir():
    """The build directory (artifacts and the schemathesis venv go there): where GPURED_BIN is."""
    return os.path.dirname(os.path.abspath(L.BIN)) if L.BIN else os.getcwd()
