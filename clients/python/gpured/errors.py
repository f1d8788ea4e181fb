# errors.py: gpured.Error, the one exception the client raises, built from an RFC 9457 problem.
from __future__ import annotations

from typing import Any, Mapping, Optional


class Error(Exception):
    """A request gpured refused or could not answer.

    The members are the problem+json document's (docs/API.md: every error is one):
    ``status`` (the HTTP status; ``None`` when no answer came at all, e.g. the connection
    failed), ``title``, ``detail`` (what was wrong, in words), ``type``, ``field`` (the request
    member at fault, when the server names one) and ``problem`` (the whole document as a dict).
    A job that failed raises it with the job's ``error`` problem.
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
    def from_problem(cls, problem: Mapping[str, Any], status: Optional[int] = None) -> "Error":
        """The error a problem document describes (status from the document, else ``status``)."""
        st = problem.get("status")
        return cls(st if isinstance(st, int) else status, str(problem.get("title", "")),
                   str(problem.get("detail", "")), str(problem.get("type", "about:blank")),
                   problem.get("field"), problem)

    def __str__(self) -> str:
        head = "%s %s" % (self.status, self.title) if self.status is not None else self.title
        text = "%s: %s" % (head, self.detail) if self.detail else head
        return text + (" (field %s)" % self.field if self.field else "")
