"""The tenant's secrets (SPEC section 6, admin): values go in and never come out of the API.

Scripts read them with `await almanac.secrets.get(NAME)`; runs have them redacted as `[secret NAME]`.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import Path, Response
from pydantic import BaseModel, ConfigDict, Field

from almanac.vault import keyring, store
from almanac.web.audit import audit
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

router = api_router(prefix="/secrets", tags=["secrets"], read="admin", write="admin")
Name = Path(min_length=1, max_length=64, pattern=r"^[A-Z][A-Z0-9_]{0,63}$",
            description="upper-case letter, then up to 63 of A-Z, 0-9 and _")


class SecretIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"example": {"value": "sk_live_…"}})
    value: str = Field(min_length=store.VALUE_MIN, max_length=store.VALUE_MAX,
                       description="the secret's value, 4 characters to 8 KiB; stored encrypted, never shown "
                                   "again, and replaced by [secret NAME] wherever a run would store it")


class SecretOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"name": "API_TOKEN",
                                                             "updated_at": "2026-11-23T09:00:00Z"}})
    name: str = Field(description="the secret's name, as scripts ask for it")
    updated_at: datetime = Field(description="when its value was last set")


class SecretList(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"items": [{"name": "API_TOKEN",
                                                                        "updated_at": "2026-11-23T09:00:00Z"}]}})
    items: list[SecretOut] = Field(description="every secret of the tenant by name; values are never listed")


def _forget(services: ServicesDep, slug: str) -> None:
    """This process's copy of the tenant's secrets (kept for redaction) is stale now."""
    outbound = getattr(services.runner, "outbound", None)
    if outbound is not None:
        outbound.forget(slug)


@router.get("")
def list_secrets(session: TenantSession) -> SecretList:
    return SecretList(items=[SecretOut(**store.public(row)) for row in store.listing(session)])  # type: ignore[arg-type]


@router.put("/{name}", responses={201: {"description": "Created", "model": SecretOut}})
def put_secret(body: SecretIn, session: TenantSession, services: ServicesDep, principal: CurrentPrincipal,
               response: Response, name: str = Name) -> SecretOut:
    row, created = store.put(session, keyring.for_settings(services.settings), name, body.value,
                             now=services.clock.now())
    audit(session, "secret.put", f"secret {name}", {"name": name, "created": created})
    _forget(services, principal.tenant_slug)
    response.status_code = 201 if created else 200
    return SecretOut(**store.public(row))  # type: ignore[arg-type]


@router.delete("/{name}", status_code=204)
def delete_secret(session: TenantSession, services: ServicesDep, principal: CurrentPrincipal,
                  name: str = Name) -> None:
    store.remove(session, name)
    audit(session, "secret.delete", f"secret {name}")
    _forget(services, principal.tenant_slug)
