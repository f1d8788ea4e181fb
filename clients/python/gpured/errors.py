# errors.py: gpured.Error, the exception the client raises, built from an RFC 9457 problem, and
# its subclasses for what a caller catches apart.
from __future__ import annotations

from typing import Any, Mapping, Optional


class Error(Exception):
    """A request gpured refused or could not answer.

    The members are the problem+json document's (docs/API.md: every error is one):
    ``status`` (the HTTP status; ``None`` when no answer came at all, e.g. the connection
    failed), ``title``, ``detail`` (what was wrong, in words), ``type``, ``field`` (the request
    member at fault, when the server names one) and ``problem`` (the whole document as a dict).

    What is raised is the subclass that says what happened, where one does: :class:`NotFound`,
    :class:`LimitExceeded`, :class:`JobFailed`, :class:`Timeout` and :class:`Unavailable`;
    catching ``Error`` catches them all.
    """

    def __init__(self, status: Optional[int], title: str, detail: str = "", type: str = "about:blank",
                 field: Optional[str] = None, problem: Optional[Mapping[str, Any]] = None) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.field = field
        self.problem: dict[str, Any] = dict(problem) if problem else \
            {"type": type, "title": title, "status": status, "detail": detail, **({"field": field} if field else {})}
        super().__init__(str(self))

    @classmethod
    def of(cls, status: Optional[int], title: str, detail: str = "", type: str = "about:blank",
           field: Optional[str] = None, problem: Optional[Mapping[str, Any]] = None) -> "Error":
        """The error of an answer with this status: the subclass for it, else Error."""
        kind = {404: NotFound, 413: LimitExceeded, 429: LimitExceeded, 507: LimitExceeded,
                503: Unavailable}.get(status or 0, Error)
        return kind(status, title, detail, type, field, problem)

    @classmethod
    def from_problem(cls, problem: Mapping[str, Any], status: Optional[int] = None) -> "Error":
        """The error a problem document describes (status from the document, else ``status``)."""
        st = problem.get("status")
        return cls.of(st if isinstance(st, int) else status, str(problem.get("title", "")),
                      str(problem.get("detail", "")), str(problem.get("type", "about:blank")),
                      problem.get("field"), problem)

    def __str__(self) -> str:
        head = "%s %s" % (self.status, self.title) if self.status is not None else self.title
        text = "%s: %s" % (head, self.detail) if self.detail else head
        return text + (" (field %s)" % self.field if self.field else "")


class NotFound(Error):
    """404: no such job or dataset (or another tenant's), or a path that does not exist."""


class LimitExceeded(Error):
    """A limit or quota said no: 413 (a body or dataset over its size limit), 429 (a full
    queue or a tenant's quota; retried first, as ``Retry-After`` says) or 507 (no room to
    store it)."""


class Unavailable(Error, ConnectionError):
    """The service could not be reached (``status`` None: refused, reset, no answer) or said
    it is not ready (503), and retries did not help."""


class Timeout(Error, TimeoutError):
    """A call ran out of its deadline (the client's ``timeout``, or the call's ``timeout=``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(None, "timeout", detail)


class JobFailed(Error):
    """A job ended without a result. ``job_id``; ``job_status``: ``failed`` or ``canceled``;
    ``problem``: the job's ``error`` document for a failed job (``status`` is its HTTP status,
    ``detail`` what went wrong), or a 409 saying it was canceled."""

    def __init__(self, job_id: str, job_status: str, problem: Mapping[str, Any]) -> None:
        self.job_id, self.job_status = job_id, job_status
        st = problem.get("status")
        super().__init__(st if isinstance(st, int) else None, str(problem.get("title", "")),
                         "job %s %s: %s" % (job_id, job_status, problem.get("detail", "")),
                         str(problem.get("type", "about:blank")), problem.get("field"), problem)
