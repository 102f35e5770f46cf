"""The dashboard: upcoming runs, recent failures, counts by status."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from almanac.web.views.common import PagePrincipal, page_router, render

router = page_router()


@router.get("/")
def dashboard(request: Request, principal: PagePrincipal) -> Response:
    return render(request, "dashboard.html", upcoming=[], failures=[], counts={})
