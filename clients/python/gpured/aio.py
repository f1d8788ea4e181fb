# aio.py: gpured.AsyncClient, the Client's calls as coroutines (each runs in a worker thread).
from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Optional, TypeVar

from .client import Client, Dataset, Job

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

    async def wait(self, job: Job, timeout: Optional[float] = None) -> Job:
        """:meth:`Job.wait` in a worker thread."""
        return await asyncio.to_thread(job.wait, timeout)

    async def result(self, job: Job, part: Optional[str] = None, timeout: Optional[float] = None) -> Any:
        """:meth:`Job.result` in a worker thread."""
        return await asyncio.to_thread(job.result, part, timeout)

    async def cancel(self, job: Job) -> Job:
        """:meth:`Job.cancel` in a worker thread."""
        return await asyncio.to_thread(job.cancel)

    async def download(self, dataset: Dataset, progress: Any = None) -> Any:
        """:meth:`Dataset.download` in a worker thread."""
        return await asyncio.to_thread(dataset.download, progress)

    async def delete(self, dataset: Dataset) -> None:
        """:meth:`Dataset.delete` in a worker thread."""
        await asyncio.to_thread(dataset.delete)
