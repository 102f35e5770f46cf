"""Delivery targets of the tenant (admin only): webhooks and e-mail, with their topics.

A webhook's signing secret is in the answer to POST (and to rotate-secret) only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from almanac.delivery import targets
from almanac.vault import keyring
from almanac.web.audit import audit
from almanac.web.deps import ServicesDep, TenantSession, api_router

router = api_router(prefix="/targets", tags=["targets"], read="admin", write="admin")


class TargetIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: see schemas_scheduler.Strict
    kind: Literal["webhook", "email"]
    name: str = Field(min_length=1, max_length=200)
    topics: list[str] = Field(min_length=1, max_length=targets.TOPICS_MAX)
    enabled: bool = True
    url: str | None = Field(default=None, max_length=2048)
    recipients: list[str] | None = Field(default=None, min_length=1, max_length=targets.RECIPIENTS_MAX)
    subject_template: str | None = Field(default=None, max_length=1024)
    body_template: str | None = Field(default=None, max_length=16 * 1024)


class TargetPatch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: see schemas_scheduler.Strict
    name: str | None = Field(default=None, min_length=1, max_length=200)
    topics: list[str] | None = Field(default=None, min_length=1, max_length=targets.TOPICS_MAX)
    enabled: bool | None = None
    url: str | None = Field(default=None, max_length=2048)
    recipients: list[str] | None = Field(default=None, min_length=1, max_length=targets.RECIPIENTS_MAX)
    subject_template: str | None = Field(default=None, max_length=1024)
    body_template: str | None = Field(default=None, max_length=16 * 1024)


class TargetOut(BaseModel):
    id: int
    kind: str
    name: str
    topics: list[str]
    enabled: bool
    created_at: datetime
    updated_at: datetime
    url: str | None = None
    recipients: list[str] | None = None
    subject_template: str | None = None
    body_template: str | None = None
    secret: str | None = None  # only when just created or rotated


def _out(row: Any, secret: str | None = None) -> TargetOut:
    return TargetOut(**targets.public(row), secret=secret)


@router.get("")
def list_targets(session: TenantSession) -> list[TargetOut]:
    return [_out(row) for row in targets.listing(session)]


@router.post("", status_code=201)
def create_target(body: TargetIn, session: TenantSession, services: ServicesDep) -> TargetOut:
    row, secret = targets.create(session, body.model_dump(), now=services.clock.now(),
                                 allow_private=services.settings.allow_private_targets,
                                 keyring=keyring.for_settings(services.settings))
    audit(session, "target.create", f"target {row.id}", body.model_dump())
    return _out(row, secret)


@router.get("/{target_id}")
def get_target(target_id: int, session: TenantSession) -> TargetOut:
    return _out(targets.get(session, target_id))


@router.patch("/{target_id}")
def change_target(target_id: int, body: TargetPatch, session: TenantSession, services: ServicesDep) -> TargetOut:
    row = targets.update(session, target_id, body.model_dump(exclude_none=True), now=services.clock.now(),
                         allow_private=services.settings.allow_private_targets)
    audit(session, "target.update", f"target {target_id}", body.model_dump(exclude_none=True))
    return _out(row)


@router.post("/{target_id}/rotate-secret")
def rotate_secret(target_id: int, session: TenantSession, services: ServicesDep) -> TargetOut:
    row, secret = targets.rotate_secret(session, target_id, now=services.clock.now(),
                                          keyring=keyring.for_settings(services.settings))
    audit(session, "target.rotate_secret", f"target {target_id}")
    return _out(row, secret)


@router.delete("/{target_id}", status_code=204)
def delete_target(target_id: int, session: TenantSession) -> None:
    targets.delete(session, target_id)
    audit(session, "target.delete", f"target {target_id}")
