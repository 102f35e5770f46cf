"""API fuzzing from the OpenAPI document: schemathesis against the ASGI app, in-process, on SQLite and PostgreSQL.

Every `/api/v1` operation gets positive and negative cases (hypothesis, derandomized so the
run is the same every time, a bounded number of examples), and every answer is checked: no
server error, a status the document declares, a content type and a body that conform to it.
A stateful run follows the document's links (create a script, then read, change and run it).
Both run once on each backend, with the same examples (what one backend refuses in a comparison
or a column, the other may quietly store). It must find nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance, negative_data_rejection, response_schema_conformance, status_code_conformance,
)

from fastapi.testclient import TestClient

from almanac.platform.clock import ManualClock
from almanac.settings import Settings
from almanac.tenants import auth, migrations, registry
from almanac.web.app import create_app
from almanac.web.token_cache import TokenCache
from almanac.worker import SandboxRunner, build_services

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=timezone.utc)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]
EXAMPLES = 8
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
SCRIPT = "export default async function (event) { await almanac.kv.set('seen', 1); return event.payload; }"
SECRET = "test-secret-key-0123456789abcdef"
BACKENDS = os.environ.get("ALMANAC_TEST_BACKENDS", "sqlite,postgresql").split(",")  # as tests/conftest.py


def _config(url: str, var: Path) -> Settings:
    return Settings(database_url=url, var_dir=var, secret_key=SECRET)


VAR = Path(tempfile.mkdtemp(prefix="almanac-fuzz-")) / "var"
# Built at import, as schemathesis needs the operations at collection (its lazy `from_fixture` does not
# work on pytest 9); building touches no database and starts nothing. Each backend's fixture below hands
# the app services of its own, as tests/support/apps.py does.
APP = create_app(_config(f"sqlite:///{VAR}/unused.db", VAR),
                 services=build_services(_config(f"sqlite:///{VAR}/unused.db", VAR), clock=ManualClock(NOW),
                                         runner=SandboxRunner(VAR / "cache", processes=0)))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP).include(path_regex="^/api/v1/")
# Refusing a body over 1 MiB (413) is refusing it, too.
schema.config.checks.negative_data_rejection.expected_statuses.append("413")


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    yield VAR.parent
    shutil.rmtree(VAR.parent, ignore_errors=True)


@pytest.fixture(scope="module", params=BACKENDS)
def token(request: pytest.FixtureRequest, folder: Path, database_url_for: Callable[[str, Path], str]) -> Iterator[str]:
    """On one backend: the tenant, its admin token and a few objects, so that generated ids sometimes find one."""
    var = folder / request.param
    config = _config(database_url_for(request.param, var), var)
    services = build_services(config, clock=ManualClock(NOW), runner=SandboxRunner(VAR / "cache", processes=0))
    APP.state.services, APP.state.settings, APP.state.token_cache = services, config, TokenCache(config.token_cache_s)
    migrations.upgrade_shared(services.db)
    registry.create_tenant(services.db, "fuzz", admin_email="admin@fuzz.test", admin_password="correct-horse-battery",
                           name="Fuzz", min_interval_seconds=60, now=NOW)
    with services.db.shared_session() as session:
        plaintext = auth.create_token(session, registry.get_tenant(session, "fuzz"), "fuzzer", "admin", now=NOW)[1]
    client = TestClient(APP)
    client.headers["Authorization"] = f"Bearer {plaintext}"
    sid = client.post("/api/v1/scripts", json={"name": "seed", "source": SCRIPT}).json()["id"]
    client.post("/api/v1/schedules", json={"name": "seed", "script_id": sid, "rule": "@daily"})
    client.put("/api/v1/jobs/seed", json={"script_id": sid, "run_at": "2026-12-01T00:00:00Z"})
    client.put("/api/v1/kv/seed", json={"value": {"n": 1}})
    yield plaintext
    services.close()


@schema.parametrize()
@FUZZ
def test_every_operation(case: Any, token: str) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)


class Stateful(schema.as_state_machine()):  # type: ignore[misc]
    """Sequences of calls along the links schemathesis finds (an id created by one call, used by the next)."""

    token = ""

    def get_call_kwargs(self, case: Any) -> dict[str, Any]:
        return {"headers": {"Authorization": f"Bearer {self.token}"}}

    def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
        case.validate_response(response, checks=CHECKS)


def test_stateful(token: str) -> None:
    Stateful.token = token
    Stateful.run(settings=settings(max_examples=10, stateful_step_count=5, derandomize=True, deadline=None,
                                   database=None, suppress_health_check=list(HealthCheck)))


def test_the_document_declares_errors_security_and_examples() -> None:
    doc = APP.openapi()
    assert doc["components"]["securitySchemes"]["bearer"] == {**doc["components"]["securitySchemes"]["bearer"],
                                                              "type": "http", "scheme": "bearer"}
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    operations = [(path, method, op) for path, ops in doc["paths"].items() if path.startswith("/api/v1/")
                  for method, op in ops.items()]
    assert len(operations) > 30
    for path, method, op in operations:
        assert op["security"] == [{"bearer": []}], (method, path)
        needed = {"401", "403", "422"} | ({"413", "409", "429", "404"} if method in ("post", "put", "patch") else set())
        assert needed <= set(op["responses"]), (method, path, sorted(op["responses"]))
        for status in needed:
            content = op["responses"][status]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/ErrorEnvelope"}
            assert content["example"]["error"]["code"], (method, path, status)
    assert "201" in doc["paths"]["/api/v1/jobs/{key}"]["put"]["responses"]
