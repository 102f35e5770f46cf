"""Operations endpoints: liveness, readiness, Prometheus metrics (SPEC section 13)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from sqlalchemy import text

from almanac.errors import AlmanacError
from almanac.platform.metrics import sandbox_workers
from almanac.web.deps import ServicesDep

router = APIRouter(tags=["operations"])


class NotReady(AlmanacError):
    code, status = "not_ready", 503


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(services: ServicesDep) -> dict[str, str]:
    try:
        with services.db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means "not ready", with the reason
        raise NotReady(f"The database is not reachable: {type(exc).__name__}.") from exc
    return {"status": "ready"}


@router.get("/metrics")
def metrics(services: ServicesDep) -> Response:
    # The runner in use now (tests swap it): its pool's counts, or none for a runner without a pool.
    counts = getattr(services.runner, "worker_counts", None)
    sandbox_workers().source = counts if callable(counts) else None
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
