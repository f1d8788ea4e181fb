# waiting.py: gpured.as_completed and gpured.wait, many jobs awaited through one event stream.
from __future__ import annotations

import time
from typing import Iterable, Iterator, Optional

from .client import TERMINAL, Job
from .errors import Timeout

FIRST_COMPLETED, FIRST_EXCEPTION, ALL_COMPLETED = "FIRST_COMPLETED", "FIRST_EXCEPTION", "ALL_COMPLETED"
"""``return_when`` of :func:`wait`, as in ``concurrent.futures``."""


def as_completed(jobs: Iterable[Job], timeout: Optional[float] = None) -> Iterator[Job]:
    """Yield each job as it ends (``succeeded``, ``failed`` or ``canceled``), those ended already
    first; raise :class:`gpured.Timeout` if ``timeout`` seconds pass before the last one ends.

    One event stream of the jobs' client serves them all, however many: it is opened first,
    then the jobs that ended before it opened are found in the newest pages of the job list (ids
    rise with time, so the pages read stop at the oldest job waited for), and the rest as their
    events come. A job is fetched once, when it ends, for its result. The jobs share one client."""
    pending = {j.id: j for j in jobs}
    if not pending:
        return
    client = next(iter(pending.values())).client
    deadline = None if timeout is None else time.monotonic() + timeout
    for j in list(pending.values()):
        if j.done:
            yield pending.pop(j.id)
    if not pending:
        return
    with client.events(kind="job", status=list(TERMINAL), timeout=timeout) as stream:
        oldest = min(pending)
        for listed in client.jobs(page=1000):  # ended before the stream opened
            if listed.id < oldest:
                break
            if listed.id in pending and listed.done:
                job = pending.pop(listed.id)
                job.doc = listed.doc
                yield job
        for ev in stream if pending else ():
            job = pending.pop(ev.id, None)
            if job is not None:
                yield job.refresh()
            if not pending:
                return
    if pending:
        left = 0.0 if deadline is None else max(0.0, deadline - time.monotonic())
        raise Timeout("%d of the jobs had not ended after %s s (%.1f s left): %s" %
                      (len(pending), timeout, left, ", ".join(sorted(pending)[:5])))


def wait(jobs: Iterable[Job], timeout: Optional[float] = None,
         return_when: str = ALL_COMPLETED) -> tuple[set[Job], set[Job]]:
    """Wait for jobs as ``concurrent.futures.wait`` does for futures: return ``(done, not_done)``
    once all have ended (``ALL_COMPLETED``), the first has (``FIRST_COMPLETED``), the first has
    failed or been canceled (``FIRST_EXCEPTION``), or ``timeout`` seconds have passed (no
    exception then: ``not_done`` says which are left). Through :func:`as_completed`."""
    if return_when not in (FIRST_COMPLETED, FIRST_EXCEPTION, ALL_COMPLETED):
        raise ValueError("return_when must be FIRST_COMPLETED, FIRST_EXCEPTION or ALL_COMPLETED, not %r" % return_when)
    todo = list(jobs)
    done: set[Job] = set()
    try:
        for job in as_completed(todo, timeout):
            done.add(job)
            if return_when == FIRST_COMPLETED or (return_when == FIRST_EXCEPTION and job.doc["status"] != "succeeded"):
                break
    except Timeout:
        pass
    return done, {j for j in todo if j not in done}
