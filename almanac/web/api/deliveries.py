"""Deliveries of events to targets (admin only): filter, read with attempts, retry by hand."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import BackgroundTasks, Query
from pydantic import BaseModel

from almanac.delivery import store, targets
from almanac.web.audit import audit
from almanac.jsonsafe import ID_MAX
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

router = api_router(prefix="", tags=["deliveries"], read="admin", write="admin")
Status = Literal["pending", "delivering", "succeeded", "failed", "dead"]


class AttemptOut(BaseModel):
    number: int
    at: datetime
    outcome: str
    status_code: int | None
    latency_ms: int
    error: str | None


class DeliveryOut(BaseModel):
    id: int
    event_id: int
    event_public_id: str | None
    target_id: int
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    last_latency_ms: int | None
    created_at: datetime
    updated_at: datetime
    attempt_log: list[AttemptOut] | None = None  # in the answer for one delivery


class DeliveryPage(BaseModel):
    items: list[DeliveryOut]
    next_cursor: int | None


def _out(row: Any, public_id: str | None, attempts: list[Any] | None = None) -> DeliveryOut:
    log = None if attempts is None else [AttemptOut.model_validate(a, from_attributes=True) for a in attempts]
    return DeliveryOut(
        id=row.id, event_id=row.event_id, event_public_id=public_id, target_id=row.target_id, status=row.status,
        attempts=row.attempts, next_attempt_at=row.next_attempt_at, last_status_code=row.last_status_code,
        last_error=row.last_error, last_latency_ms=row.last_latency_ms, created_at=row.created_at,
        updated_at=row.updated_at, attempt_log=log)


def _page(found: store.Page) -> DeliveryPage:
    return DeliveryPage(items=[_out(r, found.public_ids.get(r.event_id)) for r in found.rows],
                        next_cursor=found.next_cursor)


@router.get("/deliveries")
def list_deliveries(session: TenantSession, event_id: int | None = Query(default=None, ge=0, le=ID_MAX),
                    target_id: int | None = Query(default=None, ge=0, le=ID_MAX),
                    status: Status | None = None, cursor: int | None = Query(default=None, ge=0, le=ID_MAX),
                    limit: int = Query(default=50, ge=1, le=200)) -> DeliveryPage:
    return _page(store.page(session, event_id=event_id, target_id=target_id, status=status, before_id=cursor,
                            limit=limit))


@router.get("/deliveries/{delivery_id}")
def get_delivery(delivery_id: int, session: TenantSession) -> DeliveryOut:
    row = store.get(session, delivery_id)
    return _out(row, store.public_ids(session, [row.event_id]).get(row.event_id), store.attempts_of(session, row.id))


@router.post("/deliveries/{delivery_id}/retry")
def retry_delivery(delivery_id: int, principal: CurrentPrincipal, session: TenantSession, services: ServicesDep,
                   background: BackgroundTasks) -> DeliveryOut:
    row = store.retry(session, delivery_id, services.clock.now())
    audit(session, "delivery.retry", f"delivery {delivery_id}")
    dispatcher = services.extras.get("dispatcher")
    if dispatcher is not None:
        # After the request's commit (as the schedules API wakes the timer): woken earlier, the
        # dispatcher could pass before the delivery is pending and then wait a whole poll.
        background.add_task(dispatcher.wake, principal.tenant_slug)
    return _out(row, store.public_ids(session, [row.event_id]).get(row.event_id))


@router.get("/events/{event_id}/deliveries")
def event_deliveries(event_id: int, session: TenantSession, limit: int = Query(default=50, ge=1, le=200)) -> DeliveryPage:
    store.get_event(session, event_id)  # 404 for an unknown (or another tenant's) event
    return _page(store.page(session, event_id=event_id, limit=limit))


@router.get("/targets/{target_id}/deliveries")
def target_deliveries(target_id: int, session: TenantSession, status: Status | None = None,
                      cursor: int | None = Query(default=None, ge=0, le=ID_MAX), limit: int = Query(default=50, ge=1, le=200)) -> DeliveryPage:
    targets.get(session, target_id)  # 404 for an unknown (or another tenant's) target
    return _page(store.page(session, target_id=target_id, status=status, before_id=cursor, limit=limit))
