"""The timer's recorder: finished runs recorded many per transaction, each fenced by its own lease token.

One recorder thread per timer takes whatever has finished and records it through the
timer's claim path (`ClaimPath.record`: a transaction per tenant, or per lane across
tenants); what that could not record is recorded one by one, and a run whose own record
fails is ended `failed` with the reason (SPEC section 9: never left `running`). Then the
run slots go back to the timer (`release`) and the tenants whose follow-ups may be due
are looked at again (`wake`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from collections.abc import Callable

from almanac.platform.decisions.pacing import EndRate
from almanac.platform.store.contract import Claim, Store
from almanac.platform.timer.claim_paths import ClaimPath
from almanac.platform.timer.metrics import SchedulerMetrics
from almanac.sandbox.contract import RunResult

log = logging.getLogger("almanac.scheduler")

RECORD_BATCH = 256  # finished runs recorded in one transaction, at most
RECORD_LINGER_S = 0.02  # while other runs are out, the recorder waits this long to gather more records


@dataclass(frozen=True)
class Finished:
    """A run that has ended and waits for its record."""

    claim: Claim
    result: RunResult  # as it will be recorded (`runner.storable`), its buffered effects included
    started: datetime
    finished_at: datetime
    elapsed_s: float


class Recorder:
    """The recorder thread of one timer, and the record of one run (`finish_one`, `after_record`)."""

    def __init__(self, path: ClaimPath, store: Store, metrics: SchedulerMetrics, *,
                 release: Callable[[list[Claim]], None], wake: Callable[[str], None], busy: Callable[[], bool],
                 linger_s: float = RECORD_LINGER_S, ends: EndRate | None = None) -> None:
        self.path, self.store, self.metrics = path, store, metrics
        self.release, self.wake, self.busy = release, wake, busy  # busy: other runs are out
        self.linger_s = linger_s
        self.ends = ends or EndRate()
        self._finished: queue.Queue[Finished | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="almanac-recorder", daemon=True)
            self._thread.start()

    def put(self, done: Finished) -> None:
        self._finished.put(done)

    def stop(self, timeout: float) -> None:
        """After every run was put: the recorder records them all, then ends."""
        if self._thread is not None:
            self._finished.put(None)
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            items = [self._finished.get()]
            if items[0] is not None and self.busy() and self.linger_s > 0:
                # Other runs are out: let a few of them finish too, so that one transaction records
                # many (each transaction costs about as much CPU as a dozen of its records).
                time.sleep(self.linger_s)
            while len(items) < RECORD_BATCH:
                try:
                    items.append(self._finished.get_nowait())
                except queue.Empty:
                    break
            stopping = None in items
            self.record_done([item for item in items if item is not None])

    def record_done(self, done: list[Finished]) -> None:
        """Record these finished runs through the claim path, and give their slots back."""
        if not done:
            return
        self.ends.ended(time.monotonic(), len(done))
        try:
            applied = self.path.record([(d.claim, d.result, d.started, d.finished_at) for d in done])
        except Exception:  # never let the recorder die: each is recorded alone below
            log.exception("run.batch_record_failed", extra={"event": "run.batch_record_failed", "runs": len(done)})
            applied = [None] * len(done)
        wake: set[str] = set()
        try:
            for d, ok in zip(done, applied):
                if ok is None:
                    ok = self.finish_one(d)
                if ok is not None and self.after_record(d, ok):
                    wake.add(d.claim.tenant)
        finally:  # the slots come back whatever happened
            self.release([d.claim for d in done])
        for tenant in wake:
            self.wake(tenant)

    def finish_one(self, d: Finished) -> bool | None:
        """Record one run; if that fails, end it `failed` with the reason (SPEC section 9).

        None when even that failed (the database is gone, say): the lease then lapses and
        the next claim ends the attempt.
        """
        try:
            return self.store.finish(d.claim, d.result, d.started, d.finished_at)
        except Exception as exc:
            log.exception("run.record_failed", extra={"event": "run.record_failed", "run_id": d.claim.run_id})
            problem = exc
        try:
            return self.store.finish_unrecordable(d.claim, d.result, d.started, problem, d.finished_at)
        except Exception:
            log.exception("run.record_failed", extra={"event": "run.record_failed", "run_id": d.claim.run_id})
            return None

    def after_record(self, done: Finished, applied: bool) -> bool:
        """Metrics and the run's log line; True if the tenant should be looked at again now."""
        claim, outcome = done.claim, done.result
        self.metrics.runs_with(outcome.status if applied else "fenced").inc()
        self.metrics.duration.observe(done.elapsed_s)
        if log.isEnabledFor(logging.INFO):
            log.info("run.finished", extra={
                "event": "run.finished", "tenant": claim.tenant, "run_id": claim.run_id,
                "schedule_id": claim.schedule_id, "job_key": claim.job_key, "attempt": claim.attempt,
                "status": outcome.status, "applied": applied, "duration_ms": outcome.duration_ms,
                "lag_s": round((done.started - claim.scheduled_for).total_seconds(), 3),
            })
        # Follow-ups, or occurrences queued behind this one, may be due now.
        return applied and bool(done.result.effects.jobs or claim.schedule_id is not None)
