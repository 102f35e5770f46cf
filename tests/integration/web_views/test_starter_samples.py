"""Every starter template runs as it is: saved from the page, run with the payload the script page
offers, it ends `succeeded`, or `failed` with the one setup step its own comments ask for
(a host on the egress allowlist, a secret). On SQLite and PostgreSQL: the run goes through the store."""

from __future__ import annotations

import re

import pytest

from almanac.web.views import script_extras
from tests.conftest import BACKENDS

PAYLOAD = re.compile(r'<textarea id="payload" name="payload"[^>]*>([^<]*)</textarea>')
STATUS = re.compile(r'id="run-status">(\w+)<')


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def _comments(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if line.lstrip().startswith("//"))


@pytest.mark.parametrize("slug", [s.slug for s in script_extras.STARTERS])
def test_a_starter_saved_from_the_page_runs_with_the_payload_the_page_offers(signed_in, slug):
    starter = script_extras.starter(slug)
    b = signed_in("admin")
    b.get(f"/scripts/new?template={slug}")
    saved = b.post("/scripts/new", {"name": slug, "source": starter.source, "timeout_ms": "5000", "memory_mb": "32"})
    assert saved.status_code == 303, saved.text[:2000]
    page = b.get(saved.headers["location"]).text
    offered = PAYLOAD.search(page).group(1).replace("&#34;", '"').replace("&quot;", '"')
    assert offered == starter.payload  # the sample survives the save: the page offers it, not {}
    html = b.post(saved.headers["location"] + "/run", {"payload": offered}, headers={"HX-Request": "true"}).text
    status = STATUS.search(html).group(1)
    if status == "succeeded":
        return
    assert status == "failed" and starter.explains, f"{slug}: {status}: {html[:1500]}"
    error = re.search(r'role="alert">(.*?)</p>', html, re.S).group(1)
    assert starter.explains in error, error  # the failure names the setup step ...
    assert starter.explains in _comments(starter.source)  # ... that the template's comments ask for


def test_the_sample_payload_is_read_from_the_sources_payload_comment():
    assert script_extras.sample_payload('// x\n// Payload: {"a": [1]}\nexport default () => 1;\n') == '{"a": [1]}'
    assert script_extras.sample_payload("export default () => 1;\n") is None
    assert script_extras.sample_payload("// Payload: {not json\n") is None
    for starter in script_extras.STARTERS:
        assert script_extras.sample_payload(starter.source) == starter.payload != "{}", starter.slug
