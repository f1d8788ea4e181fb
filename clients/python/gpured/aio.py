# aio.py: gpured.AsyncClient, the Client's calls as coroutines over aiohttp: the same flows as
# Client's (_flows.py), each exchange awaited on the event loop, so that no call or stream holds a
# thread and a quick call never waits behind long polls. Owned by the loop that first uses it.
from __future__ import annotations

import asyncio
import functools
import io
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Optional, Sequence, TypeVar, Union

import numpy as np

from . import _wire
from ._flows import Close, Flow, Got, Lost, Read, Send, Sleep
from .client import Client, Dataset, Job, Pager, Result, _connection_problem
from .errors import Error
from .events import Event, Follow, Watching, _End

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
    """The service's events (:meth:`AsyncClient.events`: each an :class:`Event`) or a job's statuses
    (:meth:`AsyncClient.watch`: strings) as an async iterator, read on the loop: what
    :class:`EventStream` and :class:`JobWatch` give, the same flows. It subscribes at ``async
    with`` (or the first ``__anext__``). ``aclose()`` (or leaving ``async with``) ends it at once,
    a pending ``__anext__`` included; so does cancelling a pending ``__anext__`` (as
    ``asyncio.wait_for`` does at its timeout): open a new stream with ``after=stream.last_id`` to
    go on."""

    def __init__(self, client: "AsyncClient", follow: Follow, watching: Optional[Watching] = None) -> None:
        self._client, self._follow, self._watching = client, follow, watching
        self._opened = False
        self._wake = asyncio.Event()  # set by aclose: a wait between subscriptions ends

    def __aiter__(self) -> "AsyncStream[T]":
        return self

    async def __anext__(self) -> T:
        try:
            if not self._opened:
                self._opened = True
                await adrive(self._follow.open(first=True), self._do)
            while True:
                flow = self._watching.next() if self._watching else self._follow.next()
                item = await adrive(flow, self._do)
                if item is not None:
                    return item  # type: ignore[return-value]
        except _End:
            await self.aclose()
            raise StopAsyncIteration from None
        except asyncio.CancelledError:
            await self.aclose()
            raise
        except Exception:
            if self.closed:  # an error of the connection closed under it
                raise StopAsyncIteration from None
            await self.aclose()
            raise

    async def __aenter__(self) -> "AsyncStream[T]":
        if not self._opened:
            self._opened = True
            await adrive(self._follow.open(first=True), self._do)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the stream (a pending ``__anext__`` ends with StopAsyncIteration)."""
        self._follow.closed.set()
        self._wake.set()
        await adrive(self._follow.drop(), self._do)

    @property
    def closed(self) -> bool:
        return self._follow.closed.is_set()

    @property
    def last_id(self) -> Optional[int]:
        """The id of the last event seen."""
        return self._follow.last_id

    async def _do(self, step: Any) -> Any:
        """A step of the stream's flows: a wait cut short by aclose(), the rest the client's."""
        if isinstance(step, Sleep):
            try:
                await asyncio.wait_for(self._wake.wait(), step.seconds)
            except asyncio.TimeoutError:
                pass
            return None
        return await self._client._do(step)


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
        """Close the HTTP connections."""
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
        if isinstance(step, Read):
            try:
                return await asyncio.wait_for(step.got.response.content.readany(), step.timeout)
            except (asyncio.TimeoutError, aiohttp.ClientError, OSError) as e:
                return Lost(e)
        if isinstance(step, Close):
            step.got.response.close()
            return None
        headers, data = dict(step.headers), None
        if step.body is not None:
            headers["Content-Length"] = str(len(step.body))  # sent as it goes, not chunked
            data = _pieces(step.body)
        # as requests' timeout: for the connection and for each read, not the whole answer
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=step.timeout, sock_read=step.timeout)
        try:
            resp = await self._session().request(step.method, step.url, params=step.params or None, json=step.json,
                                                 data=data, headers=headers, timeout=timeout)
            streams = step.answer == "stream" and resp.status < 400  # read by the caller (Read), until Close
            try:
                if self.client.on_response:
                    self.client.on_response(resp)
                got = Got(resp.status, resp.reason or "", resp.headers, response=resp)
                if resp.status >= 400 or step.answer == "json":
                    got.text = await resp.text()
                elif not streams:
                    await self._read_answer(resp, step, got)
                return got
            finally:
                if not streams:
                    resp.release()
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
    nansum = _native(Client.nansum)
    nanmin = _native(Client.nanmin)
    nanmax = _native(Client.nanmax)
    count_nonzero = _native(Client.count_nonzero)
    var = _native(Client.var)
    std = _native(Client.std)
    nanmean = _native(Client.nanmean)
    nanprod = _native(Client.nanprod)
    nanvar = _native(Client.nanvar)
    nanstd = _native(Client.nanstd)
    nanargmin = _native(Client.nanargmin)
    nanargmax = _native(Client.nanargmax)
    ptp = _native(Client.ptp)
    any = _native(Client.any)
    all = _native(Client.all)
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

    def events(self, job: Optional[str] = None, kind: Optional[str] = None,
               status: Union[str, Sequence[str], None] = None, after: Optional[int] = None,
               heartbeat: Optional[int] = None, timeout: Optional[float] = None) -> AsyncStream[Event]:
        """The service's events, as :meth:`Client.events` (an :class:`AsyncStream`):
        ``async with client.events(kind="job") as events: async for ev in events: ...``."""
        return AsyncStream(self, Follow(self.client, job, kind, status, after, heartbeat, timeout))

    def watch(self, job: Job, timeout: Optional[float] = None) -> AsyncStream[str]:
        """A job's statuses as they change, as :meth:`Job.watch` (an :class:`AsyncStream`):
        ``async for status in client.watch(job): ...``."""
        follow = Follow(self.client, job.id, "job", None, None, None, timeout)
        return AsyncStream(self, follow, Watching(job, follow))

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
