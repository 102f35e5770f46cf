"""A tenant's API reads wait for no other tenant's writer (SPEC section 11: nothing one tenant does
delays another tenant's requests).

On SQLite every write transaction holds the write lock of the shared file and of every tenant file
its connection has attached; a read that began its transaction the same way queued behind it (up
to the 30 s busy timeout) while one tenant's runs, run-now calls and trials kept writing. Reads now
begin a plain transaction, which in WAL mode takes no lock. PostgreSQL readers never waited: the
same test holds there as the contract.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import text

READS = ("/api/v1/schedules", "/api/v1/runs", "/api/v1/scripts", "/api/v1/tenant")


def test_another_tenant_s_reads_answer_while_a_tenant_holds_a_write_transaction(
        api: Any, services: Any, app: Any, monkeypatch: Any) -> None:
    writer, reader = api("admin"), api("admin")
    assert reader.get("/api/v1/tenant").status_code == 200  # its token's last use is written (after the answer)
    monkeypatch.setattr(app.state.token_cache, "ttl_s", 0)  # every request looks the token up (a read as well)
    answers: list[int] = []

    def read() -> None:
        answers.extend(reader.get(path).status_code for path in READS)

    with services.db.tenant_session(writer.tenant) as session:  # a writer's open transaction, as a run's record
        session.execute(text("UPDATE tenants SET name = name WHERE slug = :slug"), {"slug": writer.tenant})
        reading = threading.Thread(target=read, daemon=True)
        reading.start()
        reading.join(10)  # the busy timeout is 30 s: a read that queues behind the writer is still waiting
        answered_during = list(answers)
    reading.join(60)
    assert answered_during == [200] * len(READS), (answered_during, answers)
