# client.py: gpured.Client, the HTTP API (docs/API.md) as Python calls, with its Job and Dataset.
# Each call that talks to the service is written once, as a flow (_flows.py): Client runs it with
# requests, AsyncClient (aio.py) with aiohttp.
from __future__ import annotations

import email.utils
import math
import os
import random
import threading
import time
import uuid
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import requests
import urllib3

from . import _wire
from ._flows import Close, Flow, Got, Lost, Read, Send, Sleep, drive, flow
from ._wire import Body, Progress
from .errors import Error, JobFailed, Timeout, Unavailable

if TYPE_CHECKING:
    from .events import EventStream, JobWatch

TERMINAL = ("succeeded", "failed", "canceled")
MAX_WAIT = 60
"""The longest wait gpured honours, in seconds (``Prefer: wait=N``, ``?wait=N``)."""
JSON_MAX_ELEMENTS = 256
"""Arrays of at most this many (finite) values go inline as JSON; larger ones as the one-shot
binary body (raw little-endian values, the job's members in the query). Measured with this
client on the CPU backend over loopback (sum of float32, median of 30): the two are equal to
within noise up to about 128 values (1.0 to 1.9 ms each), and the raw body is faster from 256
(1.4 against 2.3 ms), 1.8x at 512 and 2.3x at 1,024 (API.md measures 2.4x there)."""
BACKOFF_FIRST, BACKOFF_MAX = 0.25, 30.0
"""Seconds before the first retry; it doubles with each one, up to BACKOFF_MAX."""

REAL_OPS = ("mean", "var", "std", "nanmean", "nanvar", "nanstd")
"""The ops whose results are float64 whatever the integer dtype."""
Axis = Union[None, int, Sequence[int]]
"""The axes reduced, as NumPy takes them: None (all), an axis, or several; negative from the end."""
Reduced = Union[np.generic, np.ndarray]
"""What a reduction gives: a NumPy scalar (whole array) or an array of NumPy's shape (axes)."""
Result = Union[np.generic, np.ndarray, dict]
"""What Job.result gives: a reduction's, a product's array, or a benchmark's table."""
Source = Any
"""Values to reduce: anything numpy.asarray takes (1-D to 8-D), a Dataset, or a dataset id."""


class Client:
    """A connection to one gpured service.

    ``url``: the service's base URL. ``token``: its bearer token, sent as ``Authorization:
    Bearer``, when the service has a tokens file. ``timeout``: the deadline, in seconds, of each
    call that takes no ``timeout=`` of its own: a reduction or product from submission to
    result, a request with its retries (long polls add the time they asked for). Past it,
    :class:`gpured.Timeout` (also a ``TimeoutError``). ``retries``: how often a request answered
    ``429`` or ``503`` (or, where it is safe to send again, one that got no answer from a service
    that answered before) is sent again, after an exponential backoff of at least
    ``Retry-After``, within the deadline.
    ``max_body_bytes``: the service's ``--max-body-bytes``; a one-shot binary job larger than
    this is sent as a dataset instead (uploaded, used, deleted). ``on_response``: called with
    every HTTP response as it arrives (``requests.Response``; an AsyncClient's, ``aiohttp``'s),
    for logs or metrics.

    Every POST that creates a job or dataset carries an ``Idempotency-Key`` (a uuid4), the same
    one on each retry, so a retry never makes a second one. Batches (:meth:`submit_many`) take
    no key (API.md), so they are sent again only after a ``429``/``503``, which stores nothing.

    A client may be shared by threads: each thread gets its own HTTP session.
    """

    def __init__(self, url: str = "http://127.0.0.1:8080", token: Optional[str] = None, timeout: float = 60,
                 retries: int = 5, max_body_bytes: int = 8 << 20,
                 on_response: Optional[Callable[[Any], None]] = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.max_body_bytes = max_body_bytes
        self.on_response = on_response
        self._reached = False  # whether the service has answered this client yet
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "gpured.Client(%r)" % self.url

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections of every thread."""
        with self._lock:
            for s in self._sessions:
                s.close()
            self._sessions.clear()
        self._local = threading.local()

    # ------------------------------------------------------------ the one place for HTTP

    def request(self, method: str, path: str, *, params: Optional[Mapping[str, Any]] = None, json: Any = None,
                body: Optional[Body] = None, content_type: Optional[str] = None,
                headers: Optional[Mapping[str, str]] = None, key: bool = False, wait: float = 0,
                stream: bool = False, retries: Optional[int] = None,
                deadline: Optional[float] = None) -> requests.Response:
        """Send one request to the service and return its answer (status below 400).

        ``key``: send an ``Idempotency-Key``, the same on every retry. ``wait``: seconds the
        service may hold the answer (a long poll), added to the timeout. Retries ``429`` and
        ``503`` (not a ``503`` naming a broken device, which only a restart repairs), a ``409``
        for this key's first try still in progress, and, for a GET or a keyed POST, a request
        that got no answer (``retries`` times: the client's unless given), all within the client's
        timeout (plus ``wait``) or ``deadline`` (``time.monotonic()``), whichever comes first.
        ``stream``: return once the headers are in, the body read as it comes. Raises
        :class:`Error` (its subclass for the case) with the problem the service answered,
        :class:`Unavailable` when none came, :class:`Timeout` past the deadline."""
        got = drive(self._request(method, path, params=params, json=json, body=body, content_type=content_type,
                                  headers=headers, key=key, wait=wait, answer="stream" if stream else "json",
                                  retries=retries, deadline=deadline), self._do)
        return got.response

    def _request(self, method: str, path: str, *, params: Optional[Mapping[str, Any]] = None, json: Any = None,
                 body: Optional[Body] = None, content_type: Optional[str] = None,
                 headers: Optional[Mapping[str, str]] = None, key: bool = False, wait: float = 0,
                 answer: str = "json", file: Any = None, progress: Optional[Progress] = None,
                 retries: Optional[int] = None, deadline: Optional[float] = None) -> Flow[Got]:
        """:meth:`request` as a flow; ``answer`` says how the transport reads a body below 400:
        ``json`` (text), ``npy`` (into an array), ``file`` (into ``file``), ``stream`` (not yet)."""
        hdrs = {"Accept": "application/json"}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        if key:
            hdrs["Idempotency-Key"] = str(uuid.uuid4())
        if content_type:
            hdrs["Content-Type"] = content_type
        hdrs.update(headers or {})
        params = {k: str(v) for k, v in (params or {}).items()}
        resend = method == "GET" or key  # no harm in sending it twice
        retries = self.retries if retries is None else retries
        end = time.monotonic() + self.timeout + wait
        end = end if deadline is None else min(end, deadline)
        what = "%s %s%s" % (method, self.url, path)
        for attempt in range(retries + 1):
            last = attempt == retries
            left = end - time.monotonic()
            if left <= 0:
                raise Timeout("%s: no answer before the deadline (timeout %g s)" % (what, self.timeout))
            got = yield Send(method, self.url + path, params, json, body, hdrs, left, answer, file, progress)
            if isinstance(got, Lost):
                if got.timed_out:
                    raise Timeout("%s: no answer within %.3g s" % (what, left)) from got.cause
                if got.problem is None:
                    raise Error(None, "request failed", "%s: %s" % (what, got.cause)) from got.cause
                pause = _backoff(attempt, None)
                # no service where none has answered this client: a typo or a service down, not a restart
                absent = got.problem in _ABSENT and not self._reached
                if resend and not last and not absent and time.monotonic() + pause < end:
                    yield Sleep(pause)
                    continue
                raise Unavailable(None, "unavailable", "%s: %s" % (what, got.problem)) from got.cause
            self._reached = True
            if got.status < 400:
                return got
            err = _error_of(got)
            again = (got.status in (429, 503) and err.field != "device") or \
                    (got.status == 409 and key and attempt > 0 and err.field == "Idempotency-Key")
            pause = _backoff(attempt, got.headers.get("Retry-After"))
            if last or not again or time.monotonic() + pause >= end:
                raise err
            yield Sleep(pause)
        raise AssertionError("unreachable")

    def _do(self, step: Union[Send, Sleep, Read, Close]) -> Any:
        """One step of a flow, with requests: a sleep, an exchange and what came of it, or a
        streamed answer's next bytes (its read timeout is the exchange's) or its end."""
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        if isinstance(step, Read):
            try:
                return next(step.got.chunks, b"")
            except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as e:
                return Lost(e)
        if isinstance(step, Close):
            step.got.response.close()
            return None
        try:
            resp = self._session().request(step.method, step.url, params=step.params, json=step.json,
                                           data=step.body, headers=step.headers, timeout=step.timeout,
                                           stream=step.answer != "json")
        except requests.Timeout as e:
            return Lost(e, timed_out=True)
        except requests.ConnectionError as e:
            return Lost(e, problem=_connection_problem(str(e)))
        except requests.RequestException as e:
            return Lost(e)
        if self.on_response:
            self.on_response(resp)
        got = Got(resp.status_code, resp.reason or "", resp.headers, response=resp)
        if resp.status_code >= 400 or step.answer == "json":
            got.text = resp.text
        elif step.answer == "stream":  # chunk by chunk; byte by byte when not chunked, not to wait for more
            got.chunks = resp.iter_content(None if getattr(resp.raw, "chunked", False) else 1)
        elif step.answer == "npy":
            with resp:
                try:
                    got.array = _wire.read_npy(resp.raw, int(resp.headers.get("Content-Length") or 0), step.progress)
                except (EOFError, ValueError, OSError, urllib3.exceptions.HTTPError) as e:
                    raise Error(None, "bad answer", "%s %s: not a whole .npy: %s" % (step.method, step.url, e)) from e
        elif step.answer == "file":
            with resp:
                try:
                    _wire.save(resp.iter_content(_wire.CHUNK), step.file, int(resp.headers.get("Content-Length") or 0),
                               step.progress)
                except (requests.RequestException, EOFError) as e:
                    raise Error(None, "bad answer", "%s %s: %s" % (step.method, step.url, e)) from e
        return got

    def _session(self) -> requests.Session:
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = requests.Session()
            with self._lock:
                self._sessions.append(s)
        return s

    def _get(self, path: str, **params: Any) -> Flow[Any]:
        got = yield from self._request("GET", path, params={k: v for k, v in params.items() if v is not None})
        return got.json()

    def _pages(self, pager: "Pager") -> Iterator[dict]:
        while not pager.done:
            yield from pager.take(drive(pager.next(), self._do))

    def _fetch_npy(self, path: str, params: Optional[Mapping[str, Any]] = None,
                   progress: Optional[Progress] = None, deadline: Optional[float] = None) -> Flow[np.ndarray]:
        """GET a .npy answer, read straight into the array it holds."""
        got = yield from self._request("GET", path, params=params, headers={"Accept": "application/x-npy"},
                                       answer="npy", progress=progress, deadline=deadline)
        return got.array

    # ------------------------------------------------------------ reductions and products

    @flow
    def reduce(self, op: str, data: Source, axis: Axis = None, *, keepdims: bool = False, ties: Optional[str] = None,
               ddof: Optional[int] = None, accumulate: Optional[str] = None, device: str = "auto",
               algorithm: str = "auto", dtype: Optional[str] = None, shape: Optional[Sequence[int]] = None,
               timeout: Optional[float] = None, keep: bool = False) -> Reduced:
        """Run a reduction and return its result (see :meth:`Job.result`): a NumPy scalar for
        ``axis`` None, else an array of NumPy's shape (the axes reduced gone, or with ``keepdims``
        kept as 1), in NumPy's dtype (the result's ``"dtype"``: integer sums int64, min and max
        the data's, float32 stays float32, means and spreads of integers float64, any/all bool);
        argmin/argmax give the indices (int64).

        ``data``: an array (1-D to 8-D; lists are taken as numpy.asarray does, cast to
        ``dtype`` when given; bool, 8- and 16-bit integers and float16 are widened to int32 or
        float32, uint32 to int64), a :class:`Dataset` or a dataset id. ``axis``: an axis,
        negative as in NumPy (-1 the last), or a tuple of them (argmin/argmax: one axis).
        ``ties``: ``"first"`` or ``"last"``, which index argmin/argmax give among equal extremes.
        ``ddof``: var and std divide by the count less this. ``accumulate="float64"``: a float32
        sum, product, mean or spread given as float64 (NumPy's ``dtype=np.float64``). ``shape``:
        a view of the values (1 to 8 dimensions).
        ``device``: ``auto``, ``cpu``, ``gpu`` or ``gpu:N``. ``timeout``: seconds for the whole
        call (the client's timeout unless given); past it, :class:`Timeout`. The job, and a
        result the service kept as a dataset, are deleted once the result is downloaded, unless
        ``keep``."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        job = yield from Client.submit.flow(self, op, data, axis=axis, keepdims=keepdims, ties=ties, ddof=ddof,
                                            accumulate=accumulate, device=device, algorithm=algorithm, dtype=dtype, shape=shape,
                                            wait=_wait_within(deadline), deadline=deadline)
        return (yield from job._result_once(keep, deadline))

    @flow
    def sum(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The sum of the values (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "sum", data, axis, **options))

    @flow
    def prod(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The product of the values (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "prod", data, axis, **options))

    @flow
    def min(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The smallest value (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "min", data, axis, **options))

    @flow
    def max(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The largest value (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "max", data, axis, **options))

    @flow
    def mean(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The mean of the values, float64 (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "mean", data, axis, **options))

    @flow
    def argmin(self, data: Source, axis: Axis = None, ties: str = "first", **options: Any) -> Reduced:
        """The index of the smallest value (int64; ties "first" or "last"; options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "argmin", data, axis, ties=ties, **options))

    @flow
    def argmax(self, data: Source, axis: Axis = None, ties: str = "first", **options: Any) -> Reduced:
        """The index of the largest value (int64; ties "first" or "last"; options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "argmax", data, axis, ties=ties, **options))

    @flow
    def nansum(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The sum of the values that are not NaN (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "nansum", data, axis, **options))

    @flow
    def nanmin(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The smallest value that is not NaN; NaN where all are (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "nanmin", data, axis, **options))

    @flow
    def nanmax(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The largest value that is not NaN; NaN where all are (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "nanmax", data, axis, **options))

    @flow
    def count_nonzero(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """How many values are not 0 (a NaN counts), int64 (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "count_nonzero", data, axis, **options))

    @flow
    def var(self, data: Source, axis: Axis = None, ddof: int = 0, **options: Any) -> Reduced:
        """The variance, float64: squared deviations from the mean, summed, over the count less
        ``ddof`` (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "var", data, axis, ddof=ddof, **options))

    @flow
    def std(self, data: Source, axis: Axis = None, ddof: int = 0, **options: Any) -> Reduced:
        """The standard deviation, the square root of :meth:`var` (options: as :meth:`reduce`)."""
        return (yield from Client.reduce.flow(self, "std", data, axis, ddof=ddof, **options))

    @flow
    def nanmean(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The mean of the values that are not NaN; NaN where all are."""
        return (yield from Client.reduce.flow(self, "nanmean", data, axis, **options))

    @flow
    def nanprod(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The product of the values that are not NaN; 1 where all are."""
        return (yield from Client.reduce.flow(self, "nanprod", data, axis, **options))

    @flow
    def nanvar(self, data: Source, axis: Axis = None, ddof: int = 0, **options: Any) -> Reduced:
        """:meth:`var` of the values that are not NaN; NaN where fewer than ``ddof`` + 1 are."""
        return (yield from Client.reduce.flow(self, "nanvar", data, axis, ddof=ddof, **options))

    @flow
    def nanstd(self, data: Source, axis: Axis = None, ddof: int = 0, **options: Any) -> Reduced:
        """:meth:`std` of the values that are not NaN; NaN where fewer than ``ddof`` + 1 are."""
        return (yield from Client.reduce.flow(self, "nanstd", data, axis, ddof=ddof, **options))

    @flow
    def nanargmin(self, data: Source, axis: Axis = None, ties: str = "first", **options: Any) -> Reduced:
        """:meth:`argmin` of the values that are not NaN; a lane of NaNs alone fails the job
        (:class:`JobFailed`, 422), as NumPy raises."""
        return (yield from Client.reduce.flow(self, "nanargmin", data, axis, ties=ties, **options))

    @flow
    def nanargmax(self, data: Source, axis: Axis = None, ties: str = "first", **options: Any) -> Reduced:
        """:meth:`argmax` of the values that are not NaN, as :meth:`nanargmin`."""
        return (yield from Client.reduce.flow(self, "nanargmax", data, axis, ties=ties, **options))

    @flow
    def any(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """Whether a value is not 0 (a NaN is not), as NumPy bools."""
        return (yield from Client.reduce.flow(self, "any", data, axis, **options))

    @flow
    def all(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """Whether every value is not 0 (a NaN is not), as NumPy bools."""
        return (yield from Client.reduce.flow(self, "all", data, axis, **options))

    @flow
    def ptp(self, data: Source, axis: Axis = None, **options: Any) -> Reduced:
        """The range, the largest value less the smallest; NaN with a NaN."""
        return (yield from Client.reduce.flow(self, "ptp", data, axis, **options))

    @flow
    def matmul(self, a: Source, b: Source, c: Optional[Source] = None, alpha: float = 1.0, beta: float = 0.0, *,
               device: str = "auto", algorithm: str = "auto", dtype: Optional[str] = None,
               timeout: Optional[float] = None, keep: bool = False) -> np.ndarray:
        """``alpha * a @ b + beta * c`` as an array (float32 or float64, the operands' dtype
        unless ``dtype`` is given). Operands are arrays, Datasets or dataset ids; arrays of more
        than JSON_MAX_ELEMENTS values are uploaded as datasets for the job and deleted after it.
        The service keeps the product as a dataset (the job's ``result.dataset``); it goes with
        the job once downloaded, unless ``keep``. ``timeout``: as for :meth:`reduce`."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        job = yield from Client.submit.flow(self, "matmul", a=a, b=b, c=c, alpha=alpha, beta=beta, device=device,
                                            algorithm=algorithm, dtype=dtype, wait=_wait_within(deadline),
                                            deadline=deadline)
        return (yield from job._result_once(keep, deadline))

    # ------------------------------------------------------------ jobs

    @flow
    def submit(self, op: str, data: Optional[Source] = None, *, axis: Axis = None, keepdims: bool = False,
               ties: Optional[str] = None, ddof: Optional[int] = None, accumulate: Optional[str] = None,
               device: str = "auto", algorithm: str = "auto", dtype: Optional[str] = None,
               shape: Optional[Sequence[int]] = None, a: Optional[Source] = None, b: Optional[Source] = None,
               c: Optional[Source] = None, alpha: Optional[float] = None, beta: Optional[float] = None,
               wait: float = 0, deadline: Optional[float] = None) -> "Job":
        """Submit a job and return it (:class:`Job`) without waiting for it, unless ``wait``
        (seconds, at most 60: ``Prefer: wait``) asks the service to answer once it has ended.

        A reduction's ``data`` (see :meth:`reduce`) goes inline as JSON when it has at most
        JSON_MAX_ELEMENTS finite values, else as a one-shot binary body, else (over
        ``max_body_bytes``) as a dataset uploaded for the job. A matmul takes ``a``, ``b``,
        optional ``c``, ``alpha``, ``beta`` instead (see :meth:`matmul`). Datasets uploaded for a
        job are deleted once :meth:`Job.wait` (or ``result``) sees it end. ``deadline``: a
        ``time.monotonic()`` the requests must end by (see :meth:`request`)."""
        options = dict(axis=axis, keepdims=keepdims or None, ties=ties, ddof=ddof, accumulate=accumulate,
                       device=device, algorithm=algorithm, dtype=dtype, shape=shape, a=a, b=b, c=c, alpha=alpha, beta=beta)
        temps: list[Dataset] = []
        try:
            members, arr = yield from self._prepare(op, data, options, temps, batch=False)
            if arr is None:
                got = yield from self._request("POST", "/v1/jobs", json=members, headers=_prefer(wait), key=True,
                                               wait=wait, deadline=deadline)
            else:
                query = {k: ",".join(map(str, v)) if isinstance(v, list) else str(v).lower() if isinstance(v, bool)
                         else str(v) for k, v in members.items()}
                got = yield from self._request("POST", "/v1/jobs", params=query, body=Body.of_array(arr, npy=False),
                                               content_type="application/octet-stream", headers=_prefer(wait),
                                               key=True, wait=wait, deadline=deadline)
        except BaseException:
            yield from _delete_all(temps)
            raise
        job = Job(self, got.json(), temps)
        yield from job._ended()
        return job

    @flow
    def submit_many(self, items: Iterable[Mapping[str, Any]], wait: float = 0) -> list["Job"]:
        """Submit jobs as one batch (all are accepted or none) and return them in order.

        Each item holds :meth:`submit`'s arguments by name: ``{"op": "sum", "data": a, "axis":
        1}``. Values go inline as JSON, or as datasets uploaded for the job when larger than
        JSON_MAX_ELEMENTS (or not finite). ``wait``: as for :meth:`submit`, for every job."""
        temps: list[list[Dataset]] = []
        try:
            members = []
            for item in items:
                options = dict(item)
                temps.append([])
                op, data = options.pop("op"), options.pop("data", None)
                members.append((yield from self._prepare(op, data, options, temps[-1], batch=True))[0])
            got = yield from self._request("POST", "/v1/jobs", json=members, headers=_prefer(wait), wait=wait)
        except BaseException:
            yield from _delete_all([d for t in temps for d in t])
            raise
        jobs = [Job(self, doc, t) for doc, t in zip(got.json(), temps)]
        for job in jobs:
            yield from job._ended()
        return jobs

    def _prepare(self, op: str, data: Optional[Source], options: Mapping[str, Any], temps: list["Dataset"],
                 batch: bool) -> Flow[tuple[dict, Optional[np.ndarray]]]:
        """A job's JSON members, or (for a one-shot binary body) its query members and the array."""
        members = {"op": op, **{k: v for k, v in options.items() if v is not None}}
        if op == "matmul":
            for k in ("a", "b", "c"):  # each {"data": rows} or {"dataset": id}; dtype: the first array's
                if k in members:
                    ref, _ = yield from self._values(members[k], members.get("dtype"), temps)
                    dtype = ref.pop("dtype", None)
                    if dtype and "dtype" not in members:
                        members["dtype"] = dtype
                    members[k] = ref
            return members, None
        if data is None:
            return members, None  # the service says what is missing
        ref, arr = yield from self._values(data, members.get("dtype"), temps, binary=not batch)
        members.update(ref)
        if arr is not None:
            members.setdefault("shape", list(arr.shape) or [1])
        if isinstance(members.get("axis"), tuple):  # the service takes axes as NumPy does, in a list
            members["axis"] = list(members["axis"])
        return members, arr

    def _values(self, data: Source, dtype: Optional[str], temps: list["Dataset"],
                binary: bool = False) -> Flow[tuple[dict, Optional[np.ndarray]]]:
        """How a job names values: a dataset's id; for an array, its dtype and its values inline
        (at most JSON_MAX_ELEMENTS, all finite), or the array itself for a one-shot body (when
        ``binary`` and within max_body_bytes), or else a dataset uploaded for the job (in temps)."""
        ds = _dataset_id(data)
        if ds is not None:
            return {"dataset": ds}, None
        yield from ()  # a flow, though only an upload talks to the service
        arr = _wire.as_array(data, dtype)
        ref: dict = {"dtype": arr.dtype.name}
        if arr.size <= JSON_MAX_ELEMENTS and (arr.dtype.kind != "f" or bool(np.isfinite(arr).all())):
            ref["data"] = arr.reshape(-1).tolist() if arr.ndim == 0 else arr.tolist()
            return ref, None
        if binary and arr.nbytes <= self.max_body_bytes:
            return ref, arr
        temps.append((yield from Client.upload.flow(self, arr)))
        ref["dataset"] = temps[-1].id
        return ref, None

    @flow
    def job(self, job_id: str) -> "Job":
        """The job with this id (``Error`` 404 if there is none, or it is another tenant's)."""
        return Job(self, (yield from self._get("/v1/jobs/" + job_id)))

    def jobs(self, status: Optional[str] = None, op: Optional[str] = None, limit: Optional[int] = None,
             tenant: Optional[str] = None, page: Optional[int] = None) -> Iterator["Job"]:
        """The jobs (of this status / op; an admin token: of this tenant), newest first, at most
        ``limit`` of them (None: every one), fetched a page (``page`` jobs, 1 to 1000) at a time
        as the iteration goes."""
        for doc in self._pages(self.jobs_pager(status, op, limit, tenant, page)):
            yield Job(self, doc)

    def jobs_pager(self, status: Optional[str] = None, op: Optional[str] = None, limit: Optional[int] = None,
                   tenant: Optional[str] = None, page: Optional[int] = None) -> "Pager":
        """Where :meth:`jobs` starts (AsyncClient pages through it too)."""
        return Pager(self, "/v1/jobs", "jobs", limit, page, status=status, op=op, tenant=tenant)

    @flow
    def cleanup(self, older_than: Optional[float] = None, kept: bool = False, tenant: Optional[str] = None) -> dict:
        """Delete finished jobs in bulk (``DELETE /v1/jobs``), each with the datasets its result
        was kept in: those submitted more than ``older_than`` seconds ago, and/or (``kept``) those
        whose result the service kept as datasets. Returns ``{"deleted": n, "in_use": m}``: m jobs
        stay because other jobs read their kept result now. An admin token may name a tenant."""
        params = {"older_than": None if older_than is None else int(older_than), "kept": "true" if kept else None,
                  "tenant": tenant}
        got = yield from self._request("DELETE", "/v1/jobs", params={k: v for k, v in params.items() if v is not None})
        return got.json()

    @flow
    def benchmark(self, op: str, dtype: str, n: int, *, algorithms: Optional[Sequence[str]] = None,
                  repeats: Optional[int] = None, device: str = "auto", wait: bool = True) -> "Job":
        """Run a device's variants side by side on ``n`` generated values (matmul: n x n
        operands) and return the job, ended unless ``wait`` is False; ``job.result()`` is the
        table (``{"rows": [...], "reference": ..., ...}``, API.md "Benchmarks")."""
        body = {k: v for k, v in dict(op=op, dtype=dtype, n=n, algorithms=algorithms, repeats=repeats,
                                      device=device).items() if v is not None}
        w = MAX_WAIT if wait else 0
        got = yield from self._request("POST", "/v1/benchmarks", json=body, headers=_prefer(w), key=True, wait=w)
        job = Job(self, got.json())
        return (yield from Job.wait.flow(job)) if wait else job

    # ------------------------------------------------------------ datasets

    @flow
    def upload(self, data: Union[Any, str, "os.PathLike[str]"], *, dtype: Optional[str] = None,
               progress: Optional[Progress] = None) -> "Dataset":
        """Store values as a dataset and return it. ``data``: an array (anything numpy.asarray
        takes, cast to ``dtype`` when given; 0-D to 8-D), streamed as a .npy from its own memory,
        or the path of a .npy file, streamed as it is. ``progress(sent, total)`` is called as
        the bytes go (total: the body's bytes, .npy header included)."""
        if isinstance(data, (str, os.PathLike)):
            body = Body.of_file(data, progress)
        else:
            body = Body.of_array(_wire.as_array(data, dtype), npy=True, progress=progress)
        got = yield from self._request("POST", "/v1/datasets", body=body, content_type="application/x-npy", key=True)
        return Dataset(self, got.json())

    @flow
    def dataset(self, dataset_id: str) -> "Dataset":
        """The dataset with this id (``Error`` 404 if there is none, or it is another tenant's)."""
        return Dataset(self, (yield from self._get("/v1/datasets/" + dataset_id)))

    def datasets(self, limit: Optional[int] = None, tenant: Optional[str] = None,
                 page: Optional[int] = None) -> Iterator["Dataset"]:
        """The datasets, newest first, at most ``limit`` of them (None: every one), fetched a page
        (``page`` datasets) at a time as the iteration goes."""
        for doc in self._pages(self.datasets_pager(limit, tenant, page)):
            yield Dataset(self, doc)

    def datasets_pager(self, limit: Optional[int] = None, tenant: Optional[str] = None,
                       page: Optional[int] = None) -> "Pager":
        """Where :meth:`datasets` starts (AsyncClient pages through it too)."""
        return Pager(self, "/v1/datasets", "datasets", limit, page, tenant=tenant)

    # ------------------------------------------------------------ events

    def events(self, job: Optional[str] = None, kind: Optional[str] = None,
               status: Union[str, Sequence[str], None] = None, after: Optional[int] = None,
               heartbeat: Optional[int] = None, timeout: Optional[float] = None) -> "EventStream":
        """``GET /v1/events``: job and dataset changes as they happen, an iterator of
        :class:`gpured.Event` that reconnects and resumes by itself (see :class:`EventStream`).
        It subscribes before returning (``Error`` 400 for a bad filter), and iterates until
        ``timeout`` seconds pass or it is closed: use it in a ``with`` block, or ``close()`` it
        (from any thread). ``job``: one job's (``j_...``); ``kind``: ``"job"`` or
        ``"dataset"``; ``status``: any of these; ``after``: replay the events after this id."""
        from .events import EventStream
        return EventStream(self, job=job, kind=kind, status=status, after=after, heartbeat=heartbeat,
                           timeout=timeout)

    # ------------------------------------------------------------ the service

    @flow
    def devices(self) -> dict:
        """``GET /v1/devices``: the GPUs (with their caches) and the CPU backend."""
        return (yield from self._get("/v1/devices"))

    @flow
    def algorithms(self) -> list:
        """``GET /v1/algorithms``: every variant, with the ops, dtypes and axes it covers."""
        return (yield from self._get("/v1/algorithms"))["algorithms"]


class Pager:
    """Where a paged list stands: the flow of its next page (``next``), and what of a page is
    wanted (``take``), at most ``most`` items (None: all), following next_cursor, ``size`` per
    page (None: up to 1000 where most is given, else the service's default)."""

    def __init__(self, client: Client, path: str, member: str, most: Optional[int], size: Optional[int],
                 **params: Any) -> None:
        self.client, self.path, self.member, self.size = client, path, member, size
        self.most = most
        self.left = math.inf if most is None else most
        self.params = {k: v for k, v in params.items() if v is not None}
        self.done = self.left <= 0

    def next(self) -> Flow[Any]:
        want = self.size if self.size is not None else min(self.left, 1000) if self.most is not None else None
        return self.client._get(self.path, limit=want, **self.params)

    def take(self, page: dict) -> list:
        items = page[self.member][:self.left] if self.most is not None else page[self.member]
        self.left -= len(items)
        self.done = self.left <= 0 or not page.get("next_cursor")
        self.params["cursor"] = page.get("next_cursor")
        return items


def _legacy(op: str, dtype: str) -> str:
    """A result's dtype where a service too old to name it gave int64 or float64 alone."""
    if op == "matmul":
        return dtype
    return "bool" if op in ("any", "all") else "int64" if op == "count_nonzero" or \
        (dtype.startswith("int") and op not in REAL_OPS) else "float64"


class Job:
    """A job of the service. ``doc`` is its resource (API.md "Job resource") as last fetched;
    ``status`` and ``timings`` fetch it again while the job has not ended."""

    def __init__(self, client: Client, doc: dict, temporary: Sequence["Dataset"] = ()) -> None:
        self.client = client
        self.doc = doc
        self._temporary = list(temporary)  # datasets uploaded for this job, deleted once it ends
        self.deleted = False  # a DELETE of it answered 204: the job is gone from the service

    def __repr__(self) -> str:
        return "<gpured.Job %s %s %s>" % (self.id, self.doc.get("op"), self.doc.get("status"))

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def status(self) -> str:
        """queued, running, succeeded, failed or canceled."""
        return self._current()["status"]

    @property
    def timings(self) -> Optional[dict]:
        """Milliseconds per stage (queue, h2d, kernel, d2h, total), once the job has ended."""
        return self._current().get("timings_ms")

    @property
    def done(self) -> bool:
        """Whether the job had ended when last fetched."""
        return self.doc["status"] in TERMINAL

    def _current(self) -> dict:
        return self.doc if self.done else self.refresh().doc

    @flow
    def refresh(self) -> "Job":
        """Fetch the job's resource again."""
        self.doc = yield from self.client._get("/v1/jobs/" + self.id)
        yield from self._ended()
        return self

    @flow
    def wait(self, timeout: Optional[float] = None, *, deadline: Optional[float] = None) -> "Job":
        """Wait until the job ends, or ``timeout`` seconds pass (None: until it ends), and return
        it; ``done`` tells which. ``deadline``: a ``time.monotonic()`` to stop at instead."""
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        while not self.done:
            left = MAX_WAIT if deadline is None else deadline - time.monotonic()
            if left <= 0:
                break
            n = min(MAX_WAIT, int(left))  # whole seconds: the service's ?wait= long poll
            params = {"wait": n} if n else None
            got = yield from self.client._request("GET", "/v1/jobs/" + self.id, params=params, wait=n,
                                                  deadline=deadline)
            self.doc = got.json()
            if not n and not self.done:
                yield Sleep(min(0.05, max(0.0, deadline - time.monotonic())))  # under a second left: polls
        yield from self._ended()
        return self

    @flow
    def result(self, part: Optional[str] = None, timeout: Optional[float] = None, *,
               deadline: Optional[float] = None) -> Result:
        """The job's result, once it has ended (waiting up to ``timeout`` seconds).

        A reduction gives a NumPy scalar (whole array) or an array of the result's shape (the
        job's ``result["shape"]``), in the result's dtype (``result["dtype"]``, NumPy's); ``part``
        "values" (the default) or
        "indices" (int64, the default for argmin/argmax). Results the service keeps as datasets
        (more than 4096 outputs) are downloaded. A matmul gives the product (its dtype), a
        benchmark its table (a dict). Raises :class:`JobFailed` with the job's problem if it
        failed or was canceled, :class:`Timeout` if it has not ended in time."""
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        yield from Job.wait.flow(self, deadline=deadline)
        status = self.doc["status"]
        if not self.done:
            raise Timeout("job %s is %s at the deadline" % (self.id, status))
        if status == "failed":
            raise JobFailed(self.id, status, self.doc.get("error") or {"status": 500, "title": "job failed"})
        if status == "canceled":
            raise JobFailed(self.id, status, {"status": 409, "title": "no result", "detail": "it was canceled"})
        res, op, dtype = self.doc["result"], self.doc["op"], self.doc["dtype"]
        if self.doc.get("kind") == "benchmark":
            return res
        part = part or ("indices" if "arg" in op else "values")
        for k in (("index", "indices") if part == "indices" else ("value", "values")):
            if k in res:
                return np.asarray(res[k], dtype="int64" if part == "indices" else res.get("dtype", _legacy(op, dtype)))[()]
        return (yield from self.client._fetch_npy("/v1/jobs/%s/result" % self.id, {"part": part}, deadline=deadline))

    @flow
    def save(self, path: Union[str, "os.PathLike[str]"], part: Optional[str] = None,
             progress: Optional[Progress] = None) -> None:
        """Write the ended job's result to a .npy file as it arrives: ``part`` as for
        :meth:`result` (an argmin/argmax's indices by default, else the values)."""
        part = part or ("indices" if "arg" in (self.doc.get("op") or "") else "values")
        yield from self.client._request("GET", "/v1/jobs/%s/result" % self.id, params={"part": part},
                                        headers={"Accept": "application/x-npy"}, answer="file", file=path,
                                        progress=progress)

    def _result_once(self, keep: bool, deadline: float) -> Flow[Any]:  # Reduced, or a product's array
        """The result, then (unless keep) the job deleted with its kept result: a one-call
        reduction or product leaves nothing behind. One that cannot go yet (another job reads
        its result) is left with a warning."""
        value = yield from Job.result.flow(self, deadline=deadline)
        if not keep and self.doc.get("result", {}).get("dataset"):
            try:
                yield from Job.cancel.flow(self)
            except Error as e:
                warnings.warn("gpured: job %s and its kept result are left: %s" % (self.id, e), stacklevel=3)
        return value

    def watch(self, timeout: Optional[float] = None) -> "JobWatch":
        """The job's statuses as they change: its current one, then each new one, ending after
        the final one (``succeeded``, ``failed``, ``canceled``) or once ``timeout`` seconds pass
        (``done`` then tells which). Subscribes to the job's events before reading it, so no
        change is missed; ``running`` comes with its live event (or the read), unless the job ended
        first; a job that had ended already gives its final status only.
        A :class:`JobWatch`: ``with job.watch() as statuses: ...``, or ``close()`` it."""
        from .events import JobWatch
        return JobWatch(self, timeout)

    @flow
    def cancel(self) -> "Job":
        """Cancel the job while it is queued (``Error`` 409 while it runs). The same request
        deletes a job that has ended, with the datasets its result was kept in: then
        :attr:`deleted` is True and ``doc`` stays the last state seen."""
        got = yield from self.client._request("DELETE", "/v1/jobs/" + self.id)
        if got.status == 204:
            self.deleted = True
            return self
        self.doc = got.json()
        yield from self._ended()
        return self

    @flow
    def delete(self) -> None:
        """Delete the job once it has ended, with the datasets its result was kept in (``Error``
        409 while it runs, or while other jobs read its kept result). A queued job is canceled,
        and stays listed as ``canceled`` until it is deleted too."""
        yield from Job.cancel.flow(self)

    def _ended(self) -> Flow[None]:
        """Once the job has ended, delete the datasets uploaded for it."""
        if self.done and self._temporary:
            temps, self._temporary = self._temporary, []
            yield from _delete_all(temps)


class Dataset:
    """A stored dataset. ``doc`` is its record as read: id, tenant, dtype, shape, bytes, sha256,
    created_at, last_used_at (when a job that read it last ended; None until one has)."""

    def __init__(self, client: Client, doc: dict) -> None:
        self.client = client
        self.doc = doc

    def __repr__(self) -> str:
        return "<gpured.Dataset %s %s %s>" % (self.id, self.dtype, list(self.shape))

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def dtype(self) -> str:
        return self.doc["dtype"]

    @property
    def shape(self) -> tuple:
        return tuple(self.doc["shape"])

    @property
    def nbytes(self) -> int:
        return self.doc["bytes"]

    @property
    def sha256(self) -> Optional[str]:
        """None for a moment after a large upload (API.md): ``client.dataset(id)`` reads it again."""
        return self.doc["sha256"]

    @flow
    def download(self, progress: Optional[Progress] = None) -> np.ndarray:
        """The values, as an array of the dataset's dtype and shape (read straight into it)."""
        return (yield from self.client._fetch_npy("/v1/datasets/%s/data" % self.id, progress=progress))

    @flow
    def save(self, path: Union[str, "os.PathLike[str]"], progress: Optional[Progress] = None) -> None:
        """Write the values to a .npy file as they arrive."""
        yield from self.client._request("GET", "/v1/datasets/%s/data" % self.id, headers={"Accept": "application/x-npy"},
                                        answer="file", file=path, progress=progress)

    @flow
    def delete(self) -> None:
        """Delete the dataset (``Error`` 409 while a queued or running job uses it)."""
        yield from self.client._request("DELETE", "/v1/datasets/" + self.id)


def _dataset_id(data: Any) -> Optional[str]:
    if isinstance(data, Dataset):
        return data.id
    return data if isinstance(data, str) else None


def _delete_all(datasets: Sequence[Dataset]) -> Flow[None]:
    """Delete datasets the client uploaded for a job. One already gone is fine. A 409 (the job's
    hold on it not yet let go: seen on a PostgreSQL store just after the job's end was readable)
    is tried again for a few seconds; a dataset that still cannot go is left with a warning, so
    that a job's result is never lost to its clean-up."""
    for ds in datasets:
        for attempt in range(8):
            try:
                yield from Dataset.delete.flow(ds)
                break
            except Error as e:
                if e.status == 404:
                    break
                if e.status != 409 or attempt == 7:
                    warnings.warn("gpured: the dataset %s uploaded for a job is left: %s" % (ds.id, e), stacklevel=3)
                    break
                yield Sleep(0.05 * 2 ** attempt)


def _wait_within(deadline: float) -> int:
    """The Prefer: wait=N (whole seconds, at most MAX_WAIT) that ends before deadline."""
    return max(0, min(MAX_WAIT, int(deadline - time.monotonic())))


def _prefer(wait: float) -> Optional[dict]:
    return {"Prefer": "wait=%d" % math.ceil(wait)} if wait else None


def _error_of(got: Got) -> Error:
    try:
        doc = got.json()
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "title" in doc:
        if got.status == 401:  # the service's detail tells a curl user which header to send
            doc = dict(doc, detail="the service needs a token: gpured.Client(token=...), or gpured-cli --token "
                                   "(or GPURED_TOKEN); the service said: %s" % doc.get("detail", ""))
        return Error.from_problem(doc, got.status)
    return Error.of(got.status, got.reason or "error", got.text[:500])


_ABSENT = ("connection refused", "name or service not known", "no route to host")
"""Connection failures that mean no service is there (as against one that dropped a request)."""


def _connection_problem(text: str) -> str:
    """A connection failure in a few words, from the transport's text of it (requests nests
    urllib3's retries and reasons)."""
    for short in _ABSENT + ("connection reset", "remote end closed connection"):
        if short in text.lower():
            return short
    return text[:300]


def _backoff(attempt: int, retry_after: Optional[str]) -> float:
    """Seconds before retry number attempt+1: doubling from BACKOFF_FIRST (with jitter), and at
    least what Retry-After asks (seconds or an HTTP date)."""
    delay = min(BACKOFF_FIRST * 2 ** attempt, BACKOFF_MAX) * random.uniform(0.5, 1.0)
    if retry_after:
        try:
            floor = float(retry_after)
        except ValueError:
            when = email.utils.parsedate_to_datetime(retry_after)
            floor = when.timestamp() - time.time() if when else 0.0
        delay = max(delay, min(floor, BACKOFF_MAX * 4))
    return delay
