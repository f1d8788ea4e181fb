# events.py: GET /v1/events (Server-Sent Events) as Python iterators: Client.events and Job.watch.
from __future__ import annotations

import collections
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from ._flows import Close, Flow, Got, Lost, Read, Sleep, drive
from .client import TERMINAL, _backoff
from .errors import Error

if TYPE_CHECKING:
    from .client import Client, Job

HEARTBEAT = 15
"""Seconds of quiet after which the service sends a keep-alive (its default for ?heartbeat=)."""

_EOL = re.compile(rb"\r\n|\r|\n")
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


class _End(Exception):
    """A stream closed, or past its timeout: its iteration ends."""


class _Lines:
    """The lines of an event stream as they arrive (ended by CRLF, LF or CR), as text. A line
    not yet ended when the stream stops is dropped, as the SSE standard says."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, chunk: bytes) -> list[str]:
        self.buf += chunk
        lines, start = [], 0
        for m in _EOL.finditer(self.buf):
            if m.group() == b"\r" and m.end() == len(self.buf):
                break  # perhaps the first half of a CRLF
            lines.append(self.buf[start:m.start()].decode("utf-8", "replace"))
            start = m.end()
        self.buf = self.buf[start:]
        return lines


class Follow:
    """An event stream's state and its steps, as flows (_flows.py), the same for
    :class:`EventStream` and :class:`gpured.AsyncClient`'s streams: subscribe, read what comes,
    parse it, and reconnect (see EventStream). ``closed`` may be set from any thread."""

    def __init__(self, client: "Client", job: Optional[str], kind: Optional[str],
                 status: Union[str, Sequence[str], None], after: Optional[int], heartbeat: Optional[int],
                 timeout: Optional[float]) -> None:
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
        self.closed = threading.Event()
        self.got: Optional[Got] = None  # the subscription being read
        self._items: collections.deque = collections.deque()
        self._failures = 0
        self._delay = 0.0  # before the next subscription

    def left(self) -> Optional[float]:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def open(self, first: bool = False) -> Flow[None]:
        """Subscribe: the client's request (auth, errors, on_response), streaming; the first
        with the client's retries, a reconnection with none (next() waits between them)."""
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        self.got = yield from self.client._request("GET", "/v1/events", params=self.params, headers=headers,
                                                   answer="stream", wait=self.heartbeat,
                                                   retries=None if first else 0)
        self.connects += 1
        self._lines, self._name, self._data, self._last = _Lines(), "", [], self.last_id

    def next(self) -> Flow[Optional[Event]]:
        """The next event, or None after a keep-alive or a new subscription: a chance to look at
        the clock. Raises _End once closed or past the timeout. Connection failures, 429 and 5xx
        are tried again; any other refusal (401: a revoked token) raises."""
        while True:
            if self._items:
                return self._items.popleft()
            left = self.left()
            if self.closed.is_set() or left == 0:
                yield from self.drop()
                raise _End
            if self.got is None:
                yield Sleep(self._delay if left is None else min(self._delay, left))
                if self.closed.is_set() or self.left() == 0:
                    raise _End
                try:
                    yield from self.open()
                except Error as e:
                    if e.status is not None and e.status != 429 and e.status < 500:
                        raise
                    self._failures += 1  # no answer, or one to try again: the retry, doubling from 4 tries on
                    self._delay = max(self.retry, _backoff(self._failures - 1, None))
                    continue
                self._failures = 0
                return None
            # no byte for the client's timeout plus a heartbeat: the connection is dead
            chunk = yield Read(self.got, self.client.timeout + self.heartbeat)
            if isinstance(chunk, Lost) or not chunk:  # cut short, or ended: resumed after retry
                yield from self.drop()
                self._delay = self.retry
                continue
            for line in self._lines.feed(chunk):
                self._line(line)

    def drop(self) -> Flow[None]:
        """Let the subscription go (its connection closed)."""
        got, self.got = self.got, None
        if got is not None:
            yield Close(got)

    def _line(self, line: str) -> None:
        """One line of the stream, parsed as the SSE standard says (multi-line data, comments,
        id, retry; fields it does not know ignored): an event, or None for a comment, queued."""
        if not line:  # the end of an event
            if self._data:
                ev = Event.of(self._name or "message", "\n".join(self._data), self._last)
                if ev.kind == "gap":
                    self._last = ev.seq
                self.last_id = self._last
                self._items.append(ev)
            self._name, self._data = "", []
            return
        if line.startswith(":"):
            self._items.append(None)
            return
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "data":
            self._data.append(value)
        elif key == "event":
            self._name = value
        elif key == "id" and value.isascii() and value.isdigit():
            self._last = int(value)  # the stream's position once this event is whole
        elif key == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value) / 1000


class Watching:
    """A job's statuses, as flows over a Follow of its events: the same for :class:`JobWatch` and
    :meth:`gpured.AsyncClient.watch` (JobWatch says what it gives)."""

    def __init__(self, job: "Job", follow: Follow) -> None:
        self.job, self.follow = job, follow
        self.rank, self.seen, self.ended = -1, 0, False

    def next(self) -> Flow[str]:
        """The next status; raises _End after the final one, or once the stream ends."""
        job, follow = self.job, self.follow
        while not self.ended:
            if follow.connects != self.seen:  # subscribed (again): where the job is now
                self.seen = follow.connects
                yield from job.refresh.flow(job)
                status, self.ended = job.doc["status"], job.done
                if _RANK.get(status, 1) > self.rank:
                    self.rank = _RANK.get(status, 1)
                    return status
                continue
            ev = yield from follow.next()
            if ev is None:  # quiet: has the job ended unseen? (JobWatch's docstring says how)
                yield from job.refresh.flow(job)
                if job.done:
                    self.ended = True
                    return job.doc["status"]
                continue
            if ev.id != job.id or _RANK.get(ev.status, 1) <= self.rank:
                continue  # a status already given (changed before the read)
            self.rank = _RANK.get(ev.status, 1)
            if ev.status in TERMINAL:
                yield from job.refresh.flow(job)  # the final resource: result, timings
                self.ended = True
            return ev.status
        raise _End


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
        self.follow = Follow(client, job, kind, status, after, heartbeat, timeout)
        self._busy = False  # a thread is in __next__
        drive(self.follow.open(first=True), self._do)

    def __repr__(self) -> str:
        return "<gpured.EventStream %s after %s>" % (self.follow.params, self.last_id)

    @property
    def last_id(self) -> Optional[int]:
        return self.follow.last_id

    @property
    def retry(self) -> float:
        return self.follow.retry

    @property
    def connects(self) -> int:
        return self.follow.connects

    @property
    def closed(self) -> bool:
        return self.follow.closed.is_set()

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
        self.follow.closed.set()
        got = self.follow.got
        if got is None:
            return
        sock = getattr(getattr(got.response.raw, "_connection", None), "sock", None)  # urllib3's, while it streams
        if isinstance(sock, socket.socket):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it; close() would not
            except OSError:
                pass
        if not self._busy:  # else the iterating thread closes it as it stops
            got.response.close()

    def _poll(self) -> Optional[Event]:
        """The next event, or None after a keep-alive or a new subscription. Raises
        StopIteration once closed or past the timeout."""
        self._busy = True
        try:
            return drive(self.follow.next(), self._do)
        except _End:
            raise StopIteration from None
        except Exception:
            if not self.closed:  # else an error of the connection closed under it
                raise
            raise StopIteration from None
        finally:
            self._busy = False

    def _do(self, step: Any) -> Any:
        """A step of the stream's flows: a wait cut short by close(), the rest the client's."""
        if isinstance(step, Sleep):
            self.follow.closed.wait(step.seconds)
            return None
        return self.follow.client._do(step)


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
        self._watching = Watching(job, self.stream.follow)

    def __repr__(self) -> str:
        return "<gpured.JobWatch %s>" % self.job.id

    def __iter__(self) -> "JobWatch":
        return self

    def __next__(self) -> str:
        self.stream._busy = True
        try:
            return drive(self._watching.next(), self.stream._do)
        except _End:
            self.stream.close()
            raise StopIteration from None
        except Exception:
            closed = self.stream.closed  # else an error of the connection closed under it
            self.stream.close()
            if not closed:
                raise
            raise StopIteration from None
        finally:
            self.stream._busy = False

    def __enter__(self) -> "JobWatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop watching (from any thread), as :meth:`EventStream.close`."""
        self.stream.close()
