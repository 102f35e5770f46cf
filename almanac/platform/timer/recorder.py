"""The timer's recorder: finished runs recorded many per transaction, each fenced by its own lease token.

Mixed into `timer.Scheduler` (which provides the store, the metrics, the queue of
finished runs and `_release` / `wake`). One recorder thread takes whatever has
finished, groups it by tenant and records each group in one transaction; a group
whose transaction fails is recorded one by one, and a run whose own record fails
is ended `failed` with the reason (SPEC section 9: never left `running`).
"""

from __future__ import annotations

import logging
import queue
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from almanac.platform.store.contract import Claim
from almanac.sandbox.contract import RunResult

log = logging.getLogger("almanac.scheduler")

RECORD_BATCH = 256  # finished runs recorded in one transaction, at most
RECORD_LINGER_S = 0.02  # while other runs are out, the recorder waits this long to gather more records


@dataclass(frozen=True)
class _Finished:
    """A run that has ended and waits for its record."""

    claim: Claim
    result: RunResult  # as it will be recorded (`runner.storable`), its buffered effects included
    started: datetime
    finished_at: datetime
    elapsed_s: float


class RecorderMixin:
    store: Any
    metrics: Any
    record_linger_s: float
    _finished: queue.Queue[Any]
    _inflight: int
    _thread: Any

    def _release(self, claims: list[Claim], *, recorded: bool = True) -> None:
        raise NotImplementedError

    def wake(self, tenant: str) -> None:
        raise NotImplementedError

    def _record_loop(self) -> None:
        stopping = False
        while not stopping:
            items = [self._finished.get()]
            if items[0] is not None and self._inflight > 1 and self.record_linger_s > 0:
                # Other runs are out: let a few of them finish too, so that one transaction records
                # many (each transaction costs about as much CPU as a dozen of its records).
                time.sleep(self.record_linger_s)
            while len(items) < RECORD_BATCH:
                try:
                    items.append(self._finished.get_nowait())
                except queue.Empty:
                    break
            stopping = None in items
            self._record_done([item for item in items if item is not None])

    def _record_done(self, done: list[_Finished]) -> None:
        """Record these finished runs, a transaction per tenant, and give their slots back."""
        by_tenant: dict[str, list[_Finished]] = {}
        for item in done:
            by_tenant.setdefault(item.claim.tenant, []).append(item)
        for group in by_tenant.values():
            try:
                self._record(group)
            except Exception:  # never let the recorder die: the slots must come back
                log.exception("run.record_failed", extra={"event": "run.record_failed"})
            finally:
                self._release([d.claim for d in group])

    def _record(self, group: list[_Finished]) -> None:
        """Record a tenant's finished runs in one transaction; if that fails, one by one."""
        try:
            applied: list[bool | None] = list(self.store.finish_many(
                [(d.claim, d.result, d.started, d.finished_at) for d in group]))
        except Exception:
            log.exception("run.batch_record_failed", extra={"event": "run.batch_record_failed", "runs": len(group)})
            # One bad record (say, an effect the database refuses) costs only its own run.
            applied = [self._finish_one(d) for d in group]
        wake = False
        for d, ok in zip(group, applied):
            if ok is not None:
                wake = self._after_record(d, ok) or wake
        if wake:
            self._wake_soon(group[0].claim.tenant)  # once for the group: its tenant is the same

    def _finish_one(self, d: _Finished) -> bool | None:
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

    def _after_record(self, done: _Finished, applied: bool) -> bool:
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

    def _wake_soon(self, tenant: str) -> None:
        if self._thread is not None:
            self.wake(tenant)

