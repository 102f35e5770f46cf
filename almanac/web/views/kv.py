"""The tenant's data (kv) as a page: browse by prefix in pages, view and edit a value as JSON, delete.

Everyone may read; editors and admins write (the same roles as `/api/v1/kv`). Keys travel in
the query string and form fields, never in the path, so any key (slashes, spaces) is addressable.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import Response

from almanac.errors import AlmanacError, NotFound
from almanac.platform.service import resources as service
from almanac.platform.store.models import KEY_MAX
from almanac.web.audit import audit
from almanac.web.views.common import PagePrincipal, ServicesDep, flash, page_router, redirect, render, tenant_db

router = page_router(read="viewer", write="editor")
PAGE = 50


def _clip(text: str | None, limit: int = KEY_MAX) -> str:
    return (text or "")[:limit]


@router.get("/kv")
def kv_page(request: Request, principal: PagePrincipal, services: ServicesDep, prefix: str = "",
            cursor: str | None = None) -> Response:
    """Pages with the API's own cursor (a cursor this site did not give out is a 422, as in the API)."""
    prefix, cursor = _clip(prefix), _clip(cursor, 200) if cursor else None
    with tenant_db(services, principal) as session:
        rows, next_cursor = service.kv_list(session, prefix, limit=PAGE, cursor=cursor)
        items = [{"key": r.key, "bytes": len(r.value.encode()), "updated_at": r.updated_at,
                  "preview": r.value[:80]} for r in rows]
    more = urlencode({"prefix": prefix, "cursor": next_cursor}) if next_cursor else None
    return render(request, "kv.html", items=items, prefix=prefix, after=cursor, more=more,
                  first=urlencode({"prefix": prefix}))


@router.get("/kv/item")
def kv_item_page(request: Request, principal: PagePrincipal, services: ServicesDep, key: str = "") -> Response:
    """One value as indented JSON; an empty key is the form for a new one."""
    value = ""
    if key:
        with tenant_db(services, principal) as session:
            value = json.dumps(json.loads(service.kv_get(session, _clip(key)).value), indent=2, ensure_ascii=False)
    return render(request, "kv_item.html", key=key, value=value, new=not key)


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("it is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from None


@router.post("/kv/item")
async def save_item(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    form = await request.form()
    key, text = str(form.get("key", "")).strip(), str(form.get("value", ""))
    problem = None if 0 < len(key) <= KEY_MAX else f"A key has 1 to {KEY_MAX} characters."
    if problem is None:
        try:
            value = _parse(text)
            with tenant_db(services, principal) as session:
                service.kv_put(session, key, value, services.clock.now())
                audit(session, "kv.put", f"kv {key}", {"value": value}, request=request)
        except ValueError as exc:
            problem = f"The value is not JSON: {exc}."
        except AlmanacError as exc:
            problem = exc.message
    if problem:
        return render(request, "kv_item.html", status_code=422, key=key, value=text, new=True, error=problem)
    flash(request, f"Saved “{key}”.")
    return redirect("/kv/item?" + urlencode({"key": key}))


@router.post("/kv/delete")
async def delete_item(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    form = await request.form()
    key = _clip(str(form.get("key", "")))
    try:
        with tenant_db(services, principal) as session:
            service.kv_delete(session, key)
            audit(session, "kv.delete", f"kv {key}", request=request)
    except NotFound:
        flash(request, f"There is no key “{key}” (already deleted?).", "bad")
        return redirect("/kv")
    flash(request, f"Deleted “{key}”.")
    return redirect("/kv?" + urlencode({"prefix": key.rsplit(":", 1)[0] + ":" if ":" in key else ""}))
