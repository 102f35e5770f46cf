"""Field descriptions and examples for the OpenAPI document (`openapi.document` calls `annotate`).

Every schema property gets its description and an example from `openapi_fields`; every
operation's request body its example from `openapi_fields.REQUESTS`; every success answer an
example built from its schema, out of the properties' examples, so an answer's example has
exactly the fields the model has and cannot drift from it.
"""

from __future__ import annotations

from typing import Any

from almanac.web import openapi_fields

_BY_TYPE: dict[str, Any] = {"string": "text", "integer": 1, "number": 1.5, "boolean": True}
_MAX_DEPTH = 6


def annotate(doc: dict[str, Any]) -> None:
    schemas = doc.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        for field, prop in schema.get("properties", {}).items():
            known = openapi_fields.field_text(name, field)
            if known is None:
                continue  # the test that walks the document names it
            description, example = known
            prop.setdefault("description", description)
            if example is not None and "examples" not in prop:
                prop["examples"] = [example]
    for path, operations in doc.get("paths", {}).items():
        for method, operation in operations.items():
            _request_example(operation, openapi_fields.REQUESTS.get((method, path)))
            _answer_examples(doc, path, operation)


def _request_example(operation: dict[str, Any], example: Any) -> None:
    body = operation.get("requestBody")
    if body is None or example is None:
        return
    for content in body.get("content", {}).values():
        content.setdefault("example", example)


def _answer_examples(doc: dict[str, Any], path: str, operation: dict[str, Any]) -> None:
    plain = openapi_fields.PLAIN_ANSWERS.get(path)
    for status, response in operation.get("responses", {}).items():
        if not status.startswith("2"):
            continue
        if plain is not None:
            media, example = plain
            response["content"] = {media: {"schema": {"type": "string"} if media == "text/plain" else
                                           response.get("content", {}).get(media, {}).get("schema", {}),
                                           "example": example}}
            continue
        for content in response.get("content", {}).values():
            if "example" not in content and content.get("schema"):
                content["example"] = example_of(doc, content["schema"])


def example_of(doc: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> Any:
    """An example value for `schema`: its own example, else one built from its parts."""
    if depth > _MAX_DEPTH:
        return None
    if "$ref" in schema:
        return example_of(doc, _resolve(doc, schema["$ref"]), depth + 1)
    if schema.get("examples"):
        return schema["examples"][0]
    if "example" in schema:
        return schema["example"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        choices = [c for c in schema.get(key, []) if c.get("type") != "null"]
        if choices:
            return example_of(doc, choices[0], depth + 1)
    kind = schema.get("type")
    if kind == "array":
        return [example_of(doc, schema.get("items", {}), depth + 1)]
    if kind == "object" or "properties" in schema:
        if "properties" in schema:
            return {name: example_of(doc, prop, depth + 1) for name, prop in schema["properties"].items()}
        extra = schema.get("additionalProperties")
        return {"schedules": example_of(doc, extra, depth + 1)} if isinstance(extra, dict) else {}
    if schema.get("format") == "date-time":
        return openapi_fields.AT
    return _BY_TYPE.get(kind) if isinstance(kind, str) else None


def _resolve(doc: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = doc
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node  # type: ignore[no-any-return]
