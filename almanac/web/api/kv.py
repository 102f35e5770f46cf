"""The tenant's data (SPEC section 10): the same keys and values that scripts see."""

from __future__ import annotations


from fastapi import Path, Query

from almanac import jsonsafe
from almanac.platform.service import resources as service
from almanac.web.api.schemas_scheduler import KvIn, KvOut, KvPage
from almanac.web.audit import audit
from almanac.web.deps import ServicesDep, TenantSession, api_router

router = api_router(prefix="/kv", tags=["kv"], read="viewer", write="editor")
Key = Path(min_length=1, max_length=512)


def _out(row: object) -> KvOut:
    return KvOut(key=row.key, value=jsonsafe.loads_stored(row.value), updated_at=row.updated_at)


@router.get("")
def list_keys(session: TenantSession, prefix: str = Query(default="", max_length=512),
              cursor: str | None = Query(default=None, max_length=1024),
              limit: int = Query(default=service.KV_PAGE, ge=1, le=service.KV_PAGE)) -> KvPage:
    """Pages of at most 1,000 keys in key order; pass `next_cursor` back as `cursor` for the next."""
    rows, next_cursor = service.kv_list(session, prefix, limit, cursor)
    return KvPage(items=[_out(row) for row in rows], next_cursor=next_cursor)


@router.get("/{key:path}")
def get_key(session: TenantSession, key: str = Key) -> KvOut:
    return _out(service.kv_get(session, key))


@router.put("/{key:path}")
def put_key(body: KvIn, session: TenantSession, services: ServicesDep, key: str = Key) -> KvOut:
    row = service.kv_put(session, key, body.value, services.clock.now())
    audit(session, "kv.put", f"kv {key}", {"value": body.value})
    return _out(row)


@router.delete("/{key:path}", status_code=204)
def delete_key(session: TenantSession, key: str = Key) -> None:
    service.kv_delete(session, key)
    audit(session, "kv.delete", f"kv {key}")
