"""The delivery loop: per tenant, fan out new events, claim due deliveries, send, record.

`run_once(now)` is one pass over the tenants (tests drive it with a manual clock); `start()`
runs passes in a background thread until `stop()`, waiting `poll_s` between idle passes unless
`wake(slug)` cuts the wait short. Which tenants: every one of `tenant_slugs()` each pass by
default (SQLite: one process, tenant files); with `signals` (PostgreSQL, where a thousand idle
tenants looked at every second cost two thousand transactions a second) only the tenants whose
events and deliveries signalled work (`signals.take`, settled once looked at, so that a dispatcher
that died or a look that failed leaves them to fall due again) and those whose last pass was cut short
by a batch limit. Sends of one pass go out on a small thread pool; nothing here
touches the web server's event loop. Any number of dispatchers may share a database: leases and
unique keys keep each attempt to one of them.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Callable

from almanac.db import Database
from almanac.delivery import fanout, signals as signals_mod, store
from almanac.delivery.policy import DeliveryConfig
from almanac.delivery.metrics import get_delivery_metrics
from almanac.delivery.sending import DefaultSender, Result, Sender
from almanac.vault import keyring

log = logging.getLogger("almanac.delivery")


class Dispatcher:
    def __init__(self, db: Database, clock: Any, settings: Any, tenant_slugs: Callable[[], list[str]], *,
                 sender: Sender | None = None, config: DeliveryConfig | None = None,
                 rng: random.Random | None = None, signals: bool = False) -> None:
        self.db, self.clock, self.settings, self.tenant_slugs = db, clock, settings, tenant_slugs
        self.signals = signals
        self._again: set[str] = set()  # (signals) tenants whose last pass hit a batch limit
        self.config = config or DeliveryConfig.from_settings(settings)
        self.sender = sender or DefaultSender(self.config, settings)
        self.rng = rng or random.Random()
        self._pool = ThreadPoolExecutor(max_workers=self.config.threads, thread_name_prefix="almanac-delivery-send")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="almanac-delivery", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout if timeout is not None else self.config.timeout_s + 5)
            self._thread = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    def wake(self, slug: str | None = None) -> None:
        """New events or a manual retry in a tenant: pass again now rather than after poll_s."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                done = self.run_once(self.clock.now())
            except Exception:  # a bad pass must not end deliveries for good
                log.exception("delivery.pass_failed", extra={"event": "delivery.pass_failed"})
                done = 0
            if not done:
                self._wake.wait(self.config.poll_s)
            self._wake.clear()

    # -- one pass ----------------------------------------------------------------------

    def run_once(self, now: datetime) -> int:
        """Fan out and deliver what is due in every tenant; returns fan-outs plus attempts made."""
        total = 0
        taken = self._taken(now)
        looked: list[int] = []  # the signals of the tenants looked at: settled at the end of the pass
        for slug in sorted(taken):
            if self._stop.is_set():
                break
            try:
                total += self.run_tenant(slug, now)
                looked += taken[slug]
            except Exception:  # one tenant's trouble (e.g. not yet migrated) must not stop the others
                log.exception("delivery.tenant_failed", extra={"event": "delivery.tenant_failed", "tenant": slug})
        if self.signals:
            signals_mod.settle(self.db, looked)
        return total

    def _taken(self, now: datetime) -> dict[str, list[int]]:
        """The tenants of this pass, each with the signals that brought it (none: held, or the batch limit)."""
        if not self.signals:
            return {slug: [] for slug in self.tenant_slugs()}
        taken: dict[str, list[int]] = {slug: [] for slug in self._again}
        self._again = set()
        for slug, ids in signals_mod.take(self.db, now).items():
            taken.setdefault(slug, []).extend(ids)
        return taken

    def run_tenant(self, slug: str, now: datetime) -> int:
        with self.db.tenant_session(slug) as session:
            added = fanout.fan_out(session, now=now, limit=self.config.fanout_batch)
        with self.db.tenant_session(slug) as session:
            claimed = store.claim_due(session, slug, now, self.config)
        if self.signals and (added >= self.config.fanout_batch or len(claimed) >= self.config.batch):
            self._again.add(slug)  # its signals were taken with this pass: look again at once
        results = list(self._pool.map(self._send, claimed))
        finished = self.clock.now()  # the retry is planned from when the attempt ended
        for item, result in zip(claimed, results):
            with self.db.tenant_session(slug) as session:
                status = store.record(session, item, result, finished, self.config, self.rng)
            get_delivery_metrics().observe(status, result.latency_ms)
            log.info("delivery.%s", status or "fenced", extra={
                "event": f"delivery.{status or 'fenced'}", "tenant": slug, "delivery_id": item.job.delivery_id,
                "attempt": item.attempts, "status_code": result.status_code, "latency_ms": result.latency_ms})
        return added + len(claimed)

    def _send(self, item: store.Claimed) -> Result:
        try:
            job = item.job
            if job.secret is not None and job.secret.startswith(keyring.PREFIX):  # stored encrypted
                job = dataclasses.replace(job, secret=keyring.for_settings(self.settings).decrypt(job.secret))
            return self.sender.send(job)
        except Exception as exc:  # a sender bug is recorded on the delivery, not lost with the thread
            log.exception("delivery.sender_crashed", extra={"event": "delivery.sender_crashed"})
            return Result(ok=False, latency_ms=0, error=f"internal error: {type(exc).__name__}")
