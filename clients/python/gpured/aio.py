# aio.py: gpured.AsyncClient, the Client's calls as coroutines over aiohttp: the same flows as
# Client's (_flows.py), each exchange awaited on the event loop, so that no call holds a thread
# and a quick one never waits behind long polls. The event streams alone still read in a worker
# thread each (AsyncStream). Owned by the loop that first uses the client.
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import io
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Optional, TypeVar, Union

import numpy as np

from . import _wire
from ._flows import Flow, Got, Lost, Send, Sleep
from .client import Client, Dataset, Job, Pager, Result, _connection_problem
from .errors import Error
from .events import Event, EventStream, JobWatch

T = TypeVar("T")


async def adrive(flow: Flow[T], do: Callable[[Union[Send, Sleep]], Awaitable[Any]]) -> T:
    """Run a flow, each step awaited from do; what do raises goes into the flow, to clean up."""
    try:
        step = next(flow)
        while True:
            try:
                got = await do(step)
            except BaseException as e:  # noqa: BLE001  (thrown into the flow, which re-raises it)
                step = flow.throw(e)
            else:
                step = flow.send(got)
    except StopIteration as stop:
        return stop.value


def _native(method: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """The coroutine of a Client method: its flow, run on the loop."""
    @functools.wraps(method)
    async def run(self: "AsyncClient", *args: Any, **kwargs: Any) -> T:
        return await adrive(method.flow(self.client, *args, **kwargs), self._do)  # type: ignore[attr-defined]
    return run


async def _pieces(body: _wire.Body) -> AsyncIterator[bytes]:
    for piece in body:  # from memory, or a file's next megabyte: brief
        yield bytes(piece)


class AsyncStream(Generic[T]):
    """A live stream (:class:`EventStream`, :class:`JobWatch`) as an async iterator: the sync one,
    opened at the first ``__anext__`` (or ``async with``) and read in a thread of its own, made
    for it (not the loop's default executor, so that open streams never keep one another, or
    ``asyncio.to_thread``, waiting) and ended with it. ``aclose()`` (or leaving ``async with``) closes it at once, a
    pending ``__anext__`` included; so does cancelling a pending ``__anext__`` (as
    ``asyncio.wait_for`` does at its timeout), since the event its thread is reading could not
    be given to anyone: open a new stream with ``after=stream.last_id`` to go on."""

    def __init__(self, open: Callable[[], Union[EventStream, JobWatch]]) -> None:
        self._open = open
        self._closed = False
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gpured-stream")
        self.stream: Optional[Union[EventStream, JobWatch]] = None

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    async def _opened(self) -> Union[EventStream, JobWatch]:
        if self.stream is None:
            self.stream = await self._in_thread(self._open)
            if self._closed:  # closed while it opened
                self.stream.close()
        return self.stream

    def __aiter__(self) -> "AsyncStream[T]":
        return self

    async def __anext__(self) -> T:
        stream = await self._opened()
        end = object()
        try:
            item = await self._in_thread(next, stream, end)
        except asyncio.CancelledError:
            stream.close()  # wakes the thread blocked reading
            raise
        if item is end:
            self._thread.shutdown(wait=False)
            raise StopAsyncIteration
        return item  # type: ignore[return-value]

    async def __aenter__(self) -> "AsyncStream[T]":
        await self._opened()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the stream (a pending ``__anext__`` ends with StopAsyncIteration)."""
        self._closed = True
        if self.stream is not None:
            self.stream.close()
        self._thread.shutdown(wait=False)  # its thread ends once its read does

    @property
    def last_id(self) -> Optional[int]:
        """The id of the last event seen (an events stream's)."""
        stream = self.stream.stream if isinstance(self.stream, JobWatch) else self.stream
        return stream.last_id if stream is not None else None


class AsyncClient:
    """The asyncio twin of :class:`gpured.Client`: the same arguments and the same methods as
    coroutines, over aiohttp (Debian: python3-aiohttp), so many calls can be under way at once on
    one loop and none holds a thread: a quick call never waits behind long ones. Its Job and
    Dataset objects are the sync ones; wait for a job with ``await client.wait(job)`` and fetch
    with ``await client.result(job)``. ``on_response`` is given aiohttp's response. Use it from
    one event loop, and close it (``async with``, or ``await client.aclose()``).

        async with gpured.AsyncClient(url) as c:
            sums = await asyncio.gather(*(c.sum(a) for a in arrays))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.client = Client(*args, **kwargs)
        self._http: Any = None  # aiohttp.ClientSession, made on the loop at the first call

    def __repr__(self) -> str:
        return "gpured.AsyncClient(%r)" % self.client.url

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections (and those of the event streams' threads)."""
        if self._http is not None:
            await self._http.close()
            self._http = None
        self.client.close()

    def _session(self) -> Any:
        if self._http is None:
            try:
                import aiohttp
            except ImportError as e:
                raise ImportError("gpured.AsyncClient needs aiohttp (Debian: python3-aiohttp; pip: aiohttp)") from e
            # no cap on connections: a long poll holds one, and a quick call must not queue behind them
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._http

    async def _do(self, step: Union[Send, Sleep]) -> Optional[Union[Got, Lost]]:
        """One step of a flow, on the loop: a sleep, or an exchange and what came of it."""
        import aiohttp
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            return None
        headers, data = dict(step.headers), None
        if step.body is not None:
            headers["Content-Length"] = str(len(step.body))  # sent as it goes, not chunked
            data = _pieces(step.body)
        # as requests' timeout: for the connection and for each read, not the whole answer
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=step.timeout, sock_read=step.timeout)
        try:
            async with self._session().request(step.method, step.url, params=step.params or None, json=step.json,
                                               data=data, headers=headers, timeout=timeout) as resp:
                if self.client.on_response:
                    self.client.on_response(resp)
                got = Got(resp.status, resp.reason or "", resp.headers, response=resp)
                if resp.status >= 400 or step.answer == "json":
                    got.text = await resp.text()
                else:
                    await self._read_answer(resp, step, got)
                return got
        except asyncio.TimeoutError as e:
            return Lost(e, timed_out=True)
        except aiohttp.ClientConnectorError as e:
            refused = isinstance(e.os_error, ConnectionRefusedError)
            return Lost(e, problem="connection refused" if refused else _connection_problem(str(e)))
        except aiohttp.ClientConnectionError as e:
            return Lost(e, problem=_connection_problem(str(e)))
        except aiohttp.ClientError as e:
            return Lost(e)

    @staticmethod
    async def _read_answer(resp: Any, step: Send, got: Got) -> None:
        """An npy answer into got.array, or a file answer into step.file, as it arrives."""
        import aiohttp
        total = int(resp.headers.get("Content-Length") or 0)
        pieces, done = [], 0
        try:
            async for piece in resp.content.iter_chunked(_wire.CHUNK):
                pieces.append(piece)
                done += len(piece)
                if step.progress:
                    step.progress(done, total)
            if total and done != total:
                raise EOFError("the answer ended after %d of %d bytes" % (done, total))
            if step.answer == "npy":
                got.array = _wire.read_npy(io.BytesIO(b"".join(pieces)), total)
            else:
                _wire.save(pieces, step.file, total)
        except (EOFError, ValueError, OSError, aiohttp.ClientPayloadError) as e:
            raise Error(None, "bad answer", "%s %s: %s" % (step.method, step.url, e)) from e

    reduce = _native(Client.reduce)
    sum = _native(Client.sum)
    prod = _native(Client.prod)
    min = _native(Client.min)
    max = _native(Client.max)
    mean = _native(Client.mean)
    argmin = _native(Client.argmin)
    argmax = _native(Client.argmax)
    matmul = _native(Client.matmul)
    submit = _native(Client.submit)
    submit_many = _native(Client.submit_many)
    job = _native(Client.job)
    cleanup = _native(Client.cleanup)
    benchmark = _native(Client.benchmark)
    upload = _native(Client.upload)
    dataset = _native(Client.dataset)
    devices = _native(Client.devices)
    algorithms = _native(Client.algorithms)

    async def _pages(self, pager: Pager) -> AsyncIterator[dict]:
        while not pager.done:
            for item in pager.take(await adrive(pager.next(), self._do)):
                yield item

    async def jobs(self, *args: Any, **kwargs: Any) -> AsyncIterator[Job]:
        """Every job, as :meth:`Client.jobs`: ``async for job in client.jobs(limit=100)``."""
        async for doc in self._pages(Client.jobs_pager(self.client, *args, **kwargs)):
            yield Job(self.client, doc)

    async def datasets(self, *args: Any, **kwargs: Any) -> AsyncIterator[Dataset]:
        """Every dataset, as :meth:`Client.datasets`: ``async for ds in client.datasets()``."""
        async for doc in self._pages(Client.datasets_pager(self.client, *args, **kwargs)):
            yield Dataset(self.client, doc)

    def events(self, *args: Any, **kwargs: Any) -> AsyncStream[Event]:
        """The service's events, as :meth:`Client.events` (an :class:`AsyncStream`):
        ``async with client.events(kind="job") as events: async for ev in events: ...``."""
        return AsyncStream(lambda: self.client.events(*args, **kwargs))

    def watch(self, job: Job, timeout: Optional[float] = None) -> AsyncStream[str]:
        """A job's statuses as they change, as :meth:`Job.watch` (an :class:`AsyncStream`):
        ``async for status in client.watch(job): ...``."""
        return AsyncStream(lambda: job.watch(timeout))

    async def wait(self, job: Job, timeout: Optional[float] = None) -> Job:
        """:meth:`Job.wait`, on the loop."""
        return await adrive(Job.wait.flow(job, timeout), self._do)

    async def result(self, job: Job, part: Optional[str] = None, timeout: Optional[float] = None) -> Result:
        """:meth:`Job.result`, on the loop."""
        return await adrive(Job.result.flow(job, part, timeout), self._do)

    async def cancel(self, job: Job) -> Job:
        """:meth:`Job.cancel` (a queued job), or the delete of an ended one, on the loop."""
        return await adrive(Job.cancel.flow(job), self._do)

    async def download(self, dataset: Dataset, progress: Any = None) -> np.ndarray:
        """:meth:`Dataset.download`, on the loop."""
        return await adrive(Dataset.download.flow(dataset, progress), self._do)

    async def delete(self, item: Union[Job, Dataset]) -> None:
        """Delete a dataset, or an ended job with its kept result (:meth:`Dataset.delete`,
        :meth:`Job.delete`), on the loop."""
        await adrive(type(item).delete.flow(item), self._do)
