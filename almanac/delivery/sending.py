"""What a sender gets and gives back, and the default sender that picks webhook or e-mail.

Senders run outside any transaction, in the dispatcher's threads; they never raise for a
receiver's fault, they return a failed `Result`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from almanac.delivery.policy import DeliveryConfig
from almanac.delivery.models import WEBHOOK


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


class DefaultSender:
    """Webhooks over HTTP(S) with the address guard; e-mail through the operator's SMTP server."""

    def __init__(self, cfg: DeliveryConfig, settings: Any, resolver: Any = None) -> None:
        from almanac.delivery import email, webhook
        from almanac.egress import netguard

        self._webhook = webhook.WebhookSender(
            timeout_s=cfg.timeout_s, allow_private=settings.allow_private_targets,
            resolver=resolver or netguard.system_resolver)
        self._email = email.EmailSender.from_settings(settings, timeout_s=cfg.timeout_s)

    def send(self, job: Job) -> Result:
        return (self._webhook if job.kind == WEBHOOK else self._email).send(job)
