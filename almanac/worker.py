"""The composition root: wires the database, the clock, the sandbox and the scheduler.

`build_services()` is called by `almanac serve` (through the web app factory) and by
`almanac worker`; nothing else constructs these parts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from almanac.db import Database
from almanac.platform.clock import Clock, SystemClock
from almanac.settings import Settings

log = logging.getLogger("almanac.worker")


@dataclass
class Services:
    settings: Settings
    db: Database
    clock: Clock
    scheduler: Any = None  # the timer pool, with start(), stop(), wake(slug)
    runner: Any = None  # the platform's Runner, backed by the sandbox
    extras: dict[str, Any] = field(default_factory=dict)

    def wake(self, slug: str) -> None:
        if self.scheduler is not None:
            self.scheduler.wake(slug)

    def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        self.db.dispose()


def build_services(settings: Settings, *, clock: Clock | None = None) -> Services:
    return Services(settings=settings, db=Database(settings), clock=clock or SystemClock())


def run_worker(settings: Settings) -> None:
    """`almanac worker`: the scheduler and script runner alone, until interrupted."""
    raise NotImplementedError("the scheduler lands with issue 5")
