"""Prometheus metrics of the scheduler (SPEC section 13).

Registered once per registry (the default one unless a test passes its own), so
building several schedulers in one process does not register names twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_LOCK = threading.Lock()
_BY_REGISTRY: dict[int, SchedulerMetrics] = {}

LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class SchedulerMetrics:
    runs: Counter
    duration: Histogram
    start_lag: Histogram
    backlog: Gauge
    _children: dict[str, Counter] = field(default_factory=dict, compare=False, repr=False)

    def runs_with(self, status: str) -> Counter:
        """`runs.labels(status=...)`, looked up once per status (labels() locks and validates every call)."""
        child = self._children.get(status)
        if child is None:
            child = self._children[status] = self.runs.labels(status=status)  # a race only looks it up twice
        return child

    def set_backlog(self, tenant_backlogs: dict[str, int]) -> None:
        # One gauge for the process: a label per tenant would grow with the tenants.
        self.backlog.set(sum(tenant_backlogs.values()))


def get_metrics(registry: CollectorRegistry | None = None) -> SchedulerMetrics:
    registry = registry or REGISTRY
    with _LOCK:
        found = _BY_REGISTRY.get(id(registry))
        if found is None:
            found = SchedulerMetrics(
                runs=Counter("almanac_runs", "Runs recorded, by status", ["status"], registry=registry),
                duration=Histogram("almanac_run_duration_seconds", "Wall time of script runs",
                                   buckets=DURATION_BUCKETS, registry=registry),
                start_lag=Histogram("almanac_run_start_lag_seconds",
                                    "Seconds between an occurrence's scheduled time and its start",
                                    buckets=LAG_BUCKETS, registry=registry),
                backlog=Gauge("almanac_due_backlog", "Occurrences due and not yet started", registry=registry),
            )
            _BY_REGISTRY[id(registry)] = found
        return found


WorkerCounts = Callable[[], dict[str, int]]  # {"alive", "recycled", "lost"}, as the sandbox pool reports them


class SandboxWorkers(Collector):
    """The sandbox pool's workers, read from the pool at scrape time (SPEC section 13).

    The pool keeps plain counters (the sandbox imports nothing of almanac, nor prometheus);
    whoever holds the runner points `source` at its `worker_counts`. No source: all zero.
    """

    def __init__(self) -> None:
        self.source: WorkerCounts | None = None

    def collect(self) -> Iterator[Metric]:
        counts = {"alive": 0, "recycled": 0, "lost": 0}
        source = self.source
        if source is not None:
            counts.update(source())
        yield GaugeMetricFamily("almanac_sandbox_workers_alive", "Sandbox worker processes alive in this "
                                "process's pool", value=counts["alive"])
        yield CounterMetricFamily("almanac_sandbox_workers_recycled", "Sandbox workers replaced after they "
                                  "said why (a time or memory trap, their run limit)", value=counts["recycled"])
        yield CounterMetricFamily("almanac_sandbox_workers_lost", "Sandbox workers that died or hung "
                                  "without saying why, and were replaced", value=counts["lost"])


_SANDBOX: dict[int, SandboxWorkers] = {}


def sandbox_workers(registry: CollectorRegistry | None = None) -> SandboxWorkers:
    """The registry's one sandbox-workers collector, registered on first use."""
    registry = registry or REGISTRY
    with _LOCK:
        found = _SANDBOX.get(id(registry))
        if found is None:
            found = _SANDBOX[id(registry)] = SandboxWorkers()
            registry.register(found)
        return found
