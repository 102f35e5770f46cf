"""Event delivery for admins: targets (webhook, e-mail), deliveries with their attempts, events.

Every read and write goes through almanac.delivery (targets, store), the same functions the
API calls, so the pages cannot drift from the API's rules (SSRF guard, template checks, retry).
A webhook's signing secret appears in the one answer that created or rotated it, never again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import Response

from almanac.vault import keyring
from almanac.delivery import store, targets
from almanac.delivery.models import DEAD, FAILED, KINDS, STATUSES, WEBHOOK, Target
from almanac import jsonsafe
from almanac.errors import AlmanacError, Conflict, NotFound
from almanac.tenants.auth import Principal
from almanac.web.audit import audit
from almanac.web.views.common import PagePrincipal, ServicesDep, flash, page_router, redirect, render, tenant_db

router = page_router(read="admin", write="admin")
PAGE_SIZE = 50
# One delivery per (event, target): an event's page lists them all without paging.
EVENT_DELIVERIES_MAX = 500
RETRYABLE = (DEAD, FAILED)
_LIST_SPLIT = re.compile(r"[\s,;]+")


# -- the target form ----------------------------------------------------------------------------


@dataclass
class TargetForm:
    """The target form's fields as typed, so a refused form comes back as the person left it."""

    kind: str = WEBHOOK
    name: str = ""
    url: str = ""
    topics: str = "*"
    recipients: str = ""
    subject_template: str = ""
    body_template: str = ""
    enabled: bool = True

    @classmethod
    def from_form(cls, form: Mapping[str, Any], kind: str) -> "TargetForm":
        def one(name: str) -> str:
            value = form.get(name)
            return value.strip() if isinstance(value, str) else ""

        return cls(kind=kind, name=one("name"), url=one("url"), topics=one("topics"), recipients=one("recipients"),
                   subject_template=one("subject_template"), body_template=one("body_template"),
                   enabled=form.get("enabled") is not None)

    @classmethod
    def of(cls, row: Target) -> "TargetForm":
        shown = targets.public(row)
        return cls(kind=row.kind, name=row.name, url=row.url or "", topics=", ".join(shown["topics"]),
                   recipients=", ".join(shown.get("recipients") or []),
                   subject_template=row.subject_template or "", body_template=row.body_template or "",
                   enabled=row.enabled)

    def fields(self, *, creating: bool) -> dict[str, Any]:
        """What targets.create/update take; an empty template means the default one."""
        out: dict[str, Any] = {"name": self.name, "topics": _split(self.topics)}
        if creating:
            out["kind"] = self.kind
        else:
            out["enabled"] = self.enabled
        if self.kind == WEBHOOK:
            out["url"] = self.url
        else:
            out.update(recipients=_split(self.recipients), subject_template=self.subject_template or None,
                       body_template=self.body_template or None)
        return out


def _split(text: str) -> list[str]:
    """Topics or addresses typed one per line or separated by commas."""
    return [part for part in _LIST_SPLIT.split(text) if part]


def _kind(value: str | None) -> str:
    if value not in KINDS:
        raise NotFound("A target is a webhook or an e-mail target.")
    return value


def _allow_private(services: Any) -> bool:
    return bool(services.settings.allow_private_targets)


def _secret_page(request: Request, principal: Principal, services: Any, target_id: int, secret: str,
                 status_code: int) -> Response:
    """The target's page with its secret: this answer only, and kept out of every cache."""
    response = _target_page(request, principal, services, target_id, status_code=status_code, new_secret=secret)
    response.headers["Cache-Control"] = "no-store"
    return response


# -- targets --------------------------------------------------------------------------------


@router.get("/targets")
def targets_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        rows = [targets.public(row) for row in targets.listing(session)]
        counts = store.counts_by_target(session)
    return render(request, "targets.html", targets=rows, counts=counts, statuses=STATUSES)


@router.get("/targets/new")
def new_target_page(request: Request, principal: PagePrincipal, kind: str = WEBHOOK) -> Response:
    return render(request, "target_form.html", form=TargetForm(kind=_kind(kind)), target_id=None)


@router.post("/targets/new")
async def create_target(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    form = await request.form()
    values = TargetForm.from_form(form, _kind(form.get("kind")))  # type: ignore[arg-type]
    try:
        with tenant_db(services, principal) as session:
            row, secret = targets.create(session, values.fields(creating=True), now=services.clock.now(),
                                         allow_private=_allow_private(services),
                                         keyring=keyring.for_settings(services.settings))
            target_id = row.id
            audit(session, "target.create", f"target {row.id}", values.fields(creating=True), request=request)
    except AlmanacError as refused:
        # Leaving the block on the exception rolled the unit of work back: nothing was saved.
        return render(request, "target_form.html", status_code=refused.status, form=values, target_id=None,
                      error=refused.message)
    if secret is None:
        flash(request, f"E-mail target “{values.name}” created.")
        return redirect(f"/targets/{target_id}")
    return _secret_page(request, principal, services, target_id, secret, 201)


def _target_page(request: Request, principal: Principal, services: Any, target_id: int, *, status_code: int = 200,
                 new_secret: str | None = None) -> Response:
    status = request.query_params.get("status") or None
    cursor = _cursor(request.query_params.get("cursor"))
    with tenant_db(services, principal) as session:
        target = targets.public(targets.get(session, target_id))
        counts = store.counts_by_target(session).get(target_id, {})
        found = store.page(session, target_id=target_id, status=_status(status), before_id=cursor, limit=PAGE_SIZE)
        topics = store.topics_of(session, [r.event_id for r in found.rows])
    older = None
    if found.next_cursor:
        older = f"/targets/{target_id}?" + urlencode({k: v for k, v in
                                                      (("status", status), ("cursor", found.next_cursor)) if v})
    return render(request, "target.html", status_code=status_code, target=target, counts=counts,
                  deliveries=found.rows, public_ids=found.public_ids, topics=topics,
                  names={target_id: target["name"]}, older=older, new_secret=new_secret, statuses=STATUSES,
                  status_filter=status or "")


@router.get("/targets/{target_id}")
def target_page(request: Request, target_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    return _target_page(request, principal, services, target_id)


@router.get("/targets/{target_id}/edit")
def edit_target_page(request: Request, target_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        form = TargetForm.of(targets.get(session, target_id))
    return render(request, "target_form.html", form=form, target_id=target_id)


@router.post("/targets/{target_id}/edit")
async def update_target(request: Request, target_id: int, principal: PagePrincipal,
                        services: ServicesDep) -> Response:
    form = await request.form()
    try:
        with tenant_db(services, principal) as session:
            # The kind is the stored one: a form cannot turn a webhook into an e-mail target.
            values = TargetForm.from_form(form, targets.get(session, target_id).kind)
            targets.update(session, target_id, values.fields(creating=False), now=services.clock.now(),
                           allow_private=_allow_private(services))
            audit(session, "target.update", f"target {target_id}", values.fields(creating=False), request=request)
    except AlmanacError as refused:
        if refused.status == 404:
            raise
        return render(request, "target_form.html", status_code=refused.status, form=values, target_id=target_id,
                      error=refused.message)
    flash(request, f"Target “{values.name}” saved.")
    return redirect(f"/targets/{target_id}")


@router.get("/targets/{target_id}/rotate-secret")
def confirm_rotate(request: Request, target_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        row = targets.get(session, target_id)
        name, kind = row.name, row.kind
    if kind != WEBHOOK:
        raise NotFound("Only webhook targets have a signing secret.")
    return render(request, "confirm.html", title=f"Rotate the secret of “{name}”?",
                  body="The current secret stops working at once: receivers refuse our requests until they have "
                       "the new one, which is shown only once.",
                  action=f"/targets/{target_id}/rotate-secret", button="Rotate secret", back=f"/targets/{target_id}")


@router.post("/targets/{target_id}/rotate-secret")
def rotate_secret(request: Request, target_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        _row, secret = targets.rotate_secret(session, target_id, now=services.clock.now(),
                                              keyring=keyring.for_settings(services.settings))
        audit(session, "target.rotate_secret", f"target {target_id}", request=request)
    return _secret_page(request, principal, services, target_id, secret, 200)


@router.get("/targets/{target_id}/delete")
def confirm_delete(request: Request, target_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        name = targets.get(session, target_id).name
    return render(request, "confirm.html", title=f"Delete target “{name}”?",
                  body="Its deliveries and their attempt logs are deleted with it; events still waiting for it "
                       "are not sent.",
                  action=f"/targets/{target_id}/delete", button="Delete target", back=f"/targets/{target_id}")


@router.post("/targets/{target_id}/delete")
def delete_target(request: Request, target_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        name = targets.get(session, target_id).name
        targets.delete(session, target_id)
        audit(session, "target.delete", f"target {target_id}", request=request)
    flash(request, f"Target “{name}” deleted.")
    return redirect("/targets")


# -- deliveries -----------------------------------------------------------------------------


def _cursor(value: str | None) -> int | None:
    if not value:
        return None
    before = jsonsafe.parse_id(value)
    if before is None:
        raise NotFound("There is no such page of deliveries.")
    return before


def _status(value: str | None) -> str | None:
    if value and value not in STATUSES:
        raise NotFound(f"Status is one of {', '.join(STATUSES)}.")
    return value or None


def _filters(request: Request) -> dict[str, str]:
    q = request.query_params
    return {k: q.get(k, "").strip() for k in ("target_id", "status", "event")}


def _as_query(session: Any, filters: dict[str, str]) -> dict[str, Any] | str:
    """The filters as store.listing arguments, or the sentence saying which one is wrong."""
    out: dict[str, Any] = {}
    if filters["target_id"]:
        out["target_id"] = jsonsafe.parse_id(filters["target_id"])
        if out["target_id"] is None:
            return "Target must be one of the targets."
    if filters["status"]:
        if filters["status"] not in STATUSES:
            return f"Status must be one of {', '.join(STATUSES)}."
        out["status"] = filters["status"]
    event = filters["event"]
    if event:
        # Receivers see the public id (webhook-id); people may also paste the event's number.
        event_id = jsonsafe.parse_id(event) if event.isdigit() else store.event_id_of(session, event)
        if event_id is None:
            return f"There is no event {event[:60]!r}: give its number or its id (evt_…)."
        out["event_id"] = event_id
    return out


@router.get("/deliveries")
def deliveries_page(request: Request, principal: PagePrincipal, services: ServicesDep,
                    cursor: str | None = None) -> Response:
    filters = _filters(request)
    with tenant_db(services, principal) as session:
        names = {t.id: t.name for t in targets.listing(session)}
        query = _as_query(session, filters)
        if isinstance(query, str):
            return render(request, "deliveries.html", status_code=422, error=query, filters=filters, names=names,
                          statuses=STATUSES, deliveries=[], public_ids={}, topics={}, older=None)
        found = store.page(session, before_id=_cursor(cursor), limit=PAGE_SIZE, **query)
        topics = store.topics_of(session, [r.event_id for r in found.rows])
    older = None
    if found.next_cursor:
        older = "/deliveries?" + urlencode({**{k: v for k, v in filters.items() if v}, "cursor": found.next_cursor})
    return render(request, "deliveries.html", filters=filters, names=names, statuses=STATUSES,
                  deliveries=found.rows, public_ids=found.public_ids, topics=topics, older=older)


@router.get("/deliveries/{delivery_id}")
def delivery_page(request: Request, delivery_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        row = store.get(session, delivery_id)
        target = targets.public(targets.get(session, row.target_id))
        event = store.get_event(session, row.event_id)
        public_id = store.public_ids(session, [row.event_id]).get(row.event_id)
        attempts = store.attempts_of(session, delivery_id)
    return render(request, "delivery.html", d=row, target=target, event=event, public_id=public_id,
                  attempts=attempts, retryable=row.status in RETRYABLE)


@router.post("/deliveries/{delivery_id}/retry")
def retry_delivery(request: Request, delivery_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    try:
        with tenant_db(services, principal) as session:
            store.retry(session, delivery_id, services.clock.now())
            audit(session, "delivery.retry", f"delivery {delivery_id}", request=request)
    except Conflict as busy:
        flash(request, busy.message, "bad")
        return redirect(f"/deliveries/{delivery_id}")
    # Woken after the commit, so the dispatcher's next pass is sure to see the delivery pending.
    dispatcher = services.extras.get("dispatcher")
    if dispatcher is not None:
        dispatcher.wake(principal.tenant_slug)
    flash(request, f"Delivery #{delivery_id} will be sent again now, with a fresh round of attempts.")
    return redirect(f"/deliveries/{delivery_id}")


# -- events ---------------------------------------------------------------------------------


@router.get("/events/{event_id}")
def event_page(request: Request, event_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        event = store.get_event(session, event_id)
        found = store.page(session, event_id=event_id, limit=EVENT_DELIVERIES_MAX)
        names = {t.id: t.name for t in targets.listing(session)}
    return render(request, "event.html", event=event, data=_json(event.data), public_id=found.public_ids.get(event_id),
                  deliveries=found.rows, public_ids=found.public_ids, topics={event_id: event.topic}, names=names)


def _json(text: str) -> str:
    """The event's data, indented for reading (stored as JSON text)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text

