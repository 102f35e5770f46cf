"""A schedule's page and edit form as an author uses them: the rule builder's fields filled
back from the rule, a trial "Try with payload" that saves nothing, and the schedule's own calendar."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from sqlalchemy import func, select

from almanac.platform.store.models import Event, Job, KV, Run

from tests.integration.web_views.test_schedule_pages import _schedule, _script

@pytest.fixture
def now() -> datetime:
    """Two weeks before Europe/Berlin moves its clocks (28 March 2027): the calendars show the change."""
    return datetime(2027, 3, 15, 9, 0, tzinfo=timezone.utc)


EMITTER = """export default async function (event) {
  const seen = (await almanac.kv.get("seen")) ?? 0;
  console.log("hello", event.payload.name, seen);
  await almanac.kv.set("seen", seen + 1);
  await almanac.emit("greeted", {name: event.payload.name});
  await almanac.schedule.at(new Date(Date.parse(event.firedAt) + 3600000).toISOString(), {again: true}, {key: "again"});
  if (event.payload.fail) {
    throw new Error("asked to fail");
  }
  return {greeting: "hi " + event.payload.name};
}
"""


def _make(b, rule: str, source: str = EMITTER, **extra) -> str:
    b.script_id = _script(b, name="emitter", source=source)
    created = _schedule(b, b.script_id, rule=rule, payload='{"name": "Ann"}', **extra)
    assert created.status_code == 303, created.text
    return created.headers["location"]


def _checked(html: str, name: str, value: str) -> bool:
    return re.search(rf'<input[^>]*name="{name}" value="{value}"[^>]*checked', html) is not None


def test_editing_a_rule_built_from_fields_opens_on_its_fields(signed_in):
    b = signed_in("admin")
    url = _make(b, "", mode="fields", freq="WEEKLY", interval="2", byday=["MO", "FR"], at="17:30")
    html = b.get(url + "/edit").text
    assert 'id="mode-fields" checked' in html
    assert _checked(html, "byday", "MO") and _checked(html, "byday", "FR") and not _checked(html, "byday", "TU")
    assert 'id="interval" name="interval" type="number" min="1" max="1000" value="2"' in html
    assert 'id="at" name="at" type="time" value="17:30"' in html
    assert "The fields show this schedule&#39;s rule." in html
    # Saved again from the filled fields, the rule text is what the fields wrote: unchanged.
    form = {"name": "morning", "script_id": b.script_id, "mode": "fields", "freq": "WEEKLY", "interval": "2",
            "byday": ["MO", "FR"], "at": "17:30", "timezone": "Europe/Berlin",
            "start": re.search(r'id="start" name="start" type="datetime-local" value="([^"]*)"', html).group(1),
            "payload": '{"name": "Ann"}', "enabled": "on", "misfire": "run_once", "overlap": "skip",
            "max_attempts": "3", "retry_backoff_s": "10", "catchup_window_s": "86400", "priority": "0"}
    assert b.post(url + "/edit", form).status_code == 303
    page = b.get(url).text
    assert "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR;BYHOUR=17;BYMINUTE=30" in page


def test_editing_an_english_rule_keeps_the_text_and_fills_the_fields(signed_in):
    b = signed_in("admin")
    url = _make(b, "every weekday at 9am")
    html = b.get(url + "/edit").text
    assert 'id="mode-text" checked' in html and 'value="every weekday at 9am"' in html
    assert all(_checked(html, "byday", d) for d in ("MO", "TU", "WE", "TH", "FR"))
    assert '<option value="WEEKLY" selected>' in html and 'value="09:00"' in html
    assert "Build from fields" in html


def test_a_rule_the_fields_cannot_say_is_named_plainly(signed_in):
    b = signed_in("admin")
    url = _make(b, "0 9,17 * * *")
    html = b.get(url + "/edit").text
    assert 'id="mode-text" checked' in html
    assert re.search(r'id="fill-note">The fields cannot show this rule: it runs at several times of day', html)


def test_fields_are_marked_with_the_frequencies_they_serve(signed_in):
    html = signed_in("admin").get("/schedules/new").text
    assert 'data-freqs="DAILY WEEKLY MONTHLY YEARLY"><label for="at">' in html
    assert 'data-freqs="MONTHLY"><div><label for="monthdays">' in html.replace("\n        ", "")


def _counts(app, tenant):
    with app.state.services.db.tenant_session(tenant) as session:
        return tuple(session.execute(select(func.count()).select_from(t)).scalar() for t in (Run, Event, KV, Job))


def test_run_with_payload_shows_everything_and_saves_nothing(signed_in, app):
    b = signed_in("admin")
    url = _make(b, "every day at 6am")
    page = b.get(url).text
    assert 'id="trial-payload"' in page and '"name": "Ann"' in page  # its payload, editable
    before = _counts(app, b.tenant)
    html = b.post(url + "/try", {"payload": '{"name": "Bo"}'}, headers={"HX-Request": "true"}).text
    assert 'id="trial-status">succeeded' in html and '"greeting": "hi Bo"' in html
    assert "hello Bo 0" in html  # its log
    assert re.search(r'<ul id="trial-events"><li><strong>greeted</strong> <code class="small">\{"name": '
                     r'"Bo"\}</code>', html)
    assert "<code>seen</code> = <code class=\"small\">1</code>" in html and "<code>again</code> at" in html
    runs, *rest = _counts(app, b.tenant)
    assert (runs, rest) == (before[0] + 1, list(before[1:]))  # recorded as a run; no event, kv entry or job
    failed = b.post(url + "/try", {"payload": '{"name": "Bo", "fail": true}'}, headers={"HX-Request": "true"}).text
    assert 'id="trial-status">failed' in failed and re.search(r'role="alert">Line 8: .*asked to fail', failed)
    assert 'id="trial-not-applied"' in failed and 'id="trial-not-applied"' not in html
    assert _counts(app, b.tenant) == (before[0] + 2, *before[1:])
    bad = b.post(url + "/try", {"payload": "{oops"})  # without JavaScript: the whole page, with the refusal
    assert bad.status_code == 422 and "Payload is not JSON" in bad.text and "{oops" in bad.text


def test_viewers_may_not_run_with_payload(signed_in):
    admin = signed_in("admin")
    url = _make(admin, "every day at 6am")
    viewer = signed_in("viewer", tenant=admin.tenant)
    assert 'id="trial-payload"' not in viewer.get(url).text
    assert viewer.post(url + "/try", {"payload": "{}"}).status_code == 403


def test_the_schedule_page_has_its_own_calendar(signed_in):
    b = signed_in("admin")
    url = _make(b, "every day at 6am")
    html = b.get(url).text
    table = re.search(r'<table class="calendar" aria-label="Calendar of morning">(.*?)</table>', html, re.S)
    assert table and table.group(1).count("data-date=") == 28
    assert table.group(1).count('<span class="cal-time">06:00</span>') >= 27
    six = b.get(url + "?weeks=6").text
    assert six.count("data-date=") == 42 and "Calendar, next 6 weeks" in six


def test_the_schedule_calendar_marks_dst_days(signed_in):
    b = signed_in("admin")
    url = _make(b, "every day at 2:30am")
    html = b.get(url).text
    assert re.findall(r'<td class="[^"]*dst" data-date="([^"]+)"', html) == ["2027-03-28"]
    day = re.search(r'data-date="2027-03-28">(.*?)</td>', html, re.S).group(1)
    assert "Europe/Berlin: UTC+01:00 → UTC+02:00" in day and '<span class="cal-time">03:30</span>' in day


def test_a_changed_rule_keeps_the_start_the_form_showed(signed_in):
    """A yearly rule's day is its start's: changing its time in the fields keeps the day."""
    b = signed_in("admin")
    url = _make(b, "", mode="fields", freq="YEARLY", at="09:00", start="2027-05-05T09:00")
    html = b.get(url + "/edit").text
    start = re.search(r'id="start" name="start" type="datetime-local" value="([^"]*)"', html).group(1)
    assert start == "2027-05-05T09:00" and 'id="mode-fields" checked' in html
    form = {"name": "morning", "script_id": b.script_id, "mode": "fields", "freq": "YEARLY", "interval": "1",
            "at": "10:00", "timezone": "Europe/Berlin", "start": start, "payload": '{"name": "Ann"}',
            "enabled": "on", "misfire": "run_once", "overlap": "skip", "max_attempts": "3",
            "retry_backoff_s": "10", "catchup_window_s": "86400", "priority": "0"}
    assert b.post(url + "/edit", form).status_code == 303
    page = b.get(url).text
    assert "FREQ=YEARLY;BYHOUR=10;BYMINUTE=0" in page and "2027-05-05 10:00:00 CEST" in page
