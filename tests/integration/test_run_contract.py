"""one run
contract; a run's writes are buffered and applied exactly once with its finish, and not at all
if it does not succeed; reads see the run's own writes; sizes are UTF-8 bytes of stored JSON."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from tests.support.inprocess import sandbox_cache, services  # noqa: F401  (fixtures: scripts run in-process)

WRITER = """export default async function (event) {
  const n = (await almanac.kv.get("n")) ?? 0;
  await almanac.kv.set("n", n + 1);
  almanac.emit("counted", {n: n + 1});
  await almanac.schedule.at("2026-12-01T09:00:00Z", {n}, {key: "again"});
  if (event.payload && event.payload.fail) throw new Error("after the writes");
  return n + 1;
}"""


def _script(client: Any, source: str, name: str = "s") -> int:
    # A deadline no busy machine reaches: these runs are meant to finish, and the default 1 s ran out
    # on PostgreSQL at load 20 (CI, a kv.set loop).
    answer = client.post("/api/v1/scripts", json={"name": name, "source": source, "timeout_ms": 20_000})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _events(built: Any, tenant: str) -> list[str]:
    from sqlalchemy import select

    from almanac.platform.store.models import Event

    with built.db.tenant_session(tenant) as s:
        return list(s.execute(select(Event.data).where(Event.topic == "counted").order_by(Event.id)).scalars())


def test_writes_apply_once_at_finish_and_not_at_all_when_the_run_fails(api: Any, services: Any) -> None:  # noqa: F811
    admin = api("admin")
    sid = _script(admin, WRITER)
    failed = admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": {"fail": True}}).json()
    assert failed["status"] == "failed" and "after the writes" in failed["error"]
    assert _events(services, admin.tenant) == []
    assert admin.get("/api/v1/kv/n").status_code == 404
    assert admin.get("/api/v1/jobs/again").status_code == 404
    first = admin.post(f"/api/v1/scripts/{sid}/run", json={}).json()
    assert first["status"] == "succeeded" and first["output"] == 1
    assert _events(services, admin.tenant) == ['{"n":1}']
    assert admin.get("/api/v1/kv/n").json()["value"] == 1
    assert admin.get("/api/v1/jobs/again").json()["payload"] == {"n": 0}
    second = admin.post(f"/api/v1/scripts/{sid}/run", json={}).json()
    assert second["output"] == 2 and admin.get("/api/v1/kv/n").json()["value"] == 2  # once per run, not twice
    assert _events(services, admin.tenant) == ['{"n":1}', '{"n":2}']


def test_a_run_reads_its_own_writes(api: Any) -> None:
    admin = api("admin")
    for key in ("a", "b"):
        assert admin.put(f"/api/v1/kv/{key}", json={"value": key}).status_code == 200
    sid = _script(admin, """export default async () => {
      await almanac.kv.set("c", {v: 3});
      await almanac.kv.delete("b");
      await almanac.kv.set("a", "A");
      return [await almanac.kv.get("c"), await almanac.kv.get("b"), await almanac.kv.get("a"),
              await almanac.kv.list(""), await almanac.kv.list("b")];
    }""")
    run = admin.post(f"/api/v1/scripts/{sid}/run", json={}).json()
    assert run["status"] == "succeeded", run
    assert run["output"] == [{"v": 3}, None, "A", ["a", "c"], []]
    keys = [item["key"] for item in admin.get("/api/v1/kv").json()["items"]]
    assert keys == ["a", "c"] and admin.get("/api/v1/kv/a").json()["value"] == "A"


def test_a_36_kb_non_ascii_value_is_under_64_kib_as_utf8(api: Any) -> None:
    admin = api("admin")
    sid = _script(admin, """export default async (e) => {
      await almanac.kv.set("big", "é".repeat(e.payload.n));
      return "stored";
    }""")
    ok = admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": {"n": 18_000}}).json()
    assert ok["status"] == "succeeded", ok  # 36,002 bytes stored; 108,002 if counted as ASCII-escaped JSON
    assert admin.get("/api/v1/kv/big").json()["value"] == "é" * 18_000
    over = admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": {"n": 33_000}}).json()
    assert over["status"] == "failed" and "66002 bytes, over the 65536-byte limit" in over["error"]


ROOT = Path(__file__).resolve().parents[2] / "almanac"


def test_one_result_type_from_the_sandbox_to_the_record() -> None:
    """No second type carries how a run ended on its way to the record: a dataclass with a status, an
    output or error, and a duration is the contract's RunResult, and nothing else. (The stored row,
    `models.Run`, and the API's view of it, `RunOut`, are what the record becomes, not a result.)"""
    found = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            decorators = [ast.unparse(d) for d in node.decorator_list] if isinstance(node, ast.ClassDef) else []
            if isinstance(node, ast.ClassDef) and any(d.startswith("dataclass") for d in decorators):
                fields = {t.target.id for t in node.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
                if "status" in fields and ({"output", "error"} & fields) and "duration_ms" in fields:
                    found.append(f"{path.relative_to(ROOT.parent)}:{node.name}")
    assert found == ["almanac/sandbox/contract.py:RunResult"]
