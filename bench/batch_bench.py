"""Creating work through the API on PostgreSQL: single PUTs, job batches, and schedule set-up by batches.

    .venv/bin/python bench/batch_bench.py                                   # quick: 2,000 PUTs, 20,000 batched jobs,
                                                                            #   20 tenants x 1,000 schedules
    .venv/bin/python bench/batch_bench.py --tenants 1000 --schedules 1000   # the issue's million schedules
    options: --puts N --put-client httpx|http|both --batch-jobs N --clients C --servers S (schedule set-up)
             --pg-url postgresql+psycopg://...

A real server (`almanac serve --no-scheduler`, one process, uvicorn) on a throwaway PostgreSQL
(tests/support/pg.py; fsync off) unless --pg-url is given, and real HTTP clients with keep-alive
(httpx; the single PUTs also with the standard library's http.client, `--put-client`): one client
for the PUTs and the job batches (1,000 jobs a request), `--clients` clients for the schedule
set-up (1,000 schedules a request, one tenant's batches per client at a time; with `--servers S`,
S server processes on one database, each client thread talking to one of them, as several
`almanac serve` behind a proxy would: `almanac serve` itself is one process). Tenants and their
script are made directly (not what is measured). Prints a table with the command and the load
average before and after.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECRET = "bench-secret-key-0123456789abcdef"
BATCH = 1000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def setup_tenants(url: str, var: Path, count: int) -> dict[str, tuple[str, int]]:
    """slug -> (editor token, script id): tenants, tokens and one script each, made directly."""
    from almanac.db import Database
    from almanac.platform.store.models import Script, ScriptVersion
    from almanac.settings import Settings
    from almanac.tenants import auth, migrations, registry

    db = Database(Settings(database_url=url, var_dir=var, secret_key=SECRET))
    migrations.upgrade_shared(db)
    now = datetime.now(timezone.utc)
    out = {}
    t0 = time.monotonic()
    for i in range(count):
        slug = f"b{i:04d}"
        # One operator account administers them all (as `almanac tenant create --admin` would with an
        # existing account): its password is hashed (argon2, ~0.1-1 s) once, not a thousand times.
        registry.create_tenant(db, slug, admin_email="operator@bench.test",
                               admin_password="correct-horse-battery" if i == 0 else None,
                               name=slug, min_interval_seconds=60, now=now)
        with db.shared_session() as s:
            token = auth.create_token(s, registry.get_tenant(s, slug), "bench", "editor", now=now)[1]
        with db.tenant_session(slug) as s:
            script = Script(name="noop", current_version=1, timeout_ms=1000, memory_mb=32, created_at=now,
                            updated_at=now)
            s.add(script)
            s.flush()
            s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1;", created_at=now))
            out[slug] = (token, script.id)
        if i % 100 == 99:
            print(f"  {i + 1} tenants, {time.monotonic() - t0:.0f} s", flush=True)
    db.dispose()
    return out


def start_server(url: str, var: Path, port: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, ALMANAC_DATABASE_URL=url, ALMANAC_VAR_DIR=str(var), ALMANAC_SECRET_KEY=SECRET,
               ALMANAC_LOG_LEVEL="warning", ALMANAC_SANDBOX_PROCESSES="0")
    proc = subprocess.Popen([str(ROOT / ".venv/bin/almanac"), "serve", "--no-scheduler", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import httpx

    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


def client(port: int, token: str) -> Any:
    import httpx

    return httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"},
                        timeout=120)


def bench_puts(port: int, token: str, script_id: int, count: int, client_kind: str = "httpx") -> float:
    """New jobs/s through single PUTs by one keep-alive client: httpx, or `http` (the standard library's
    http.client, ~0.25 ms of client CPU a request where httpx takes ~1 ms: the goal is about the server)."""
    body = {"script_id": script_id, "run_at": "2027-01-01T00:00:00Z", "payload": {"n": 1}}
    prefix = f"put-{client_kind}"
    if client_kind == "http":
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        raw = json.dumps(body).encode()

        def put(key: str) -> tuple[int, bytes]:
            conn.request("PUT", f"/api/v1/jobs/{key}", body=raw, headers=headers)
            answer = conn.getresponse()
            return answer.status, answer.read()
    else:
        c = client(port, token)

        def put(key: str) -> tuple[int, bytes]:
            answer = c.put(f"/api/v1/jobs/{key}", json=body)
            return answer.status_code, answer.content
    try:
        for i in range(20):  # warm-up (connection, caches)
            put(f"warm-{prefix}-{i}")
        t0 = time.perf_counter()
        for i in range(count):
            status, text = put(f"{prefix}-{i}")
            assert status == 201, text
        return count / (time.perf_counter() - t0)
    finally:
        conn.close() if client_kind == "http" else c.close()


def bench_job_batches(port: int, token: str, script_id: int, count: int) -> float:
    with client(port, token) as c:
        t0 = time.perf_counter()
        for start in range(0, count, BATCH):
            jobs = [{"key": f"batch-{i}", "script_id": script_id, "run_at": "2027-01-01T00:00:00Z",
                     "payload": {"n": i}} for i in range(start, min(count, start + BATCH))]
            answer = c.post("/api/v1/jobs/batch", json={"jobs": jobs})
            assert answer.status_code == 200, answer.text
        return count / (time.perf_counter() - t0)


def fill_tenant(c: Any, token: str, script_id: int, count: int) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    for start in range(0, count, BATCH):
        schedules = [{"name": f"s{i}", "script_id": script_id, "rule": "@daily"}
                     for i in range(start, min(count, start + BATCH))]
        answer = c.post("/api/v1/schedules/batch", json={"schedules": schedules}, headers=auth)
        assert answer.status_code == 201, answer.text


def bench_schedules(ports: list[int], tenants: dict[str, tuple[str, int]], per_tenant: int, clients: int) -> float:
    """Seconds to fill every tenant; each client thread keeps one keep-alive connection for the tenants it
    takes (an httpx.Client per tenant cost ~37 ms of the bench's CPU to build: its TLS context), to
    one of the servers (`ports`, taken in turn by the client threads)."""
    local = threading.local()
    made: list[Any] = []
    lock = threading.Lock()

    def fill(item: tuple[str, tuple[str, int]]) -> None:
        if not hasattr(local, "client"):
            with lock:
                local.client = client(ports[len(made) % len(ports)], "")
                made.append(local.client)
        fill_tenant(local.client, item[1][0], item[1][1], per_tenant)

    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(fill, tenants.items()))
        return time.perf_counter() - t0
    finally:
        for c in made:
            c.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--puts", type=int, default=2000)
    parser.add_argument("--batch-jobs", type=int, default=20_000)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--schedules", type=int, default=1000, help="per tenant (at most its quota, 10,000)")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--servers", type=int, default=1, help="`almanac serve` processes for the schedule set-up "
                        "(each client thread talks to one of them), as several behind a proxy would")
    parser.add_argument("--put-client", choices=("httpx", "http", "both"), default="both",
                        help="the single PUTs' client: httpx, http.client (lighter), or both (httpx first)")
    parser.add_argument("--pg-url")
    args = parser.parse_args()
    load_before = os.getloadavg()
    from tests.support.pg import PgServer

    pg = None if args.pg_url else PgServer()
    url = args.pg_url or pg.start()  # type: ignore[union-attr]
    var = Path(tempfile.mkdtemp(prefix="almanac-batch-bench-"))
    server = None
    extra: list[subprocess.Popen[bytes]] = []
    try:
        t0 = time.monotonic()
        kinds = ("httpx", "http") if args.put_client == "both" else (args.put_client,)
        tenants = setup_tenants(url, var, max(1, args.tenants, len(kinds)))
        tenant_setup = time.monotonic() - t0
        port = _free_port()
        server = start_server(url, var, port)
        first_token, first_script = next(iter(tenants.values()))
        # Each PUT client on a tenant of its own: both start with no pending jobs (every new job's quota
        # check counts the tenant's pending jobs, so a second run on the same tenant would be slower).
        puts = {kind: bench_puts(port, token, script, args.puts, kind)
                for kind, (token, script) in zip(kinds, tenants.values())}
        batched = bench_job_batches(port, first_token, first_script, args.batch_jobs)
        ports = [port]
        for _ in range(args.servers - 1):
            ports.append(_free_port())
            extra.append(start_server(url, var, ports[-1]))
        setup = bench_schedules(ports, tenants, args.schedules, args.clients)
        total = len(tenants) * args.schedules
        print()
        print("command: " + " ".join([Path(sys.executable).name, *sys.argv]))
        print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
              f"after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  (cores: {os.cpu_count()})")
        print()
        print("| what | size | result |")
        print("|---|---|---|")
        for kind, rate in puts.items():
            print(f"| single `PUT /api/v1/jobs/{{key}}`, 1 {kind} client, keep-alive | {args.puts} | {rate:.0f} jobs/s |")
        print(f"| `POST /api/v1/jobs/batch` (1,000 a request), 1 client | {args.batch_jobs} | {batched:.0f} jobs/s |")
        servers = f", {args.servers} servers" if args.servers > 1 else ""
        print(f"| `POST /api/v1/schedules/batch` set-up, {args.clients} clients{servers} | {total:,} schedules over "
              f"{len(tenants)} tenants | {setup:.1f} s ({total / setup:.0f}/s) |")
        print(f"| tenants (one admin account) + tokens + script, direct (not the API) | {len(tenants)} | "
              f"{tenant_setup:.1f} s ({tenant_setup / len(tenants) * 1000:.0f} ms a tenant) |")
    finally:
        for proc in [*extra, *([server] if server is not None else [])]:
            proc.terminate()
            proc.wait(30)
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    main()
