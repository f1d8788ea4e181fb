#!/usr/bin/env python3
# layers.py: the layering the build relies on, checked from the sources (ctest unit.layers):
# every project include names its folder ("db/store.h"); a module includes only its own folder
# and those below it (common <- db, gpu <- server <- api; server/main.c, the composition root,
# may include api); and no two units (a .c/.cu and its .h) include each other, however
# indirectly. Prints each breach; exits 1 if any.
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# what each module may include besides itself
BELOW = {"common": set(), "db": {"common"}, "gpu": {"common"}, "server": {"common", "db", "gpu"},
         "api": {"common", "db", "gpu", "server"}}
GENERATED = {"gr_version.h"}  # written into the build directory
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources():
    for mod in BELOW:
        for d, _, files in os.walk(os.path.join(ROOT, mod)):
            for f in sorted(files):
                if f.endswith((".c", ".h", ".cu", ".cuh")):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def unit(path):
    """A unit is a .c/.cu and its header: the path without its extension."""
    return os.path.splitext(path)[0]


def is_unit(u):
    """Whether u has code of its own. A header without (a private header, a shared vocabulary) is
    seen through: who includes it depends on what it includes."""
    return any(os.path.exists(os.path.join(ROOT, u + ext)) for ext in (".c", ".cu"))


def main():
    bad = []
    edges = {}
    for src in sources():
        mod = src.split("/")[0]
        text = open(os.path.join(ROOT, src), encoding="utf-8").read()
        for inc in INCLUDE.findall(text):
            if inc in GENERATED:
                continue
            if "/" not in inc or not os.path.exists(os.path.join(ROOT, inc)):
                bad.append("%s: #include \"%s\" does not name its folder from the source root" % (src, inc))
                continue
            to = inc.split("/")[0]
            allowed = BELOW[mod] | {mod} | ({"api"} if src == "server/main.c" else set())
            if to not in allowed:
                bad.append("%s: includes %s, a layer above %s (common <- db, gpu <- server <- api)" % (src, inc, mod))
            if unit(inc) != unit(src):
                edges.setdefault(unit(src), set()).add(unit(inc))
    # edges between units only, through the headers that are no unit
    def reach(u, seen):
        for v in edges.get(u, ()):
            if v in seen:
                continue
            seen.add(v)
            if not is_unit(v):
                reach(v, seen)
        return seen
    edges = {u: {v for v in reach(u, set()) if is_unit(v) and v != u} for u in list(edges) if is_unit(u)}
    # cycles between units: a depth-first search that reports each back edge's loop once
    state, stack, seen = {}, [], set()

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                loop = stack[stack.index(v):] + [v]
                key = frozenset(loop)
                if key not in seen:
                    seen.add(key)
                    bad.append("include cycle: " + " -> ".join(loop))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(edges):
        if u not in state:
            visit(u)
    for b in bad:
        print(b)
    print("%d units, %d breaches" % (len(edges), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
