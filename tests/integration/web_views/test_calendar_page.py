"""The calendar page: occurrences on a grid of weeks, in a chosen zone, DST days marked, filter by schedule."""

from __future__ import annotations

import re
from datetime import datetime, timezone

SCRIPT = "export default async function (event) { return 1; }"


def _cell(page: str, day: str) -> str:
    match = re.search(rf'<td class="([^"]*)" data-date="{day}">(.*?)</td>', page, re.S)
    assert match, day
    return match.group(1) + " " + match.group(2)


def test_calendar_places_occurrences_and_marks_dst(signed_in, api, manual_clock):
    manual_clock.set(datetime(2026, 10, 20, 8, 0, tzinfo=timezone.utc))  # a Tuesday; Berlin leaves DST on the 25th
    b = signed_in("viewer")
    client = api("admin", b.tenant)
    script = client.post("/api/v1/scripts", json={"name": "s", "source": SCRIPT}).json()["id"]
    for name, rule in (("berlin-nine", "every day at 9am"), ("mondays", "every Monday at 17:30")):
        made = client.post("/api/v1/schedules", json={"name": name, "script_id": script, "rule": rule,
                                                      "timezone": "Europe/Berlin"})
        assert made.status_code == 201, made.text
    page = b.get("/calendar?zone=Europe/Berlin&weeks=2").text
    assert len(re.findall(r'data-date="', page)) == 14
    assert "berlin-nine" not in _cell(page, "2026-10-20")  # 09:00 Berlin was before now
    assert "09:00" in _cell(page, "2026-10-21") and "berlin-nine" in _cell(page, "2026-10-21")
    assert "17:30" in _cell(page, "2026-10-26") and "mondays" in _cell(page, "2026-10-26")
    dst_day = _cell(page, "2026-10-25")
    assert re.search(r'<td class="[^"]*\bdst\b[^"]*" data-date="2026-10-25"', page)
    assert "Europe/Berlin: UTC+02:00 → UTC+01:00" in dst_day
    assert "DST" not in _cell(page, "2026-10-24")
    # In UTC the same 09:00 moves from 07:00 to 08:00 across the shift; the Berlin shift is still marked.
    utc = b.get("/calendar?zone=UTC&weeks=2").text
    assert "07:00" in _cell(utc, "2026-10-24") and "08:00" in _cell(utc, "2026-10-26")
    assert "Europe/Berlin: UTC+02:00" in _cell(utc, "2026-10-25")
    # Filter by schedule, clamp the weeks, the week view.
    mondays = re.search(r'<option value="(\d+)">mondays', page).group(1)
    only = b.get(f"/calendar?zone=Europe/Berlin&schedule={mondays}").text
    assert "berlin-nine</a>" not in only and "mondays</a>" in only
    assert len(re.findall(r'data-date="', b.get("/calendar?weeks=99").text)) == 42
    assert len(re.findall(r'data-date="', b.get("/calendar?view=week").text)) == 7
    assert b.get("/calendar?weeks=x").status_code == 422
    assert b.get("/calendar?zone=Not/AZone").status_code == 200  # unknown zone: the viewer's own
