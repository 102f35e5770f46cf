"""The OpenAPI document as a machine can check it (SPEC section 4).

Every `/api/v1` operation declares the bearer security scheme and each error status it can
answer, with the one error envelope (`ErrorEnvelope`) as schema and an example; FastAPI's
own 422 schema (`HTTPValidationError`) is replaced by the envelope, because that is what
`almanac.web.errors` answers. Success statuses a route sets itself (201 or 200 from
`PUT /jobs/{key}`) are declared on the route with `responses=`.

Which errors an operation can answer follows from how the API is built:
401 and 403 from the role gate on every route; 422 from validation; 404 on routes with a
path parameter and on writes (a body may name a script that does not exist); 409 and 429
(a quota) on writes; 413 on requests with a body.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from almanac.web import openapi_examples, openapi_text

API_PREFIX = "/api/v1"
WRITES = {"post", "put", "patch", "delete"}
WITH_BODY = {"post", "put", "patch"}

ERRORS: dict[int, tuple[str, str, str]] = {
    401: ("Missing, unknown or revoked API token", "unauthorized",
          "Send an API token as 'Authorization: Bearer <token>'."),
    403: ("The token's role may not do this", "forbidden", "This needs the admin role; your token has viewer."),
    404: ("No such object in this tenant (or not a valid id at all)", "not_found", "There is no schedule 42."),
    409: ("Conflicts with the current state", "conflict", "A script named 'report' exists already."),
    413: ("The request body is over 1 MiB", "payload_too_large", "The request body is over the 1024 KiB limit."),
    422: ("The input is not valid", "validation_error", "run_at: needs an offset or Z, e.g. 2026-12-01T09:00:00Z."),
    429: ("A quota of the tenant is used up", "quota_exceeded", "The tenant's quota of 10000 schedules is used up."),
}

# Operations whose 429 is also `rate_limited` (with `Retry-After`), not only a quota: what it says.
RATE_LIMITED = {
    ("post", f"{API_PREFIX}/scripts/{{script_id}}/run"):
        "A daily run budget of the tenant is used up (`quota_exceeded`: nothing was run), or the tenant "
        "already has as many run-now requests waiting as it may (`rate_limited`: try again after `Retry-After`)",
}

ENVELOPE_SCHEMA: dict[str, Any] = {
    "title": "ErrorEnvelope",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$",
                         "description": "Stable, for programs: `not_found`, `validation_error`, `quota_exceeded`, …"},
                "message": {"type": "string", "description": "For people: what is wrong and how to fix it."},
                "details": {"type": "object", "description": "More, for some codes (a rule error's position)."},
            },
        }
    },
}


def statuses_for(method: str, path: str) -> list[int]:
    statuses = [401, 403, 422]
    if "{" in path or method in WRITES:
        statuses.append(404)
    if method in WRITES:
        statuses += [409, 429]
    if method in WITH_BODY:
        statuses.append(413)
    return sorted(statuses)


def _error_response(status: int) -> dict[str, Any]:
    description, code, message = ERRORS[status]
    return {
        "description": description,
        "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ErrorEnvelope"},
            "example": {"error": {"code": code, "message": message}},
        }},
    }


def _rate_limited(description: str) -> dict[str, Any]:
    answer = _error_response(429)
    answer["description"] = description
    answer["headers"] = {"Retry-After": {"description": "Seconds after which a waiting place should be free "
                                                        "(with `rate_limited` only)", "schema": {"type": "integer"}}}
    return answer


def document(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(title=app.title, version=app.version, routes=app.routes, description=openapi_text.DESCRIPTION)
    openapi_text.annotate(doc)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["ErrorEnvelope"] = copy.deepcopy(ENVELOPE_SCHEMA)
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    components["securitySchemes"] = {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": "An API token of one tenant: `Authorization: Bearer alm_…` (almanac token create).",
    }}
    for path, operations in doc.get("paths", {}).items():
        if not path.startswith(API_PREFIX):
            continue
        for method, operation in operations.items():
            operation["security"] = [{"bearer": []}]
            responses = operation.setdefault("responses", {})
            for status in statuses_for(method, path):
                responses[str(status)] = _error_response(status)
            if (method, path) in RATE_LIMITED:
                responses["429"] = _rate_limited(RATE_LIMITED[method, path])
    openapi_examples.annotate(doc)
    return doc


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
