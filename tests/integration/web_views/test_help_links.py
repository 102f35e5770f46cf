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


def test_the_editor_reference_links_the_guides_script_pages_and_they_exist(make_tenant, browser, tmp_path: Path):
    """The script editor's reference links the guide's scripts page and script API; the built guide
    has both pages, and a server without the guide answers them with how to build it, not a 404."""
    slug = make_tenant()
    page = browser()
    page.login(f"admin@{slug}.test")
    html = page.get("/scripts/new").text
    links = ["/guide/guide/scripts.html", "/guide/reference/script-api.html"]
    assert all(f'href="{link}"' in html for link in links)
    docs_dir = Path(__file__).resolve().parents[3] / "docs"
    assert (docs_dir / "guide" / "scripts.md").is_file() and (docs_dir / "reference" / "script-api.md").is_file()
    app = FastAPI(docs_url=None, redoc_url=None)
    docs.install(app, tmp_path / "not-built")
    for link in links:
        missing = TestClient(app).get(link)
        assert missing.status_code == 200 and "make docs" in missing.text
