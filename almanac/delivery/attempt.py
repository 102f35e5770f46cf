"""One delivery attempt as a sender sees it: the `Job` it is given, the `Result` it gives back, the `Sender` contract.

Senders run outside any transaction, in the dispatcher's threads; they never raise for a
receiver's fault, they return a failed `Result`. The webhook and e-mail senders implement it
(`webhook`, `email`); `sending.DefaultSender` picks one of them by the delivery's kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Job:
    delivery_id: int
    attempt: int
    kind: str
    payload: dict[str, Any]  # the event as receivers see it (built by store.payload)
    url: str | None = None
    secret: str | None = None
    recipients: tuple[str, ...] = ()
    subject_template: str | None = None
    body_template: str | None = None


@dataclass(frozen=True)
class Result:
    ok: bool
    latency_ms: int
    status_code: int | None = None
    error: str | None = None
    retry_after: str | None = None  # the raw header, read by the dispatcher with its clock
    extra: dict[str, Any] = field(default_factory=dict)


class Sender(Protocol):
    def send(self, job: Job) -> Result:
        """Make one attempt; return how it went."""
