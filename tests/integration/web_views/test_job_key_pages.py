"""The jobs pages address each job by its own key, percent-encoded whole in every link and form, and
name a chain that a run began by that run."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from almanac.platform.store.models import Job
from tests.support.operating import add_script


@pytest.fixture
def editor(signed_in: Any, database: Any, now: Any) -> Any:
    b = signed_in("admin")
    b.script_id = add_script(database, b.tenant, now)
    b.db = database
    return b


def _job(b: Any, now: Any, key: str, root_key: str | None = None, depth: int = 0,
         created_by_run_id: int | None = None) -> None:
    """A job row written directly: any key the table holds, whether the grammar allows it or not."""
    with b.db.tenant_session(b.tenant) as s:
        s.add(Job(key=key, script_id=b.script_id, run_at=now + timedelta(days=1), payload="null", max_attempts=3,
                  priority=0, state="pending", root_key=root_key or key, depth=depth,
                  created_by_run_id=created_by_run_id, created_at=now, updated_at=now))


def _state(b: Any, key: str) -> str:
    with b.db.tenant_session(b.tenant) as s:
        return s.execute(select(Job.state).where(Job.key == key)).scalar_one()


def _hrefs(page: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'(?:href|action)="(/jobs/[^"]*)"', page)]


def test_no_link_or_form_lets_a_key_reach_another_job(editor: Any, now: Any) -> None:
    _job(editor, now, "victim")
    _job(editor, now, "x/../victim")  # a key the grammar refuses, in the table: shown, never resolved to "victim"
    links = _hrefs(editor.get("/jobs").text)
    assert "/jobs/x%2F..%2Fvictim" in links and not any(h.startswith("/jobs/x/") for h in links)


def test_a_key_with_reserved_characters_is_read_and_cancelled_through_its_own_forms(editor: Any, now: Any) -> None:
    key = "order 7?cancel=1#top & 100%"
    _job(editor, now, key)
    _job(editor, now, "order 7")
    encoded = "/jobs/order%207%3Fcancel%3D1%23top%20%26%20100%25"
    assert encoded in _hrefs(editor.get("/jobs").text)
    page = editor.get(encoded).text
    assert f"{encoded}/cancel" in _hrefs(page) and f"/jobs/new?key={encoded[6:]}" in _hrefs(page)
    done = editor.post(f"{encoded}/cancel")
    assert done.status_code == 303 and done.headers["location"] == encoded
    assert (_state(editor, key), _state(editor, "order 7")) == ("cancelled", "pending")


@pytest.mark.parametrize("key", ["..", ".", "run:4", "a/b", "tab\there"], ids=repr)
def test_the_form_refuses_a_key_no_page_could_address(editor: Any, key: str) -> None:
    editor.get("/jobs/new")
    answer = editor.post("/jobs/new", {"key": key, "script_id": editor.script_id, "run_at": "2030-01-01T09:00",
                                       "timezone": "UTC", "payload": "null", "max_attempts": "3"})
    assert answer.status_code == 422 and "key" in answer.text.lower()
    with editor.db.tenant_session(editor.tenant) as s:
        assert s.execute(select(Job.key)).all() == []


def test_a_chain_begun_by_a_run_is_named_by_that_run(editor: Any, now: Any) -> None:
    _job(editor, now, "follow-1", root_key="run:42", depth=1, created_by_run_id=42)
    _job(editor, now, "follow-1.a", root_key="run:42", depth=2)
    chain = editor.get("/jobs/chain/run%3A42").text
    assert re.search(r'Chain begun by <a href="/runs/42">run #42</a>', chain)
    assert "/jobs/follow-1" in _hrefs(chain) and "/jobs/follow-1.a" in _hrefs(chain)
    job = html.unescape(editor.get("/jobs/follow-1.a").text)
    assert re.search(r'Started by</dt><dd><a href="/runs/42">run #42</a>', job)
    assert "/jobs/chain/run%3A42" in _hrefs(job)
