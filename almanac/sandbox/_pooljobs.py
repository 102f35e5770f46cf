"""A ``SandboxPool``'s jobs: what it queues for its workers, and what the caller gets back
when the sandbox (not the script) ends one, or when a worker answers a syntax check.

A job is a run (a ``contract.RunRequest`` and the caller's ``Capabilities``, which answer
its remote calls) or a syntax check; ``done`` is called once with its ``RunResult`` or
``SyntaxProblem`` (None: the script parses).
"""

from __future__ import annotations

from typing import Any, Callable

from .capabilities import Capabilities
from .contract import RunRequest, ended
from .runtime import SyntaxProblem


class Job:
    __slots__ = ("id", "kind", "request", "caps", "done", "state")

    def __init__(self, job_id: int, kind: str, request: RunRequest, caps: Capabilities | None,
                 done: Callable[[Any], None]) -> None:
        self.id, self.kind, self.request = job_id, kind, request
        self.caps, self.done = caps, done
        self.state = "waiting"  # -> "ticketed" (in the socket or running: its worker's slot says which)

    def ended(self, status: str, error: str, duration_ms: int = 0) -> Any:
        """What the caller gets when the sandbox, not the script, ended the job."""
        if self.kind == "check":
            return SyntaxProblem("the sandbox could not check this script", 1, 1)
        return ended(status, error, duration_ms)


def problem_from(value: Any) -> SyntaxProblem | None:
    """A worker's ``checked`` payload as a ``SyntaxProblem`` (None: it parses)."""
    if value is None:
        return None
    return SyntaxProblem(str(value["message"]), int(value["line"]), int(value["column"]))
