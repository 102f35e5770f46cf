"""The OpenAPI document walked whole: every field described, every request and answer with
an example, and the examples true to the API (a request example is accepted, an answer example has
the model's fields)."""

from __future__ import annotations

from typing import Any

import pytest

from almanac.web.openapi_examples import example_of


def _properties(schema: dict[str, Any], where: str):
    for name, prop in schema.get("properties", {}).items():
        yield f"{where}.{name}", prop
        yield from _properties(prop, f"{where}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(prop.get(key), dict):
                yield from _properties(prop[key], f"{where}.{name}[]")


def _operations(doc: dict[str, Any]):
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            yield f"{method.upper()} {path}", operation


@pytest.fixture
def doc(app) -> dict[str, Any]:
    return app.openapi()


def test_every_schema_property_has_a_description(doc):
    missing = [where for name, schema in doc["components"]["schemas"].items()
               for where, prop in _properties(schema, name) if not prop.get("description")]
    assert missing == []


def test_every_request_body_has_an_example(doc):
    missing = [op_id for op_id, op in _operations(doc) if "requestBody" in op
               and not all("example" in c or "examples" in c for c in op["requestBody"]["content"].values())]
    assert missing == []


def test_every_operation_has_an_example_answer(doc):
    """A success answer with a body has an example; an answer without one (204) is all it can say."""
    missing = []
    for op_id, op in _operations(doc):
        successes = {status: r for status, r in op["responses"].items() if status.startswith("2")}
        assert successes, op_id
        with_body = [r for status, r in successes.items() if status != "204"]
        if not with_body:
            assert any(r.get("content", {}).get("application/json", {}).get("example")
                       for r in op["responses"].values()), op_id  # its errors still have examples
            continue
        if not all(("example" in c or "examples" in c) for r in with_body for c in r.get("content", {}).values()):
            missing.append(op_id)
        if not all(r.get("content") for r in with_body):
            missing.append(op_id + " (no content)")
    assert missing == []


def test_answer_examples_have_exactly_the_models_fields(doc):
    schedule = doc["paths"]["/api/v1/schedules/{schedule_id}"]["get"]["responses"]["200"]["content"]
    model = doc["components"]["schemas"]["ScheduleOut"]
    assert set(schedule["application/json"]["example"]) == set(model["properties"])
    listing = doc["paths"]["/api/v1/runs"]["get"]["responses"]["200"]["content"]["application/json"]["example"]
    assert set(listing) == {"items", "next_cursor"} and listing["items"][0]["status"] == "succeeded"
    assert example_of(doc, {"type": "array", "items": {"type": "integer"}}) == [1]


def test_request_examples_are_accepted_by_the_api(app, make_tenant, issue_token):
    """The examples a reader copies work: each one sent to its operation is not refused as invalid."""
    from fastapi.testclient import TestClient

    doc = app.openapi()
    tenant = make_tenant()
    client = TestClient(app, headers={"Authorization": f"Bearer {issue_token(tenant, 'admin')}"})
    script = client.post("/api/v1/scripts", json=doc["paths"]["/api/v1/scripts"]["post"]["requestBody"]
                         ["content"]["application/json"]["example"])
    assert script.status_code == 201, script.text
    ids = {"script_id": script.json()["id"], "schedule_id": 1, "target_id": 1, "user_id": 1, "key": "recheck-7",
           "name": "API_TOKEN"}
    refused = []
    for op_id, op in _operations(doc):
        if "requestBody" not in op or op_id == "POST /api/v1/scripts":
            continue
        method, path = op_id.split(" ", 1)
        body = dict(op["requestBody"]["content"]["application/json"]["example"]) if isinstance(
            op["requestBody"]["content"]["application/json"]["example"], dict) else None
        if body and "script_id" in body:
            body["script_id"] = ids["script_id"]
        for field, items in list((body or {}).items()):  # a batch: each item names the script too
            if isinstance(items, list):
                body[field] = [{**i, "script_id": ids["script_id"]} if isinstance(i, dict) and "script_id" in i
                               else i for i in items]
        answer = client.request(method, path.format(**ids), json=body)
        if answer.status_code == 422 or answer.status_code >= 500:
            refused.append((op_id, answer.status_code, answer.text[:200]))
    assert refused == []
