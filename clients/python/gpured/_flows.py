# _flows.py: the client's calls written once, free of I/O. A flow is a generator: it yields what
# the transport is to do (Send an exchange, Sleep, Read or Close a streamed answer), is sent
# back what came of it (Got, Lost when no answer came, bytes read), and returns the call's value. Client runs flows with requests (drive),
# AsyncClient with aiohttp (aio.py's adrive); neither holds any logic of the API.
from __future__ import annotations

import functools
import json as _json
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Mapping, NamedTuple, Optional, TypeVar, Union

T = TypeVar("T")
Flow = Generator[Union["Send", "Sleep"], Any, T]


class Send(NamedTuple):
    """One HTTP exchange. ``answer``: how a body below 400 is read: ``json`` (its text), ``npy``
    (into an array), ``file`` (into ``file``, as it arrives), ``stream`` (left to the caller)."""
    method: str
    url: str
    params: Mapping[str, str]
    json: Any
    body: Any  # a _wire.Body, or None
    headers: Mapping[str, str]
    timeout: float
    answer: str
    file: Any
    progress: Optional[Callable[[int, int], None]]


class Sleep(NamedTuple):
    seconds: float


class Read(NamedTuple):
    """The next bytes of a streamed answer (``answer="stream"``): b"" at its end, Lost when cut
    short or quiet for ``timeout`` seconds."""
    got: "Got"
    timeout: float


class Close(NamedTuple):
    """Let a streamed answer go, its connection closed."""
    got: "Got"


@dataclass
class Got:
    """An answer: its status, reason and headers, its text (an error's, or a json answer's), an
    npy answer's array; ``response``: the transport's own."""
    status: int
    reason: str
    headers: Mapping[str, str]
    text: str = ""
    array: Any = None
    response: Any = field(default=None, repr=False)
    chunks: Any = field(default=None, repr=False)  # a streamed answer's, as its transport reads them

    def json(self) -> Any:
        return _json.loads(self.text)


@dataclass
class Lost:
    """No answer: the transport's exception, whether the time ran out, and (a connection that
    failed) the problem in a few words."""
    cause: BaseException
    timed_out: bool = False
    problem: Optional[str] = None


def drive(flow: Flow[T], do: Callable[[Union[Send, Sleep]], Any]) -> T:
    """Run a flow, each step done by do; what do raises goes into the flow, to clean up."""
    try:
        step = next(flow)
        while True:
            try:
                got = do(step)
            except BaseException as e:  # noqa: BLE001  (thrown into the flow, which re-raises it)
                step = flow.throw(e)
            else:
                step = flow.send(got)
    except StopIteration as stop:
        return stop.value


def flow(fn: Callable[..., Flow[T]]) -> Callable[..., T]:
    """A Client, Job or Dataset method written as a flow, run with requests; the flow itself is
    its ``flow`` (AsyncClient runs that)."""
    @functools.wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> T:
        client = getattr(self, "client", self)
        return drive(fn(self, *args, **kwargs), client._do)
    run.flow = fn  # type: ignore[attr-defined]
    return run
