"""The one place where every error becomes the SPEC section 4 envelope."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from almanac import jsonsafe
from almanac.errors import AlmanacError

log = logging.getLogger("almanac.web")

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
}


def envelope(status: int, code: str, message: str, details: Any = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details:
        body["details"] = details
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if code == "rate_limited" and isinstance(details, dict) and "retry_after_s" in details:
        headers = {"Retry-After": str(int(details["retry_after_s"]))}
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _validation_message(errors: list[dict[str, Any]]) -> str:
    first = errors[0] if errors else {}
    where = ".".join(str(part) for part in first.get("loc", ()) if part not in ("body",)) or "request"
    return f"{where}: {first.get('msg', 'is invalid')}."


def _printable(value: Any) -> Any:
    """Validation messages may quote the input: keep them encodable (no lone surrogates)."""
    return jsonsafe.clean_text(value, 1024) if isinstance(value, str) else value


def install(app: FastAPI, on_page_error: Any = None) -> None:
    """Register handlers. `on_page_error(request, status, code, message)` may answer browser pages instead."""

    async def handle(request: Request, status: int, code: str, message: str, details: Any = None) -> Any:
        if on_page_error is not None and not request.url.path.startswith("/api/"):
            page = await on_page_error(request, status, code, message)
            if page is not None:
                return page
        return envelope(status, code, message, details)

    @app.exception_handler(AlmanacError)
    async def _almanac(request: Request, exc: AlmanacError) -> Any:
        return await handle(request, exc.status, exc.code, exc.message, exc.details)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Any:
        errors = [
            {"loc": [_printable(p) for p in e.get("loc", ())], "msg": _printable(e.get("msg", "")),
             "type": e.get("type", "")} for e in exc.errors()
        ]
        bad_id = next((e["loc"][1] for e in errors if e["loc"][:1] == ["path"] and len(e["loc"]) > 1
                       and str(e["loc"][1]).endswith("_id")), None)
        if bad_id is not None:  # SPEC section 3: an id that is not a valid id at all is not found
            return await handle(request, 404, "not_found", f"There is no such {bad_id[:-3].replace('_', ' ')}.")
        return await handle(request, 422, "validation_error", _validation_message(errors), {"errors": errors})

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Any:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) and exc.detail else code.replace("_", " ")
        if exc.status_code == 404 and message == "Not Found":
            message = f"Nothing at {request.url.path}."
        if exc.status_code == 400 and request.url.path.startswith("/api/"):
            # FastAPI's "error parsing the body" (JSON nested past the parser's recursion limit, say)
            return await handle(request, 422, "validation_error", "The body is not JSON Almanac can read.")
        if exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}."
        return await handle(request, exc.status_code, code, message)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Any:
        log.exception("unhandled_error", extra={"path": request.url.path})
        return envelope(500, "internal_error", "Something went wrong on our side; it has been logged.")
