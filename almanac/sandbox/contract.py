"""The one run contract: a ``RunRequest`` in, one ``RunResult`` (with its buffered ``Effects``) out.

The same ``RunResult`` goes from the sandbox (``runtime``) through the pool's pipe
(``to_wire`` / ``from_wire``: plain JSON, never pickle) to the platform, which
checks it fit for a row (``dataclasses.replace``, never a second type) and records
it, applying its effects in the transaction that records the run.

Effects are what the run's writes (``capabilities.REGISTRY`` entries with
``writes=True``: kv set/delete, emit, schedule.at) left behind, already checked
and measured (``jsonsafe``; sizes are UTF-8 bytes of the stored JSON) and kept as
stored JSON text.  A run that does not succeed carries none: it applies nothing.

This module is pure data: the platform imports it (and nothing else of the
sandbox) without loading wasmtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .limits import Limits

STATUSES = ("succeeded", "failed", "timed_out", "memory_exceeded")


@dataclass(frozen=True)
class RunRequest:
    """One run: the script, its caps, the event it is given, and which capabilities it may call.

    ``may`` names the registry ops the run may call (None: every op in the registry);
    any other op is refused inside the script, as an unknown one is.
    """

    source: str
    event: dict[str, Any]
    limits: Limits = field(default_factory=Limits)
    may: frozenset[str] | None = None

    def to_wire(self) -> list:
        return [self.source, self.event, vars(self.limits), None if self.may is None else sorted(self.may)]

    @classmethod
    def from_wire(cls, fields: Any) -> "RunRequest":
        source, event, limits, may = fields
        return cls(source, event, Limits(**limits), None if may is None else frozenset(may))


@dataclass(frozen=True)
class Effects:
    """A run's buffered writes, in the form they are stored.

    ``kv``: key -> stored JSON text, or None for a delete (the last write of each key wins);
    ``events``: (topic, stored JSON data) in emit order;
    ``jobs``: key -> (run_at as ISO-8601 UTC with ``Z``, stored JSON payload) (the last upsert wins).
    """

    kv: dict[str, str | None] = field(default_factory=dict)
    events: tuple[tuple[str, str], ...] = ()
    jobs: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.kv or self.events or self.jobs)

    def to_wire(self) -> dict[str, Any]:
        return {"kv": self.kv, "events": [list(e) for e in self.events], "jobs": {k: list(v) for k, v in self.jobs.items()}}

    @classmethod
    def from_wire(cls, fields: Any) -> "Effects":
        kv, events, jobs = fields["kv"], fields["events"], fields["jobs"]
        if not isinstance(kv, dict) or not all(isinstance(v, str) or v is None for v in kv.values()):
            raise ValueError("malformed effects")
        built = cls(dict(kv), tuple((str(t), str(d)) for t, d in events),
                    {str(k): (str(w), str(p)) for k, (w, p) in jobs.items()})
        return built


NO_EFFECTS = Effects()


@dataclass(frozen=True)
class RunResult:
    """How one run ended, and what it leaves to apply.

    ``logs`` are the run's log lines.  ``refused`` names a platform limit a call of the
    run was refused for (such a run is not retried: trying again cannot help);
    ``reason`` says why the run ended when that is not the plain ending of its status.
    ``cpu_ms`` is the CPU time of the thread that ran it (host calls included; None: not measured).

    Two fields are the host's, filled where the run was handed over, not by the sandbox (so they
    do not cross the pool's pipe): ``http``, the records of the run's fetches (they happened
    during the run, whatever its status; they are not buffered writes), and ``event``, what the
    script was given (kept on the run's record).
    """

    status: str  # one of STATUSES
    output: Any = None
    error: str | None = None
    error_line: int | None = None
    error_column: int | None = None
    logs: tuple[str, ...] = ()
    duration_ms: int = 0
    error_stack: str | None = None
    effects: Effects = NO_EFFECTS
    refused: str | None = None
    reason: str | None = None
    cpu_ms: int | None = None
    http: tuple[dict[str, Any], ...] = ()
    event: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        fields = {name: getattr(self, name) for name in _PLAIN}
        fields["logs"] = list(self.logs)
        fields["effects"] = self.effects.to_wire() if self.effects else None
        return fields

    @classmethod
    def from_wire(cls, fields: Any) -> "RunResult":
        """A worker's result; ValueError if it is not one."""
        try:
            plain = {name: fields[name] for name in _PLAIN}
            effects = fields["effects"]
            result = cls(**plain, logs=tuple(str(line) for line in fields["logs"]),
                         effects=NO_EFFECTS if effects is None else Effects.from_wire(effects))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("malformed result") from exc
        if result.status not in STATUSES:
            raise ValueError("malformed result")
        return result


_PLAIN = ("status", "output", "error", "error_line", "error_column", "duration_ms", "error_stack",
          "refused", "reason", "cpu_ms")


def ended(status: str, error: str, duration_ms: int = 0) -> RunResult:
    """A run the sandbox (not the script) ended: nothing ran to completion, nothing applies."""
    return RunResult(status, error=error, duration_ms=duration_ms)
