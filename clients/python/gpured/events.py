# events.py: GET /v1/events (Server-Sent Events) as Python iterators: Client.events and Job.watch.
from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional, Sequence, Union

import requests
import urllib3

from .client import TERMINAL, _backoff
from .errors import Error

if TYPE_CHECKING:
    from .client import Client, Job

HEARTBEAT = 15
"""Seconds of quiet after which the service sends a keep-alive (its default for ?heartbeat=)."""

_EOL = re.compile(rb"\r\n|\r|\n")
_DROPPED = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)  # a stream cut short
_RANK = {"queued": 0, "running": 1, "succeeded": 2, "failed": 2, "canceled": 2}


@dataclass(frozen=True)
class Event:
    """One event of ``GET /v1/events`` (API.md "Events"; the ``Event`` schema of the OpenAPI).

    ``seq``: its id, rising with every event (not dense; with tokens, a tenant's stream counts that
    tenant's events alone, an admin's counts all). A ``running`` event is told live and never
    stored, so it has no id of its own: its ``seq`` is the stream's position when it came.
    ``kind``: ``"job"`` or ``"dataset"``, or ``"gap"`` when a resume asked for events older than
    the service keeps. ``id``: the job's (``j_...``) or dataset's (``d_...``) id. ``status``:
    ``queued``, ``running``, ``succeeded``, ``failed``, ``canceled`` (jobs), ``created`` or
    ``deleted`` (datasets). ``tenant``: whose it is. ``at``: when the store kept it (RFC 3339
    text). A job's event has its ``op`` and ``device``, and a ``failed`` one its problem as
    ``error`` (unless the job was deleted before the event was read). ``data``: the event's JSON
    as sent.

    A gap has ``after`` (the id the stream resumed after) and ``oldest`` (the oldest id still
    kept), empty ``id``/``status``/``tenant``/``at``, and ``seq`` = ``oldest - 1``: the position
    the stream goes on from, so ``after=event.seq`` resumes from any event, a gap included.
    The events in between are lost: list the jobs to catch up.
    """

    seq: int
    kind: str
    id: str = ""
    status: str = ""
    tenant: str = ""
    at: str = ""
    op: str = ""
    device: str = ""
    error: Optional[dict] = None
    after: Optional[int] = None
    oldest: Optional[int] = None
    data: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, name: str, text: str, position: Optional[int] = None) -> "Event":
        """The event of an SSE ``event:`` name and ``data:`` text; ``position``: the stream's
        (the last id it had) for an event with no seq of its own."""
        try:
            doc = json.loads(text)
            if name == "gap":
                return cls(int(doc["oldest"]) - 1, "gap", after=int(doc["after"]), oldest=int(doc["oldest"]), data=doc)
            seq = doc["seq"] if "seq" in doc or position is None else position
            return cls(int(seq), str(doc.get("kind", name)), str(doc.get("id", "")), str(doc.get("status", "")),
                       str(doc.get("tenant", "")), str(doc.get("at", "")), str(doc.get("op", "")),
                       str(doc.get("device", "")), doc.get("error"), data=doc)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise Error(None, "bad answer", "GET /v1/events: event %r with data %r: %s" % (name, text[:200], e)) from e


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of an event stream as they arrive (ended by CRLF, LF or CR), as text. A line
    not yet ended when the stream stops is dropped, as the SSE standard says."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        start = 0
        for m in _EOL.finditer(buf):
            if m.group() == b"\r" and m.end() == len(buf):
                break  # perhaps the first half of a CRLF
            yield buf[start:m.start()].decode("utf-8", "replace")
            start = m.end()
        buf = buf[start:]


class EventStream:
    """The service's events as they happen: an iterator of :class:`Event` (``Client.events``).

    It subscribes when made (a refused subscription, such as a bad filter, raises
    :class:`Error` then), and from then on reconnects by itself whenever the stream ends or
    the connection drops (gpured stopped or restarted, the network cut it, no byte for the
    client's timeout plus the heartbeat): it waits the ``retry:`` the service asked for (2 s),
    longer once tries keep failing (the client's backoff, doubling up to 30 s), and resumes
    with ``Last-Event-ID``, so no event is lost or seen twice. Connection failures, ``429`` and
    ``5xx`` are tried again until the stream is closed; any other refusal (``401``: a revoked
    token) raises from the iteration. ``connects`` counts the subscriptions made, ``last_id``
    is the id of the last event seen (None before the first), ``retry`` the reconnection delay
    in seconds.

    ``job``, ``kind``, ``status`` (one or several, a list or comma-separated): the service's
    filters. ``after``: start after this event id (``Event.seq``), replaying the kept events
    after it; else with the next event. ``heartbeat``: seconds of quiet after which the service
    sends a keep-alive (1 to 300; default 15, or 1 with a timeout). ``timeout``: stop iterating
    after this many seconds (kept to within a heartbeat).

    A stream that has seen no event has no id to resume from: a reconnection then starts with
    the service's next event, and those made while it was away are missed (the service sends
    no position before the first event; :meth:`Job.watch` reads the job again after each
    reconnection for this reason). Give ``after`` to start from a known id.

    Iteration ends only when ``timeout`` passes or the stream is closed. Close it with
    :meth:`close` or a ``with`` block. ``close()`` may be called from another thread while one
    is blocked in the iteration: it shuts the connection's socket down, and the iteration ends
    at once (were that socket not reachable through requests/urllib3, it would end with the
    next keep-alive, at most ``heartbeat`` seconds later). One thread at a time may iterate.
    """

    def __init__(self, client: "Client", *, job: Optional[str] = None, kind: Optional[str] = None,
                 status: Union[str, Sequence[str], None] = None, after: Optional[int] = None,
                 heartbeat: Optional[int] = None, timeout: Optional[float] = None) -> None:
        if heartbeat is None:  # with a timeout, a keep-alive each quiet second wakes the iteration to look
            heartbeat = HEARTBEAT if timeout is None else 1
        if status is not None and not isinstance(status, str):
            status = ",".join(status)
        self.client = client
        self.params = {k: v for k, v in dict(job=job, kind=kind, status=status, heartbeat=heartbeat).items()
                       if v is not None}
        self.heartbeat = heartbeat
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.last_id: Optional[int] = after
        self.retry = 2.0
        self.connects = 0
        self._closed = threading.Event()
        self._busy = False  # a thread is in __next__
        self._resp: Optional[requests.Response] = self._open(first=True)
        self._items = self._read()

    def __repr__(self) -> str:
        return "<gpured.EventStream %s after %s>" % (self.params, self.last_id)

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        while True:
            ev = self._poll()
            if ev is not None:
                return ev

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """End the stream (from any thread): the iteration stops, the connection is closed."""
        self._closed.set()
        resp = self._resp
        if resp is None:
            return
        sock = getattr(getattr(resp.raw, "_connection", None), "sock", None)  # urllib3's, while it streams
        if isinstance(sock, socket.socket):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it; close() would not
            except OSError:
                pass
        if not self._busy:  # else the iterating thread closes it as it stops
            resp.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _poll(self) -> Optional[Event]:
        """The next event, or None after a keep-alive or a (re)subscription: a chance to look
        at the clock. Raises StopIteration once closed or past the timeout."""
        if self._closed.is_set() or self._left() == 0:
            self.close()
            raise StopIteration
        self._busy = True
        try:
            return next(self._items)
        finally:
            self._busy = False

    def _left(self) -> Optional[float]:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def _open(self, first: bool = False) -> requests.Response:
        """Subscribe: the client's request (auth, errors, on_response), streaming; the first
        with the client's retries, a reconnection with none (the caller's loop waits)."""
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        resp = self.client.request("GET", "/v1/events", params=self.params, headers=headers, stream=True,
                                   wait=self.heartbeat, retries=None if first else 0)
        self.connects += 1
        return resp

    def _read(self) -> Iterator[Optional[Event]]:
        """Events (None for keep-alives and new subscriptions) across reconnections."""
        failures = 0
        while True:
            resp = self._resp
            if resp is not None:
                yield None  # subscribed (again)
                try:
                    yield from self._parse(resp)
                except _DROPPED:
                    pass  # cut short: resumed below
                except Exception:
                    if not self._closed.is_set():  # else an error of the connection closed under it
                        raise
                finally:
                    resp.close()
                    self._resp = None
                delay = self.retry
            left = self._left()
            if self._closed.wait(delay if left is None else min(delay, left)) or self._left() == 0:
                return
            try:
                self._resp, failures = self._open(), 0
            except Error as e:
                if e.status is not None and e.status != 429 and e.status < 500:
                    raise
                failures += 1  # no answer, or one to try again: the retry, doubling from 4 tries on
                delay = max(self.retry, _backoff(failures - 1, None))

    def _parse(self, resp: requests.Response) -> Iterator[Optional[Event]]:
        """The events of one connection, parsed as the SSE standard says (multi-line data,
        comments, id, retry; fields it does not know ignored), None for each comment."""
        name, data, last = "", [], self.last_id
        chunked = getattr(resp.raw, "chunked", False)  # else: byte by byte, not to wait for a whole block
        for line in _lines(resp.iter_content(None if chunked else 1)):
            if not line:  # the end of an event
                if data:
                    ev = Event.of(name or "message", "\n".join(data), last)
                    if ev.kind == "gap":
                        last = ev.seq
                    self.last_id = last
                    yield ev
                name, data = "", []
                continue
            if line.startswith(":"):
                yield None
                continue
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "data":
                data.append(value)
            elif key == "event":
                name = value
            elif key == "id" and value.isascii() and value.isdigit():
                last = int(value)  # the stream's position once this event is whole
            elif key == "retry" and value.isascii() and value.isdigit():
                self.retry = int(value) / 1000


class JobWatch:
    """A job's statuses as they change (``Job.watch``): an iterator of status strings.

    It subscribes to the job's events first, then reads the job, so that no change between
    the two is lost: the first status is the job's current one (``queued``, ``running`` or a
    final one), then each later one the events bring, the last
    being the final status (``succeeded``, ``failed``, ``canceled``); a status is never given
    twice. After a reconnection the job is read again (events while away are not replayed to
    a stream that had seen none). An older gpured could open a stream after an end's event while
    a read still showed the job running (a gpured now opens it once reads show every change
    before its start), so the job is also read again at each keep-alive (each second with a ``timeout``, else within ``HEARTBEAT``) and
    its final status given if it has ended. ``job.doc`` is fetched again at the end, so
    ``job.result()`` needs no further wait. Ends early, with ``job.done`` False, once ``timeout`` seconds pass
    (within a second); closable from another thread, as :class:`EventStream`."""

    def __init__(self, job: "Job", timeout: Optional[float] = None) -> None:
        self.job = job
        self.stream = EventStream(job.client, job=job.id, kind="job", timeout=timeout)
        self._statuses = self._follow()

    def __repr__(self) -> str:
        return "<gpured.JobWatch %s>" % self.job.id

    def __iter__(self) -> "JobWatch":
        return self

    def __next__(self) -> str:
        return next(self._statuses)

    def __enter__(self) -> "JobWatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop watching (from any thread), as :meth:`EventStream.close`."""
        self.stream.close()

    def _follow(self) -> Iterator[str]:
        job, stream = self.job, self.stream
        rank, seen = -1, 0
        try:
            while True:
                if stream.connects != seen:  # subscribed (again): where the job is now
                    seen = stream.connects
                    status = job.refresh().doc["status"]
                    if _RANK.get(status, 1) > rank:
                        rank = _RANK.get(status, 1)
                        yield status
                    if job.done:
                        return
                try:
                    ev = stream._poll()
                except StopIteration:
                    return
                if ev is None:  # quiet: has the job ended unseen? (the class's docstring says how)
                    if job.refresh().done:
                        yield job.doc["status"]
                        return
                    continue
                if ev.id != job.id or _RANK.get(ev.status, 1) <= rank:
                    continue  # a status already given (changed before the read)
                rank = _RANK.get(ev.status, 1)
                if ev.status in TERMINAL:
                    job.refresh()  # the final resource: result, timings
                yield ev.status
                if ev.status in TERMINAL:
                    return
        finally:
            stream.close()
