"""The default sender, which picks webhook or e-mail; the attempt's contract (`Job`, `Result`,
`Sender`) is `attempt`'s, named here too for the modules that send.
"""

from __future__ import annotations

from typing import Any

from almanac.delivery import email, webhook
from almanac.delivery.attempt import Job, Result, Sender
from almanac.delivery.models import WEBHOOK
from almanac.delivery.policy import DeliveryConfig
from almanac.egress import netguard

__all__ = ["DefaultSender", "Job", "Result", "Sender"]


class DefaultSender:
    """Webhooks over HTTP(S) with the address guard; e-mail through the operator's SMTP server."""

    def __init__(self, cfg: DeliveryConfig, settings: Any, resolver: Any = None) -> None:
        self._webhook = webhook.WebhookSender(
            timeout_s=cfg.timeout_s, allow_private=settings.allow_private_targets,
            resolver=resolver or netguard.system_resolver)
        self._email = email.EmailSender.from_settings(settings, timeout_s=cfg.timeout_s)

    def send(self, job: Job) -> Result:
        return (self._webhook if job.kind == WEBHOOK else self._email).send(job)
