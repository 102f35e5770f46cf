"""How the platform reaches scripts: a small protocol that `almanac.worker` fills with the sandbox.

The platform never imports the sandbox; tests fill the protocol with a Python callable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from almanac import jsonsafe

OUTCOME_STATUSES = ("succeeded", "failed", "timed_out", "memory_exceeded")


@dataclass(frozen=True)
class RunOutcome:
    status: str
    output: Any = None
    error: str | None = None
    error_line: int | None = None
    error_column: int | None = None
    logs: list[str] = field(default_factory=list)
    duration_ms: int = 0
    cpu_ms: int | None = None  # None: the runner does not measure it


OUTPUT_MAX = 64 * 1024
LOGS_MAX = 64 * 1024


def storable(status: str, output: Any, error: str | None, logs: list[str]) -> tuple[str, Any, str | None, list[str], str | None]:
    """What a runner handed back, made fit for a row (whatever the runner: the sandbox, a test's function).

    Output must be safe JSON (`almanac.jsonsafe`) of at most 64 KiB: otherwise the run is `failed`, with
    the reason, and nothing it did applies. Error messages and logs are diagnostics: lone surrogates in
    them become U+FFFD and each is capped at 64 KiB. Returns (status, output, error, logs, reason or None).
    """
    reason = None
    if output is not None:
        try:
            jsonsafe.dumps(output, "the output", OUTPUT_MAX)
        except jsonsafe.Unsafe as exc:
            status, output, reason = "failed", None, f"the script's output cannot be stored: {exc}"
            error = f"{exc}" if error is None else error
    error = None if error is None else jsonsafe.clean_text(str(error))
    kept, size = [], 0
    for line in logs:
        line = jsonsafe.clean_text(str(line), LOGS_MAX)
        size += len(line.encode()) + 1
        if size > LOGS_MAX:
            kept.append("[truncated]")
            break
        kept.append(line)
    return status, output, error, kept, reason


def broken(exc: Exception) -> RunOutcome:
    """The outcome of a run the runner itself could not carry out: the run failed, the platform goes on."""
    return RunOutcome("failed", error=f"the platform could not run the script: {type(exc).__name__}")


class Runner(Protocol):
    def run(self, source: str, event: dict[str, Any], timeout_ms: int, memory_mb: int, caps: Any) -> RunOutcome:
        """Run a script's default export on `event` within the limits; never raises for the script's faults."""

    def check_syntax(self, source: str) -> tuple[str, int | None, int | None] | None:
        """(message, line, column) of the first syntax error, or None."""

    # Optional: `prepare()`, called by the scheduler's loop before its first claim; it may
    # block until scripts can run (the worker's runner waits for its sandbox processes).
    # Optional: `submit(source, event, timeout_ms, memory_mb, caps, done)`, which starts the
    # run and returns at once; `done(outcome)` is called once, from any thread, when it ends.
    # The scheduler then needs no thread per run (without it, `run` is called on a thread pool).


class FunctionRunner:
    """A Runner backed by a Python function `(source, event, caps) -> output` (tests, benchmarks)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def run(self, source: str, event: dict[str, Any], timeout_ms: int, memory_mb: int, caps: Any) -> RunOutcome:
        try:
            return RunOutcome("succeeded", output=self.fn(source, event, caps))
        except Exception as exc:  # the "script" threw: that is a failed run, not ours
            status = getattr(exc, "status", "failed")
            return RunOutcome(status, error=f"{type(exc).__name__}: {exc}")

    def check_syntax(self, source: str) -> tuple[str, int | None, int | None] | None:
        return None
