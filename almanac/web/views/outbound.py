"""The egress allowlist and the secrets of the tenant (admin only; SPEC sections 6 and 12).

A secret's value goes in through a password field and never comes back: the page lists names
and when each was last set, and offers to replace or delete.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import Response

from almanac.egress import allowlist
from almanac.egress import store as egress_store
from almanac.errors import AlmanacError
from almanac.vault import keyring
from almanac.vault import store as vault_store
from almanac.web.audit import audit
from almanac.web.views.common import PagePrincipal, ServicesDep, flash, page_router, redirect, render, tenant_db

router = page_router(read="admin", write="admin")
HOSTS_TEXT_MAX = allowlist.MAX_ENTRIES * (allowlist.ENTRY_MAX + 2)


# -- egress -------------------------------------------------------------------------------------


def _egress_page(request: Request, principal: PagePrincipal, services: ServicesDep, status_code: int = 200,
                 **extra: object) -> Response:
    with tenant_db(services, principal) as session:
        hosts = egress_store.hosts(session)
    return render(request, "egress.html", status_code=status_code, hosts=hosts,
                  text=extra.pop("text", "\n".join(hosts)), **extra)


@router.get("/egress")
def egress_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    return _egress_page(request, principal, services)


@router.post("/egress")
def save_egress(request: Request, principal: PagePrincipal, services: ServicesDep,
                hosts: Annotated[str, Form(max_length=HOSTS_TEXT_MAX)] = "") -> Response:
    lines = [line.strip() for line in hosts.replace(",", "\n").splitlines() if line.strip()]
    try:
        with tenant_db(services, principal) as session:
            before = egress_store.hosts(session)
            saved = egress_store.replace(session, lines, now=services.clock.now())
            audit(session, "egress.put", "egress", {"before": before, "hosts": saved}, request=request)
    except AlmanacError as refused:
        return _egress_page(request, principal, services, 422, error=refused.message, text=hosts)
    flash(request, f"Egress allowlist saved: {len(saved)} host(s)." if saved else
          "Egress allowlist emptied: scripts can reach no host.")
    return redirect("/egress", request)


# -- secrets ------------------------------------------------------------------------------------


def _secrets_page(request: Request, principal: PagePrincipal, services: ServicesDep, status_code: int = 200,
                  **extra: object) -> Response:
    with tenant_db(services, principal) as session:
        rows = [vault_store.public(row) for row in vault_store.listing(session)]
    return render(request, "secrets.html", status_code=status_code, secrets=rows, **extra)


def _forget(services: ServicesDep, slug: str) -> None:
    outbound = getattr(services.runner, "outbound", None)
    if outbound is not None:
        outbound.forget(slug)


@router.get("/secrets")
def secrets_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    return _secrets_page(request, principal, services)


@router.post("/secrets")
def save_secret(request: Request, principal: PagePrincipal, services: ServicesDep,
                name: Annotated[str, Form(max_length=64)],
                value: Annotated[str, Form(max_length=vault_store.VALUE_MAX)]) -> Response:
    name = name.strip()
    try:
        with tenant_db(services, principal) as session:
            _row, created = vault_store.put(session, keyring.for_settings(services.settings), name, value,
                                            now=services.clock.now())
            audit(session, "secret.put", f"secret {name}", {"name": name, "created": created}, request=request)
    except AlmanacError as refused:
        return _secrets_page(request, principal, services, 422, error=refused.message, name=name)
    _forget(services, principal.tenant_slug)
    flash(request, f"Secret {name} {'created' if created else 'replaced'}; scripts read it with "
                   f"almanac.secrets.get(\"{name}\").")
    return redirect("/secrets", request)


@router.post("/secrets/{name}/delete")
def delete_secret(request: Request, name: str, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        vault_store.remove(session, name)
        audit(session, "secret.delete", f"secret {name}", request=request)
    _forget(services, principal.tenant_slug)
    flash(request, f"Secret {name} deleted; scripts now read null for it.")
    return redirect("/secrets", request)
