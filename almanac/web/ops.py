"""Operations endpoints: liveness, readiness, Prometheus metrics (SPEC section 13)."""

from __future__ import annotations

import threading

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest
from sqlalchemy import text

from almanac.errors import AlmanacError
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


_ALIVE: list[Gauge] = []
_ALIVE_LOCK = threading.Lock()


def _alive_gauge() -> Gauge:
    with _ALIVE_LOCK:
        if not _ALIVE:
            _ALIVE.append(Gauge("almanac_sandbox_workers_alive", "Sandbox worker processes alive in this process's pool"))
        return _ALIVE[0]


@router.get("/metrics")
def metrics(services: ServicesDep) -> Response:
    # The pool exposes only its workers' pids publicly; recycled and lost workers are not counted (yet).
    pids = getattr(services.runner, "worker_pids", None)
    _alive_gauge().set(len(pids()) if callable(pids) else 0)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
