"""Helpers of the delivery tests: real local HTTP and SMTP receivers, events, a dispatcher."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from almanac.vault import keyring
from almanac.delivery import targets
from almanac.delivery.models import Delivery, DeliveryAttempt
from almanac.platform.store.models import Event, Run

HANG_S = 2.0  # longer than the tests' 0.5 s delivery timeout
SLOW_S = 0.2  # shorter than it


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A real HTTP server on loopback. Paths: /ok, /fail (500), /hang, /slow, /busy (503 + Retry-After),
    /redirect (302 to /ok, which must not be followed), /flaky (500 until `flaky_left` runs out)."""

    def __init__(self) -> None:
        self.got: list[Received] = []
        self.flaky_left = 0
        # When set, only events with this `data` fail on /flaky: requests sent side by side race,
        # so "the first request fails" would pick a different event from run to run.
        self.flaky_data: Any = None
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                owner.got.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                owner.answer(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _flaky_matches(self) -> bool:
        return self.flaky_data is None or json.loads(self.got[-1].body).get("data") == self.flaky_data

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        if path == "/hang":
            time.sleep(HANG_S)
        if path == "/slow":
            time.sleep(SLOW_S)
        if path == "/flaky" and self.flaky_left > 0 and self._flaky_matches():
            self.flaky_left -= 1
            path = "/fail"
        status, extra = {"/fail": (500, {}), "/busy": (503, {"Retry-After": "120"}),
                         "/redirect": (302, {"Location": self.base + "/ok"})}.get(path, (200, {}))
        try:
            handler.send_response(status)
            for key, value in extra.items():
                handler.send_header(key, value)
            handler.send_header("Content-Length", "2")
            handler.end_headers()
            handler.wfile.write(b"ok" if status == 200 else b"no")
        except OSError:
            pass  # the client gave up (hang): nothing to answer

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.refuse = False

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        if self.refuse:
            return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(envelope)
        return "250 Message accepted"


class SmtpServer:
    """A real SMTP server (aiosmtpd) on loopback."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.box = _Mailbox()
        self.controller = Controller(self.box, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def close(self) -> None:
        self.controller.stop()


@dataclass
class World:
    db: Any
    tenant: str
    clock: Any
    dispatcher: Any
    runs: dict[int, int] = field(default_factory=dict)

    def add_target(self, **fields: Any) -> tuple[int, str | None]:
        with self.db.tenant_session(self.tenant) as s:
            row, secret = targets.create(s, fields, now=self.clock.now(), allow_private=True,
                                         keyring=keyring.for_settings(self.db.settings))
            return row.id, secret

    def emit(self, topic: str, data: Any, *, schedule_id: int | None = 1) -> int:
        """An event as the scheduler writes it: with a succeeded run of the schedule."""
        now = self.clock.now()
        with self.db.tenant_session(self.tenant) as s:
            run = Run(schedule_id=schedule_id, trigger="schedule", scheduled_for=now, created_at=now,
                      status="succeeded", attempt=1)
            s.add(run)
            s.flush()
            event = Event(run_id=run.id, topic=topic, data=json.dumps(data), created_at=now, attempts=0)
            s.add(event)
            s.flush()
            return event.id

    def deliveries(self) -> list[Delivery]:
        with self.db.tenant_session(self.tenant) as s:
            return list(s.query(Delivery).order_by(Delivery.id))

    def attempts(self, delivery_id: int) -> list[DeliveryAttempt]:
        with self.db.tenant_session(self.tenant) as s:
            return list(s.query(DeliveryAttempt).filter_by(delivery_id=delivery_id).order_by(DeliveryAttempt.id))

    def step(self, seconds: float = 0) -> int:
        if seconds:
            self.clock.advance(seconds)
        return self.dispatcher.run_once(self.clock.now())

    def until_next(self) -> int:
        """Move the clock to the earliest planned retry and pass."""
        due = [d.next_attempt_at for d in self.deliveries() if d.status in ("failed", "delivering")]
        self.clock.set(min(due))
        return self.dispatcher.run_once(self.clock.now())
