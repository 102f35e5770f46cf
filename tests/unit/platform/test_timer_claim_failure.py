"""A claim that fails (the database away, a tenant dropped) is tried again a second later, not at once:
before, the per-tenant path kept the tenant due and the claim loop spun on it, logging each failure."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from almanac.platform.clock import ManualClock
from almanac.platform.runner import FunctionRunner
from almanac.platform.timer.scheduler import Scheduler

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


class Broken:
    """A store whose every claim fails."""

    lease_margin_s = 30.0

    def __init__(self) -> None:
        self.claims = 0

    def claim_due(self, tenant: str, now: datetime, limit: int) -> Any:
        self.claims += 1
        raise RuntimeError("the database is restarting")


def test_a_failed_claim_is_looked_at_again_a_second_later() -> None:
    store = Broken()
    timer = Scheduler(store, FunctionRunner(lambda *a: None), ManualClock(NOW), lambda: ["t"], workers=2)  # type: ignore[arg-type]
    timer._claim_pass(NOW)
    assert store.claims == 1
    with timer._cond:
        again, _ = timer.path.next_look(NOW)
    assert again == NOW + timedelta(seconds=1)
    timer._claim_pass(NOW + timedelta(milliseconds=500))  # not due yet: no second claim
    assert store.claims == 1
