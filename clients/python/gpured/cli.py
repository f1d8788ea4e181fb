# cli.py: gpured-cli (also `python3 -m gpured`): jobs and datasets of a gpured service from a shell.
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .client import Client, Dataset, Job
from .errors import Error
from .events import Event

USAGE = """examples:
  gpured-cli submit sum --data '[1, 2, 3]' --dtype int32 --wait
  gpured-cli submit argmax values.npy --axis 1 --ties last
  gpured-cli upload values.npy            # prints the dataset: d_... dtype shape bytes
  gpured-cli submit mean --dataset d_0123456789abcdef --wait --json
  gpured-cli submit matmul --a a.npy --b b.npy --wait
  gpured-cli wait j_0123456789abcdef --timeout 30
  gpured-cli download d_0123456789abcdef out.npy
  gpured-cli ls jobs --status failed --limit 20
  gpured-cli rm d_0123456789abcdef j_0123456789abcdef   # deletes a dataset; cancels a queued job, deletes a finished one
  gpured-cli events --kind job --status failed,canceled  # one line per event, until Ctrl-C
  gpured-cli result j_0123456789abcdef    # the values (argmin/argmax: the indices)
  gpured-cli benchmark sum float32 16777216 --device gpu
  gpured-cli cleanup --kept --older-than 86400   # finished jobs with kept results, a day old
"""


class ProgressBar:
    """A text progress bar on stderr: label [#####    ]  42% 12.0/28.6 MB."""

    def __init__(self, label: str, quiet: bool = False) -> None:
        self.label, self.quiet, self.shown = label, quiet, -1

    def __call__(self, done: int, total: int) -> None:
        pct = 100 * done // total if total else 100
        if self.quiet or pct == self.shown:
            return
        self.shown = pct
        sys.stderr.write("\r%s [%-30s] %3d%% %.1f/%.1f MB" % (self.label, "#" * (pct * 30 // 100), pct,
                                                           done / 1e6, total / 1e6))
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _axes(arg: str) -> Any:
    """--axis: an axis, or a tuple of them ("0,2")."""
    axes = tuple(int(x) for x in arg.split(","))
    return axes[0] if len(axes) == 1 else axes


def _values(arg: Optional[str]) -> Any:
    """A .npy file's array, a dataset id (d_...) as it is, or None."""
    if arg is None or arg.startswith("d_"):
        return arg
    try:
        return np.load(arg)
    except (OSError, ValueError) as e:
        raise ValueError("%s is not a .npy file gpured-cli can read: %s" % (arg, e)) from e


def _json(flag: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError("%s is not JSON (%s): %r" % (flag, e, text[:80])) from e


def _line(obj: Any) -> str:
    if isinstance(obj, Event):
        if obj.kind == "gap":
            return "gap: the events after %s are no longer kept; going on after %d" % (obj.after, obj.seq)
        return "%d %s %s %s %s %s" % (obj.seq, obj.at, obj.kind, obj.id, obj.status, obj.tenant)
    if isinstance(obj, Job):
        d = obj.doc
        res = json.dumps(d.get("result") or d.get("error"), separators=(",", ":"))
        return "%s %s %s %s %s %s" % (d["id"], d["status"], d.get("op"), d.get("dtype"),
                                      json.dumps(d.get("shape")), res if len(res) <= 200 else res[:197] + "...")
    if isinstance(obj, Dataset):
        return "%s %s %s %d" % (obj.id, obj.dtype, json.dumps(list(obj.shape)), obj.nbytes)
    return json.dumps(obj)


def _show(args: argparse.Namespace, objs: Sequence[Any], many: bool = False) -> None:
    """Print what a command made or found: --json as JSON (a list where many), else one line each."""
    if args.json:
        docs = [o.doc if isinstance(o, (Job, Dataset)) else o for o in objs]
        print(json.dumps(docs if many else docs[0], indent=2))
    else:
        for o in objs:
            print(_line(o))


OPS = ["sum", "prod", "min", "max", "mean", "argmin", "argmax", "nansum", "nanmin", "nanmax", "count_nonzero", "var",
       "std", "nanmean", "nanprod", "nanvar", "nanstd", "nanargmin", "nanargmax", "ptp", "any", "all",
       "matmul"]


def cmd_submit(c: Client, args: argparse.Namespace) -> None:
    options = dict(axis=args.axis, keepdims=args.keepdims, ties=args.ties, ddof=args.ddof, accumulate=args.accumulate,
                   device=args.device, algorithm=args.algorithm, dtype=args.dtype)
    if args.op == "matmul":
        options.update(a=_values(args.a), b=_values(args.b), c=_values(args.c), alpha=args.alpha, beta=args.beta)
        data = None
    else:
        data = args.dataset or (_json("--data", args.data) if args.data is not None else _values(args.file))
    job = c.submit(args.op, data, **options)
    _show(args, [job.wait() if args.wait else job])


def cmd_get(c: Client, args: argparse.Namespace) -> None:
    _show(args, [c.dataset(args.id) if args.id.startswith("d_") else c.job(args.id)])


def cmd_wait(c: Client, args: argparse.Namespace) -> None:
    job = c.job(args.id).wait(args.timeout)
    _show(args, [job])
    if not job.done:
        raise SystemExit(3)


def cmd_upload(c: Client, args: argparse.Namespace) -> None:
    _show(args, [c.upload(args.file, progress=ProgressBar("upload", args.quiet))])


def cmd_download(c: Client, args: argparse.Namespace) -> None:
    bar = ProgressBar("download", args.quiet)
    if args.id.startswith("j_"):
        c.job(args.id).save(args.file, args.part, bar)
    else:
        c.dataset(args.id).save(args.file, bar)
    _show(args, [{"id": args.id, "file": args.file, "bytes": os.path.getsize(args.file)}])


def cmd_ls(c: Client, args: argparse.Namespace) -> None:
    items = c.datasets(limit=args.limit) if args.what == "datasets" else \
        c.jobs(status=args.status, op=args.op, limit=args.limit)
    _show(args, list(items), many=True)


def cmd_rm(c: Client, args: argparse.Namespace) -> None:
    done = []
    for i in args.ids:
        if i.startswith("d_"):
            Dataset(c, {"id": i}).delete()
            done.append({"id": i, "deleted": True})
        else:
            job = c.job(i).cancel()
            done.append({"id": i, "deleted": True} if job.deleted else job.doc)
    _show(args, done, many=True)


def cmd_result(c: Client, args: argparse.Namespace) -> None:
    """A job's result (waiting for it up to --timeout): as JSON with --json, else as NumPy prints it."""
    value = c.job(args.id).result(args.part, timeout=args.timeout)
    if args.json:
        print(json.dumps(value if isinstance(value, dict) else np.asarray(value).tolist()))
    else:
        print(value if isinstance(value, dict) else np.array2string(np.asarray(value), threshold=1000))


def cmd_devices(c: Client, args: argparse.Namespace) -> None:
    d = c.devices()
    if args.json:
        print(json.dumps(d, indent=2))
        return
    for g in d.get("gpus", []):
        print("%s %s %.1f GiB %s GB/s cached %d" % (g.get("id"), g.get("name"), (g.get("memory_bytes") or 0) / 2**30,
                                                   g.get("ceiling_gbps"), len((g.get("cache") or {}).get("datasets", []))))
    cpu = d.get("cpu") or {}
    print("%s %s %s threads" % (cpu.get("id"), cpu.get("name"), cpu.get("threads")))


def cmd_algorithms(c: Client, args: argparse.Namespace) -> None:
    algos = c.algorithms()
    if args.json:
        print(json.dumps(algos, indent=2))
        return
    for a in algos:
        print("%s %s %s: %s" % (a.get("device"), a.get("name"), ",".join(a.get("ops", [])), a.get("description", "")))


def cmd_benchmark(c: Client, args: argparse.Namespace) -> None:
    algos = args.algorithms.split(",") if args.algorithms else None
    job = c.benchmark(args.op, args.dtype, args.n, algorithms=algos, repeats=args.repeats, device=args.device)
    table = job.result()
    if args.json:
        print(json.dumps(table, indent=2))
        return
    rate = "gflops" if args.op == "matmul" else "gbps"
    for r in table.get("rows", []):
        if r.get("error"):
            print("%-20s did not run: %s" % (r.get("algorithm"), r["error"]))
            continue
        print("%-20s %10.4f ms %10.2f %s %s" % (r.get("algorithm"), r["median_ms"], r[rate], rate,
                                               "matched" if r.get("matched") else "MISMATCH"))


def cmd_cleanup(c: Client, args: argparse.Namespace) -> None:
    _show(args, [c.cleanup(older_than=args.older_than, kept=args.kept)])


def cmd_events(c: Client, args: argparse.Namespace) -> None:
    """One line per event (--json: the event's JSON) as it comes, until Ctrl-C (exit 0)."""
    try:
        with c.events(job=args.job, kind=args.kind, status=args.status, after=args.after) as events:
            for ev in events:
                print(json.dumps(dict(ev.data, kind=ev.kind)) if args.json else _line(ev), flush=True)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # the reader went away (| head): no complaint at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _options(after_command: bool) -> argparse.ArgumentParser:
    """The options every command takes, before it or after it (``gpured-cli ls --json``)."""
    p = argparse.ArgumentParser(add_help=False)
    def default(v: Any) -> Any:  # given after the command, an option overrides the one before it
        return argparse.SUPPRESS if after_command else v
    p.add_argument("--url", default=default(os.environ.get("GPURED_URL", "http://127.0.0.1:8080")),
                   help="the service (env GPURED_URL; default http://127.0.0.1:8080)")
    p.add_argument("--token", default=default(os.environ.get("GPURED_TOKEN")), help="bearer token (env GPURED_TOKEN)")
    p.add_argument("--json", action="store_true", default=default(False), help="print the resources as JSON")
    p.add_argument("--quiet", "-q", action="store_true", default=default(False), help="no progress bar")
    p.add_argument("--retries", type=int, default=default(5), help="retries after 429/503 (default 5)")
    return p


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpured-cli", description="Jobs and datasets of a gpured service.",
                                epilog=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter,
                                parents=[_options(False)])
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:  # each command takes the options too
        return sub.add_parser(name, help=help, parents=[_options(True)])

    s = add("submit", help="submit a job (values from a .npy file, --data or --dataset)")
    s.add_argument("op", choices=OPS)
    s.add_argument("file", nargs="?", help="a .npy file of the values")
    s.add_argument("--data", help="the values as JSON, e.g. '[[1, 2], [3, 4]]'")
    s.add_argument("--dataset", help="a stored dataset's id")
    s.add_argument("--dtype", help="int32, int64, float32 or float64 (default: the values')")
    s.add_argument("--axis", type=_axes, help="an axis, or axes separated by commas (e.g. 0,2; -1: the last)")
    s.add_argument("--keepdims", action="store_true", help="keep the reduced axes as 1 (NumPy's shape)")
    s.add_argument("--ties", choices=["first", "last"])
    s.add_argument("--ddof", type=int, help="var, std: divide by the count less this")
    s.add_argument("--accumulate", choices=["float64"], help="a float32 sum, product, mean or spread as float64")
    s.add_argument("--device", default="auto")
    s.add_argument("--algorithm", default="auto")
    for k in ("a", "b", "c"):
        s.add_argument("--" + k, help="matmul: operand %s, a .npy file or a dataset id" % k)
    s.add_argument("--alpha", type=float)
    s.add_argument("--beta", type=float)
    s.add_argument("--wait", action="store_true", help="wait for the job to end")
    s.set_defaults(run=cmd_submit)

    s = add("get", help="show a job (j_...) or a dataset (d_...)")
    s.add_argument("id")
    s.set_defaults(run=cmd_get)

    s = add("wait", help="wait for a job to end (exit 3 if it has not in time)")
    s.add_argument("id")
    s.add_argument("--timeout", type=float)
    s.set_defaults(run=cmd_wait)

    s = add("upload", help="upload a .npy file as a dataset")
    s.add_argument("file")
    s.set_defaults(run=cmd_upload)

    s = add("download", help="save a dataset's values, or a job's result, as a .npy file")
    s.add_argument("id")
    s.add_argument("file")
    s.add_argument("--part", choices=["values", "indices"],
                   help="a job's values or indices (default: indices for argmin/argmax, as Job.result())")
    s.set_defaults(run=cmd_download)

    s = add("ls", help="list jobs or datasets, newest first")
    s.add_argument("what", nargs="?", choices=["jobs", "datasets"], default="jobs")
    s.add_argument("--status", choices=["queued", "running", "succeeded", "failed", "canceled"])
    s.add_argument("--op")
    s.add_argument("--limit", type=int, default=50, help="at most this many (default %(default)s)")
    s.set_defaults(run=cmd_ls)

    s = add("rm", help="delete datasets (d_...); cancel queued jobs (j_...), delete finished ones with their kept results")
    s.add_argument("ids", nargs="+")
    s.set_defaults(run=cmd_rm)

    s = add("result", help="print a job's result (waiting for it)")
    s.add_argument("id")
    s.add_argument("--part", choices=["values", "indices"], help="default: indices for argmin/argmax, else values")
    s.add_argument("--timeout", type=float, help="seconds to wait for the job (default: the client's 60)")
    s.set_defaults(run=cmd_result)

    s = add("devices", help="the GPUs and the CPU backend")
    s.set_defaults(run=cmd_devices)

    s = add("algorithms", help="the variants per op and device")
    s.set_defaults(run=cmd_algorithms)

    s = add("benchmark", help="run a device's variants side by side and print the table")
    s.add_argument("op", choices=OPS)
    s.add_argument("dtype", choices=["int32", "int64", "float32", "float64"])
    s.add_argument("n", type=int, help="values (matmul: n x n operands)")
    s.add_argument("--algorithms", help="comma-separated (default: all)")
    s.add_argument("--repeats", type=int)
    s.add_argument("--device", default="auto")
    s.set_defaults(run=cmd_benchmark)

    s = add("cleanup", help="delete finished jobs in bulk, with the datasets their results were kept in")
    s.add_argument("--older-than", type=int, metavar="SECONDS", help="jobs submitted this long ago")
    s.add_argument("--kept", action="store_true", help="jobs whose result the service kept as datasets")
    s.set_defaults(run=cmd_cleanup)

    s = add("events", help="print job and dataset events as they happen, until Ctrl-C "
                           "(reconnecting and resuming if the service restarts)")
    s.add_argument("--job", help="one job's (j_...)")
    s.add_argument("--kind", choices=["job", "dataset"])
    s.add_argument("--status", help="any of these, comma-separated (queued,succeeded,failed,canceled,created,deleted)")
    s.add_argument("--after", type=int, help="replay the kept events after this id first")
    s.set_defaults(run=cmd_events)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    run: Callable[[Client, argparse.Namespace], None] = args.run
    try:
        with Client(args.url, token=args.token, retries=args.retries) as c:
            run(c, args)
    except Error as e:
        print("gpured-cli: %s" % e, file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (| head): quietly, with nothing left to flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, ValueError) as e:
        print("gpured-cli: %s" % e, file=sys.stderr)
        return 2
    return 0
