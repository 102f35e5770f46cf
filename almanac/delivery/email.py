"""One e-mail attempt: render the target's templates (capped child process), send through the
operator's SMTP server. The SMTP server is the operator's, not the tenant's, so no address
guard applies here; recipients were validated when the target was saved.

Settings: smtp_host, smtp_port, smtp_from, and when present smtp_username, smtp_password,
smtp_starttls (ALMANAC_SMTP_*).
"""

from __future__ import annotations

import smtplib
import socket
import time
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

from almanac.delivery import templates
from almanac.delivery.attempt import Job, Result

EXCERPT_MAX = 300


class EmailSender:
    def __init__(self, *, host: str, port: int, sender: str, timeout_s: float, username: str | None = None,
                 password: str | None = None, starttls: bool = False) -> None:
        self.host, self.port, self.sender, self.timeout_s = host, port, sender, timeout_s
        self.username, self.password, self.starttls = username, password, starttls

    @classmethod
    def from_settings(cls, settings: Any, *, timeout_s: float) -> "EmailSender":
        return cls(host=settings.smtp_host, port=settings.smtp_port, sender=settings.smtp_from, timeout_s=timeout_s,
                   username=getattr(settings, "smtp_username", None), password=getattr(settings, "smtp_password", None),
                   starttls=bool(getattr(settings, "smtp_starttls", False)))

    def message(self, job: Job) -> EmailMessage:
        subject, body = templates.render(job.subject_template or templates.DEFAULT_SUBJECT,
                                         job.body_template or templates.DEFAULT_BODY, {"event": job.payload})
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = self.sender, ", ".join(job.recipients), subject
        msg["Message-ID"] = make_msgid(domain="almanac")
        # The event id lets a mail filter or a person spot a redelivered message.
        msg["X-Almanac-Event-Id"], msg["X-Almanac-Topic"] = job.payload["id"], job.payload["topic"]
        msg.set_content(body)
        return msg

    def send(self, job: Job) -> Result:
        started = time.monotonic()
        try:
            msg = self.message(job)
        except templates.RenderError as exc:
            return Result(ok=False, latency_ms=_ms(started), error=f"template: {exc}"[:EXCERPT_MAX])
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout_s) as smtp:
                if self.starttls:
                    smtp.starttls()
                if self.username:
                    smtp.login(self.username, self.password or "")
                refused = smtp.send_message(msg, from_addr=self.sender, to_addrs=list(job.recipients))
        except smtplib.SMTPResponseException as exc:
            text = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
            return Result(ok=False, latency_ms=_ms(started), status_code=exc.smtp_code,
                          error=f"SMTP {exc.smtp_code}: {text}"[:EXCERPT_MAX])
        except (smtplib.SMTPException, OSError, socket.timeout) as exc:
            return Result(ok=False, latency_ms=_ms(started), error=f"{type(exc).__name__}: {exc}"[:EXCERPT_MAX])
        # Some recipients refused while others took it: a retry would duplicate for the others,
        # so it counts as delivered and the refusal is kept for people to read.
        note = f"refused by some recipients: {sorted(refused)}"[:EXCERPT_MAX] if refused else None
        return Result(ok=True, latency_ms=_ms(started), status_code=250, error=note)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
