"""How the platform reaches scripts: a small protocol that `almanac.worker` fills with the sandbox.

A run is the sandbox's one contract (`almanac.sandbox.contract`, pure data the platform may
import): a `RunRequest` in, one `RunResult` out, carrying the run's buffered effects. The
platform never imports the rest of the sandbox; tests fill the protocol with a Python callable.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

from almanac import jsonsafe
from almanac.sandbox.contract import RunRequest, RunResult
from almanac.sandbox.effects import RunBuffer
from almanac.sandbox.capabilities import BY_OP

OUTPUT_MAX = 64 * 1024
LOGS_MAX = 64 * 1024


def storable(result: RunResult) -> RunResult:
    """What a runner handed back, made fit for a row (whatever the runner: the sandbox, a test's function).

    Output must be safe JSON (`almanac.jsonsafe`) of at most 64 KiB: otherwise the run is `failed`, with
    the reason, and nothing it did applies. Error messages and logs are diagnostics: lone surrogates in
    them become U+FFFD and each is capped at 64 KiB. A run refused by a platform limit that did not
    succeed says so and is not retried.
    """
    status, output, error, effects, reason = result.status, result.output, result.error, result.effects, result.reason
    if output is not None:
        try:
            jsonsafe.dumps(output, "the output", OUTPUT_MAX)
        except jsonsafe.Unsafe as exc:
            status, output, reason = "failed", None, f"the script's output cannot be stored: {exc}"
            error = f"{exc}" if error is None else error
    if status != "succeeded":
        effects = dataclasses.replace(effects, kv={}, events=(), jobs={}) if effects else effects
        if result.refused is not None:
            reason = f"refused by a platform limit ({result.refused}); not retried"
    error = None if error is None else jsonsafe.clean_text(str(error))
    kept, size = [], 0
    for line in result.logs:
        line = jsonsafe.clean_text(str(line), LOGS_MAX)
        size += len(line.encode()) + 1
        if size > LOGS_MAX:
            kept.append("[truncated]")
            break
        kept.append(line)
    return dataclasses.replace(result, status=status, output=output, error=error, logs=tuple(kept),
                               effects=effects, reason=reason)


def retried(result: RunResult) -> bool:
    """Whether the run's policy may retry it: not when a platform limit refused it (trying again cannot help)."""
    return result.refused is None


def broken(exc: Exception) -> RunResult:
    """The result of a run the runner itself could not carry out: the run failed, the platform goes on."""
    return RunResult("failed", error=f"the platform could not run the script: {type(exc).__name__}")


class Runner(Protocol):
    def run(self, request: RunRequest, caps: Any) -> RunResult:
        """Run the request's script on its event within its limits; never raises for the script's faults.

        `caps` answers the run's remote reads (`effects.TenantReads`); its writes come back in the result.
        """

    def check_syntax(self, source: str) -> tuple[str, int | None, int | None] | None:
        """(message, line, column) of the first syntax error, or None."""

    # Optional: `prepare()`, called by the scheduler's loop before its first claim; it may
    # block until scripts can run (the worker's runner waits for its sandbox processes).
    # Optional: `submit(request, caps, done)`, which starts the run and returns at once;
    # `done(result)` is called once, from any thread, when it ends.
    # The scheduler then needs no thread per run (without it, `run` is called on a thread pool).


class FunctionRunner:
    """A Runner backed by a Python function `(source, event, caps) -> output` (tests, benchmarks).

    `caps` is the sandbox's own run buffer over the platform's reads, so the function's writes
    are buffered and applied exactly as a script's are.
    """

    def __init__(self, fn: Callable[[str, dict[str, Any], Any], Any]) -> None:
        self.fn = fn

    def run(self, request: RunRequest, caps: Any) -> RunResult:
        buffer = RunBuffer(caps)
        try:
            output = self.fn(request.source, request.event, _Calls(buffer, request.limits.kv_value_bytes))
        except Exception as exc:  # the "script" threw: that is a failed run, not ours
            status = getattr(exc, "status", "failed")
            return RunResult(status, error=f"{type(exc).__name__}: {exc}", refused=buffer.refused)
        return RunResult("succeeded", output=output, effects=buffer.effects())

    def check_syntax(self, source: str) -> tuple[str, int | None, int | None] | None:
        return None


class _Calls:
    """A Python function's view of the capabilities: each registry entry's check, then the run's buffer."""

    def __init__(self, buffer: RunBuffer, limit: int) -> None:
        self._buffer, self._limit, self._ops = buffer, limit, BY_OP

    def _call(self, op: str, *args: Any) -> Any:
        capability = self._ops[op]
        return self._buffer.serve(capability, capability.check(*args, self._limit))

    def kv_get(self, key: str) -> Any:
        return self._call("kv.get", key)

    def kv_set(self, key: str, value: Any) -> None:
        return self._call("kv.set", key, value)

    def kv_delete(self, key: str) -> None:
        return self._call("kv.delete", key)

    def kv_list(self, prefix: str = "") -> list[str]:
        return self._call("kv.list", prefix)

    def emit(self, topic: str, data: Any = None) -> None:
        return self._call("emit", topic, data)

    def schedule_at(self, when: str, payload: Any = None, key: str | None = None) -> dict[str, Any]:
        return self._call("schedule.at", when, payload, key)
