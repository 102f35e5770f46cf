"""Operations endpoints: liveness, readiness, Prometheus metrics (SPEC section 13)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from sqlalchemy import text

from almanac.delivery.metrics import get_delivery_metrics
from almanac.errors import AlmanacError
from almanac.platform.timer.metrics import sandbox_workers
from almanac.web.deps import ServicesDep

router = APIRouter(tags=["operations"])


class NotReady(AlmanacError):
    code, status = "not_ready", 503


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    # On the event loop, not the thread pool: alive means answering, however busy the pool's threads are.
    return {"status": "ok"}


@router.get("/readyz")
def readyz(services: ServicesDep) -> dict[str, str]:
    try:
        with services.db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means "not ready", with the reason
        raise NotReady(f"The database is not reachable: {type(exc).__name__}.") from exc
    return {"status": "ready"}


DELIVERY_STATUSES = ("succeeded", "failed", "dead")  # what an attempt can leave a delivery in


@router.get("/metrics")
def metrics(services: ServicesDep) -> Response:
    # Every family SPEC section 13 names is in the exposition from the first scrape, at zero, not only
    # once the first delivery was attempted (a dashboard's rate() needs the zero to start from).
    deliveries = get_delivery_metrics()
    for status in DELIVERY_STATUSES:
        deliveries.attempts.labels(status=status)
    # The runner in use now (tests swap it): its pool's counts, or none for a runner without a pool.
    counts = getattr(services.runner, "worker_counts", None)
    sandbox_workers().source = counts if callable(counts) else None
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
