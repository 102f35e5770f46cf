"""`/docs` (Swagger UI) and `/redoc` from packaged files, so they work without internet.

FastAPI's own pages load their scripts from a CDN. The files come instead from the
`fastapi-offline` package (MIT; it ships swagger-ui-bundle.js, swagger-ui.css and
redoc.standalone.js), served under /docs-assets; upgrading that package upgrades them.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
PREFIX = "/docs-assets"


def install(app: FastAPI) -> None:
    """Serve the assets and the two pages; the app is made with docs_url=None and redoc_url=None."""
    app.mount(PREFIX, StaticFiles(directory=ASSETS), name="docs-assets")
    title = f"{app.title} API"

    # Plain routes, as FastAPI adds its own docs pages: public, outside the API and the page gate.
    async def swagger(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=title,
                                   swagger_js_url=f"{PREFIX}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{PREFIX}/swagger-ui.css",
                                   swagger_favicon_url=f"{PREFIX}/favicon.png")

    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(openapi_url=app.openapi_url or "/openapi.json", title=title,
                              redoc_js_url=f"{PREFIX}/redoc.standalone.js",
                              redoc_favicon_url=f"{PREFIX}/favicon.png", with_google_fonts=False)

    app.add_route("/docs", swagger, include_in_schema=False)
    app.add_route("/redoc", redoc, include_in_schema=False)
