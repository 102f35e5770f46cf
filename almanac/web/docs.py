"""`/docs` (Swagger UI) and `/redoc` from packaged files, so they work without internet; `/guide`, the user guide.

FastAPI's own pages load their scripts from a CDN. The files come instead from the
`fastapi-offline` package (MIT; it ships swagger-ui-bundle.js, swagger-ui.css and
redoc.standalone.js), served under /docs-assets; upgrading that package upgrades them.
The user guide is a static site that `make docs` builds (MkDocs); the server serves it when it
is there, and otherwise a page that says how to build it, so the link in the navigation is never
dead, online or off.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
PREFIX = "/docs-assets"


# Swagger UI has no dark theme: in a dark preference the page is inverted, its colours turned back.
DARK_CSS = ("<style>@media (prefers-color-scheme: dark) {html {background: #111; filter: invert(0.88) "
            "hue-rotate(180deg);} .swagger-ui img {filter: invert(1) hue-rotate(180deg);}}</style>")

GUIDE_MISSING = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Almanac user guide</title>
<link rel="stylesheet" href="/static/style.css"></head><body><main id="main">
<h1>The user guide is not built on this server</h1>
<p>The guide is built from the <code>docs/</code> folder of Almanac's repository with <code>make docs</code>,
into <code>site/</code>; a server started in the repository then serves it here
(<code>ALMANAC_GUIDE_DIR</code> points elsewhere). The same pages can be read as Markdown in
<code>docs/</code>.</p>
<p>The API reference is always here: <a href="/docs">/docs</a>.</p>
</main></body></html>"""


def install(app: FastAPI, guide_dir: Path | None = None) -> None:
    """Serve the assets, the two API pages and the guide; the app is made with docs_url=None and redoc_url=None."""
    app.mount(PREFIX, StaticFiles(directory=ASSETS), name="docs-assets")
    title = f"{app.title} API"

    # Plain routes, as FastAPI adds its own docs pages: public, outside the API and the page gate.
    async def swagger(request: Request) -> HTMLResponse:
        page = get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=title,
                                   swagger_js_url=f"{PREFIX}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{PREFIX}/swagger-ui.css",
                                   swagger_favicon_url=f"{PREFIX}/favicon.png")
        return HTMLResponse(bytes(page.body).decode().replace("</head>", DARK_CSS + "</head>", 1))

    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(openapi_url=app.openapi_url or "/openapi.json", title=title,
                              redoc_js_url=f"{PREFIX}/redoc.standalone.js",
                              redoc_favicon_url=f"{PREFIX}/favicon.png", with_google_fonts=False)

    app.add_route("/docs", swagger, include_in_schema=False)
    app.add_route("/redoc", redoc, include_in_schema=False)
    _install_guide(app, guide_dir)


def _install_guide(app: FastAPI, guide_dir: Path | None) -> None:
    if guide_dir is not None and (guide_dir / "index.html").is_file():
        app.mount("/guide/", StaticFiles(directory=guide_dir, html=True), name="guide")

        async def to_guide(request: Request) -> RedirectResponse:
            return RedirectResponse("/guide/index.html")

        app.add_route("/guide", to_guide, include_in_schema=False)
        return

    async def guide_missing(request: Request) -> HTMLResponse:
        return HTMLResponse(GUIDE_MISSING)

    app.add_route("/guide", guide_missing, include_in_schema=False)
    # The pages link into the guide (the editor's reference to the scripts page): without it built,
    # those links say how to build it rather than end in a 404.
    app.add_route("/guide/{page:path}", guide_missing, include_in_schema=False)
