"""Delivery pages (admin): targets with their secret shown once, deliveries with attempts and retry,
events; refusals in role=alert with nothing saved; other tenants' ids are 404; editors and viewers
are refused. And the rule builder's Save button, disabled out of band while the preview refuses."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.policy import DeliveryConfig
from almanac.delivery.sending import Job, Result
from almanac.web.views import delivery as delivery_views
from tests.integration.delivery.world import World

# A public address written as an IP: the SSRF guard passes it without asking DNS.
HOOK_URL = "https://93.184.216.34/hook"
WEBHOOK = {"kind": "webhook", "name": "Orders hook", "url": HOOK_URL, "topics": "order.*, billing"}
EMAIL = {"kind": "email", "name": "Ops mail", "recipients": "ops@example.com,\nboss@example.com", "topics": "*",
         "subject_template": "[{{ event.tenant }}] {{ event.topic }}", "body_template": "{{ event.data }}"}


class Scripted:
    """A sender answering from a list: no network, the pages are what is under test."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)

    def send(self, job: Job) -> Result:
        ok = self.answers.pop(0)
        return Result(ok=ok, latency_ms=12, status_code=200 if ok else 500, error=None if ok else "HTTP 500: no")


class FakeDispatcher:
    def __init__(self) -> None:
        self.woken: list[str | None] = []

    def wake(self, slug: str | None = None) -> None:
        self.woken.append(slug)


def _create(b: Any, fields: dict[str, str]) -> Any:
    return b.post("/targets/new", fields)


def _target_id(b: Any, name: str) -> int:
    page = b.get("/targets").text
    return int(re.search(r'<a href="/targets/(\d+)">' + re.escape(name) + "<", page).group(1))


def _world(b: Any, database: Any, services: Any, *answers: bool) -> World:
    dispatcher = Dispatcher(database, services.clock, services.settings, lambda: [b.tenant], sender=Scripted(*answers),
                            config=DeliveryConfig(max_attempts=1), rng=random.Random(3))
    return World(database, b.tenant, services.clock, dispatcher)


def _dead_delivery(b: Any, database: Any, services: Any) -> tuple[World, int, int, int]:
    """A webhook target, one event sent to it once and refused (500): a dead delivery."""
    assert _create(b, WEBHOOK).status_code == 201
    target = _target_id(b, "Orders hook")
    world = _world(b, database, services, False)
    event = world.emit("order.created", {"order": 7, "note": "<b>bold</b>"})
    world.step()
    [delivery] = world.deliveries()
    assert delivery.status == "dead"
    return world, target, event, delivery.id


# -- targets ----------------------------------------------------------------------------------


def test_webhook_target_created_with_its_secret_shown_once(signed_in):
    b = signed_in("admin")
    form = b.get("/targets/new?kind=webhook").text
    for label in ("Name", "URL", "Topics"):
        assert f">{label}</label>" in form
    created = _create(b, WEBHOOK)
    assert created.status_code == 201 and created.headers["cache-control"] == "no-store"
    secret = re.search(r'id="new-secret">([^<]+)<', created.text).group(1)
    assert secret.startswith("whsec_")
    listing = b.get("/targets").text
    assert "Orders hook" in listing and HOOK_URL in listing and "<code>billing</code>" in listing
    assert "<code>order.*</code>" in listing and "enabled" in listing and secret not in listing
    target = _target_id(b, "Orders hook")
    assert secret not in b.get(f"/targets/{target}").text


def test_email_target_created_with_templates(signed_in):
    b = signed_in("admin")
    form = b.get("/targets/new?kind=email").text
    for label in ("Name", "Recipients", "Topics", "Subject template", "Body template"):
        assert f">{label}</label>" in form
    created = _create(b, EMAIL)
    assert created.status_code == 303
    page = b.get(created.headers["location"]).text
    assert "created" in page and "ops@example.com, boss@example.com" in page and "whsec_" not in page
    assert "[{{ event.tenant }}] {{ event.topic }}" in page


@pytest.mark.parametrize("fields, says", [
    ({**WEBHOOK, "url": "http://127.0.0.1:8080/hook"}, "127.0.0.1"),
    ({**WEBHOOK, "url": "http://169.254.169.254/latest/meta-data"}, "169.254.169.254"),
    ({**WEBHOOK, "topics": "no spaces!"}, "is not a topic pattern"),
    ({**WEBHOOK, "name": "  "}, "needs a name"),
    ({**EMAIL, "subject_template": "{{ event.topic"}, "subject template has an error"),
    ({**EMAIL, "recipients": "not-an-address"}, "is not an e-mail address"),
], ids=["loopback", "metadata", "topic", "name", "template", "recipient"])
def test_refused_targets_are_shown_in_an_alert_and_not_saved(signed_in, fields, says):
    b = signed_in("admin")
    refused = _create(b, fields)
    assert refused.status_code == 422
    alert = re.search(r'role="alert"[^>]*>([^<]*)<', refused.text).group(1)
    assert says in alert.replace("&#39;", "'")
    assert f'value="{fields["name"].strip()}"' in refused.text if fields["name"].strip() else True
    assert "No targets yet" in b.get("/targets").text


def test_edit_disable_and_refused_edit(signed_in):
    b = signed_in("admin")
    _create(b, WEBHOOK)
    target = _target_id(b, "Orders hook")
    form = b.get(f"/targets/{target}/edit").text
    assert 'value="billing, order.*"' in form and 'name="enabled" checked' in form
    saved = b.post(f"/targets/{target}/edit", {"name": "Orders", "url": HOOK_URL, "topics": "order.*"})
    assert saved.status_code == 303
    page = b.get(f"/targets/{target}").text
    assert "Orders" in page and "disabled" in page and "<code>billing</code>" not in page
    refused = b.post(f"/targets/{target}/edit", {"name": "Orders", "url": "http://10.0.0.1/", "topics": "*",
                                                 "enabled": "on"})
    assert refused.status_code == 422 and 'role="alert"' in refused.text
    assert "disabled" in b.get(f"/targets/{target}").text  # nothing of the refused edit was saved


def test_rotate_secret_shows_the_new_one_once(signed_in):
    b = signed_in("admin")
    first = re.search(r'id="new-secret">([^<]+)<', _create(b, WEBHOOK).text).group(1)
    target = _target_id(b, "Orders hook")
    confirm = b.get(f"/targets/{target}/rotate-secret")
    assert confirm.status_code == 200 and "stops working at once" in confirm.text
    rotated = b.post(f"/targets/{target}/rotate-secret")
    second = re.search(r'id="new-secret">([^<]+)<', rotated.text).group(1)
    assert rotated.status_code == 200 and second.startswith("whsec_") and second != first
    assert second not in b.get(f"/targets/{target}").text


def test_delete_with_confirmation(signed_in, database, services):
    b = signed_in("admin")
    _world_, target, _event, delivery = _dead_delivery(b, database, services)
    confirm = b.get(f"/targets/{target}/delete")
    assert "Delete target “Orders hook”?" in confirm.text and f'action="/targets/{target}/delete"' in confirm.text
    assert b.post(f"/targets/{target}/delete").status_code == 303
    assert "deleted" in b.get("/targets").text
    assert b.get(f"/targets/{target}").status_code == 404
    assert b.get(f"/deliveries/{delivery}").status_code == 404  # its history went with it


def test_names_are_escaped(signed_in):
    b = signed_in("admin")
    _create(b, {**WEBHOOK, "name": "<script>alert(1)</script>"})
    page = b.get("/targets").text
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# -- deliveries and events ----------------------------------------------------------------------------


def test_delivery_list_page_and_retry(signed_in, database, services):
    b = signed_in("admin")
    world, target, event, delivery = _dead_delivery(b, database, services)
    fake = FakeDispatcher()
    services.extras["dispatcher"] = fake
    listing = b.get("/deliveries").text
    assert f'href="/deliveries/{delivery}"' in listing and "order.created" in listing and "dead" in listing
    assert "Orders hook" in listing and "12 ms" in listing and ">500<" in listing
    assert f'href="/deliveries/{delivery}"' in b.get("/deliveries", params={"status": "dead"}).text
    assert "No deliveries match" in b.get("/deliveries", params={"status": "succeeded"}).text
    assert f'href="/deliveries/{delivery}"' in b.get("/deliveries", params={"target_id": target}).text
    public_id = re.search(r"(evt_[0-9a-f]+)", listing).group(1)
    assert f'href="/deliveries/{delivery}"' in b.get("/deliveries", params={"event": public_id}).text
    assert f'href="/deliveries/{delivery}"' in b.get("/deliveries", params={"event": str(event)}).text
    page = b.get(f"/deliveries/{delivery}").text
    log = page.split('id="attempt-log"')[1]
    assert re.search(r"<td>1</td><td><time [^>]+>[^<]+</time></td>\s*<td><span class=\"status failed\">failed</span></td>\s*"
                     r"<td>500</td>\s*<td>12 ms</td>\s*<td>HTTP 500: no</td>", log)
    assert ">Retry now</button>" in page and 'action="/deliveries/%d/retry"' % delivery in page
    retried = b.post(f"/deliveries/{delivery}/retry")
    assert retried.status_code == 303 and fake.woken == [b.tenant]
    after = b.get(f"/deliveries/{delivery}").text
    assert "sent again now" in after and 'id="delivery-status">pending<' in after and "Retry now" not in after
    assert "already pending" in (b.post(f"/deliveries/{delivery}/retry"), b.get(f"/deliveries/{delivery}"))[1].text
    world.dispatcher.sender.answers.append(True)
    world.step()
    done = b.get(f"/deliveries/{delivery}").text
    assert 'id="delivery-status">succeeded<' in done and "Retry now" not in done


def test_bad_filters_are_refused_in_an_alert(signed_in):
    b = signed_in("admin")
    for params in ({"event": "evt_nope"}, {"status": "lost"}, {"target_id": "x"}):
        response = b.get("/deliveries", params=params)
        assert response.status_code == 422 and 'role="alert"' in response.text, params


def test_event_and_target_pages_list_their_deliveries(signed_in, database, services):
    b = signed_in("admin")
    _world_, target, event, delivery = _dead_delivery(b, database, services)
    page = b.get(f"/events/{event}").text
    assert "order.created" in page and f'href="/deliveries/{delivery}"' in page and 'href="/runs/' in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page  # tenant data, escaped
    target_page = b.get(f"/targets/{target}").text
    assert f'href="/deliveries/{delivery}"' in target_page and "1 dead" in target_page
    assert "No deliveries match" in b.get(f"/targets/{target}", params={"status": "succeeded"}).text
    assert "1 dead" in b.get("/targets").text


def test_deliveries_are_paged_newest_first(signed_in, database, services, monkeypatch):
    monkeypatch.setattr(delivery_views, "PAGE_SIZE", 2)
    b = signed_in("admin")
    _create(b, WEBHOOK)
    world = _world(b, database, services, False, False, False)
    for n in range(3):
        world.emit("order.created", {"n": n}, schedule_id=n + 1)
    world.step()
    ids = [d.id for d in world.deliveries()]
    first = b.get("/deliveries").text
    assert re.findall(r'href="/deliveries/(\d+)"', first) == [str(ids[2]), str(ids[1])]
    older = re.search(r'<a href="([^"]+)">Older deliveries', first).group(1).replace("&amp;", "&")
    assert re.findall(r'href="/deliveries/(\d+)"', b.get(older).text) == [str(ids[0])]


def test_another_tenants_ids_are_not_found(signed_in, database, services):
    owner = signed_in("admin")
    _world_, target, event, delivery = _dead_delivery(owner, database, services)
    other = signed_in("admin")
    for path in (f"/targets/{target}", f"/targets/{target}/edit", f"/targets/{target}/delete",
                 f"/targets/{target}/rotate-secret", f"/deliveries/{delivery}", f"/events/{event}"):
        assert other.get(path).status_code == 404, path
    for path in (f"/targets/{target}/edit", f"/targets/{target}/delete", f"/targets/{target}/rotate-secret",
                 f"/deliveries/{delivery}/retry"):
        assert other.post(path, {"name": "x", "topics": "*", "url": HOOK_URL}).status_code == 404, path
    assert "Orders hook" in owner.get(f"/targets/{target}").text  # untouched
    assert "No deliveries match" in other.get("/deliveries").text


def test_editors_and_viewers_are_refused(signed_in):
    for role in ("editor", "viewer"):
        b = signed_in(role)
        for path in ("/targets", "/targets/new", "/deliveries", "/targets/1", "/deliveries/1", "/events/1"):
            assert b.get(path).status_code == 403, (role, path)
        assert b.post("/targets/new", WEBHOOK).status_code == 403
        assert b.post("/deliveries/1/retry").status_code == 403
        assert 'href="/deliveries"' not in b.get("/").text


def test_admin_sees_the_delivery_link_and_writes_need_csrf(signed_in):
    b = signed_in("admin")
    assert '<a href="/deliveries">Delivery</a>' in b.get("/").text
    assert 'href="/deliveries" aria-current="page"' in b.get("/targets").text
    assert b.post("/targets/new", WEBHOOK, csrf=False).status_code == 403
    assert "No targets yet" in b.get("/targets").text


def test_delivery_pages_are_light(signed_in, database, services):
    b = signed_in("admin")
    _world_, target, event, delivery = _dead_delivery(b, database, services)
    for path in ("/targets", "/targets/new", f"/targets/{target}", "/deliveries", f"/deliveries/{delivery}",
                 f"/events/{event}"):
        response = b.get(path)
        assert response.status_code == 200 and len(response.content) < 30 * 1024, path
        assert "<script>" not in response.text and " style=" not in response.text


# -- the rule builder's Save button ---------------------------------------------------------------


@pytest.mark.parametrize("rule", ["FREQ=MONTHLY;BYMONTHDAY=30;BYMONTH=2", "every blue moon", "*/10 * * * * *"])
def test_preview_disables_save_out_of_band_when_refused(signed_in, rule):
    html = signed_in("editor").get("/rules/preview", params={"rule": rule, "timezone": "UTC"}).text
    button = re.search(r'<span id="rule-save" hx-swap-oob="true">\s*<button type="submit"([^>]*)>', html)
    assert button and "disabled" in button.group(1)


def test_preview_enables_save_again_when_valid(signed_in):
    html = signed_in("editor").get("/rules/preview", params={"rule": "every day at 9am", "timezone": "UTC"}).text
    button = re.search(r'<span id="rule-save" hx-swap-oob="true">\s*<button type="submit"([^>]*)>', html)
    assert button and "disabled" not in button.group(1)


def test_schedule_form_renders_save_enabled_and_asks_again_after_a_refusal(signed_in):
    b = signed_in("admin")
    fresh = b.get("/schedules/new").text
    assert '<span id="rule-save">' in fresh and "hx-swap-oob" not in fresh and "disabled" not in fresh
    refused = b.post("/schedules/new", {"name": "never", "script_id": "", "mode": "text",
                                        "rule": "FREQ=MONTHLY;BYMONTHDAY=30;BYMONTH=2", "timezone": "UTC"})
    assert refused.status_code >= 400 and 'role="alert"' in refused.text
    # Without JavaScript the button stays usable (the server refuses); with it, htmx asks on load and disables it.
    assert 'hx-trigger="load, input changed' in refused.text and "<button type=\"submit\">Save schedule" in refused.text
