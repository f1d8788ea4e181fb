# aio.py: gpured.AsyncClient, the Client's calls as coroutines (each runs in a worker thread).
from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Iterator, Optional, TypeVar, Union

import numpy as np

from .client import Client, Dataset, Job, Result
from .events import Event, EventStream, JobWatch

T = TypeVar("T")


def _threaded(method: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """A coroutine running the Client method of the same name with asyncio.to_thread."""
    @functools.wraps(method)
    async def run(self: "AsyncClient", *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(method, self.client, *args, **kwargs)
    return run


async def _aiter(it: Iterator[T]) -> AsyncIterator[T]:
    """An iterator's items, each next() (a page fetch now and then) run in a worker thread."""
    end = object()
    while True:
        item = await asyncio.to_thread(next, it, end)
        if item is end:
            return
        yield item  # type: ignore[misc]


class AsyncStream(Generic[T]):
    """A live stream (:class:`EventStream`, :class:`JobWatch`) as an async iterator: the sync one,
    opened in a worker thread at the first ``__anext__`` (or ``async with``), each next item
    read in a worker thread. A stream waiting for its next event holds a thread of the loop's
    default executor meanwhile. ``aclose()`` (or leaving ``async with``) closes it at once, a
    pending ``__anext__`` included; so does cancelling a pending ``__anext__`` (as
    ``asyncio.wait_for`` does at its timeout), since the event its thread is reading could not
    be given to anyone: open a new stream with ``after=stream.last_id`` to go on."""

    def __init__(self, open: Callable[[], Union[EventStream, JobWatch]]) -> None:
        self._open = open
        self._closed = False
        self.stream: Optional[Union[EventStream, JobWatch]] = None

    async def _opened(self) -> Union[EventStream, JobWatch]:
        if self.stream is None:
            self.stream = await asyncio.to_thread(self._open)
            if self._closed:  # closed while it opened
                self.stream.close()
        return self.stream

    def __aiter__(self) -> "AsyncStream[T]":
        return self

    async def __anext__(self) -> T:
        stream = await self._opened()
        end = object()
        try:
            item = await asyncio.to_thread(next, stream, end)
        except asyncio.CancelledError:
            stream.close()  # wakes the thread blocked reading
            raise
        if item is end:
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

    @property
    def last_id(self) -> Optional[int]:
        """The id of the last event seen (an events stream's)."""
        stream = self.stream.stream if isinstance(self.stream, JobWatch) else self.stream
        return stream.last_id if stream is not None else None


class AsyncClient:
    """The asyncio twin of :class:`gpured.Client`: the same arguments and the same methods as
    coroutines, each running the synchronous one in a worker thread (``asyncio.to_thread``), so
    it needs nothing beyond requests and NumPy and many calls can be under way at once (each
    thread has its own HTTP session). The Job and Dataset objects it returns are the sync ones;
    wait for a job with ``await client.wait(job)`` and fetch with ``await client.result(job)``.

        async with gpured.AsyncClient(url) as c:
            sums = await asyncio.gather(*(c.sum(a) for a in arrays))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.client = Client(*args, **kwargs)

    def __repr__(self) -> str:
        return "gpured.AsyncClient(%r)" % self.client.url

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.client.close()

    reduce = _threaded(Client.reduce)
    sum = _threaded(Client.sum)
    prod = _threaded(Client.prod)
    min = _threaded(Client.min)
    max = _threaded(Client.max)
    mean = _threaded(Client.mean)
    argmin = _threaded(Client.argmin)
    argmax = _threaded(Client.argmax)
    matmul = _threaded(Client.matmul)
    submit = _threaded(Client.submit)
    submit_many = _threaded(Client.submit_many)
    job = _threaded(Client.job)
    benchmark = _threaded(Client.benchmark)
    upload = _threaded(Client.upload)
    dataset = _threaded(Client.dataset)
    devices = _threaded(Client.devices)
    algorithms = _threaded(Client.algorithms)

    def jobs(self, *args: Any, **kwargs: Any) -> AsyncIterator[Job]:
        """Every job, as :meth:`Client.jobs`: ``async for job in client.jobs(limit=100)``."""
        return _aiter(self.client.jobs(*args, **kwargs))

    def datasets(self, *args: Any, **kwargs: Any) -> AsyncIterator[Dataset]:
        """Every dataset, as :meth:`Client.datasets`: ``async for ds in client.datasets()``."""
        return _aiter(self.client.datasets(*args, **kwargs))

    def events(self, *args: Any, **kwargs: Any) -> AsyncStream[Event]:
        """The service's events, as :meth:`Client.events` (an :class:`AsyncStream`):
        ``async with client.events(kind="job") as events: async for ev in events: ...``."""
        return AsyncStream(lambda: self.client.events(*args, **kwargs))

    def watch(self, job: Job, timeout: Optional[float] = None) -> AsyncStream[str]:
        """A job's statuses as they change, as :meth:`Job.watch` (an :class:`AsyncStream`):
        ``async for status in client.watch(job): ...``."""
        return AsyncStream(lambda: job.watch(timeout))

    async def wait(self, job: Job, timeout: Optional[float] = None) -> Job:
        """:meth:`Job.wait` in a worker thread."""
        return await asyncio.to_thread(job.wait, timeout)

    async def result(self, job: Job, part: Optional[str] = None, timeout: Optional[float] = None) -> Result:
        """:meth:`Job.result` in a worker thread."""
        return await asyncio.to_thread(job.result, part, timeout)

    async def cancel(self, job: Job) -> Job:
        """:meth:`Job.cancel` in a worker thread."""
        return await asyncio.to_thread(job.cancel)

    async def download(self, dataset: Dataset, progress: Any = None) -> np.ndarray:
        """:meth:`Dataset.download` in a worker thread."""
        return await asyncio.to_thread(dataset.download, progress)

    async def delete(self, dataset: Dataset) -> None:
        """:meth:`Dataset.delete` in a worker thread."""
        await asyncio.to_thread(dataset.delete)
