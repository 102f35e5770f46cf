"""The running server links its help: the API reference and the user guide, never a dead link offline."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from almanac.web import docs


def test_every_signed_in_page_links_the_guide_and_the_api_reference(make_tenant, browser):
    slug = make_tenant()
    page = browser()
    page.login(f"admin@{slug}.test")
    html = page.get("/").text
    assert 'href="/guide"' in html and 'href="/docs"' in html
    assert page.get("/docs").status_code == 200
    assert page.get("/guide", follow_redirects=True).status_code == 200


def test_the_api_reference_follows_a_dark_preference(app):
    html = TestClient(app).get("/docs").text
    assert "prefers-color-scheme: dark" in html and "/docs-assets/swagger-ui-bundle.js" in html


def test_a_missing_guide_says_how_to_build_it_and_links_the_api_reference(tmp_path: Path):
    app = FastAPI(docs_url=None, redoc_url=None)
    docs.install(app, tmp_path / "not-built")
    page = TestClient(app).get("/guide")
    assert page.status_code == 200 and "make docs" in page.text and 'href="/docs"' in page.text


def test_a_built_guide_is_served(tmp_path: Path):
    (tmp_path / "index.html").write_text("<h1>Almanac guide</h1>")
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "rules.html").write_text("<h1>Rules</h1>")
    app = FastAPI(docs_url=None, redoc_url=None)
    docs.install(app, tmp_path)
    client = TestClient(app)
    assert "Almanac guide" in client.get("/guide", follow_redirects=True).text
    assert "Rules" in client.get("/guide/guide/rules.html").text
