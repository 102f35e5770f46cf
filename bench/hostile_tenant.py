"""The hostile-tenant scenario of `load_bench.py`: a real server, one tenant flooding it, another measured.

Kept apart from load_bench.py because it drives a server process over HTTP (the other scenarios
drive the scheduler in-process). One tenant ("attacker") floods the server with run-now calls,
"Run with payload" trials through the page, and jobs due at once, every run waiting on a local
server that never answers until the run's timeout; the other tenant ("victim") has a job due
every 0.5 s and calls the API and `/healthz` in a loop.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

WAIT_TIMEOUT_MS = 3000
SERVER_START_S = 600.0  # the first start compiles the sandbox image
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


class _Hang(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        time.sleep(10)  # longer than any run's timeout: the run waits on it until its deadline

    def log_message(self, *args: Any) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(bench: Any, args: Any) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {"ALMANAC_DATABASE_URL": bench.settings.database_url, "ALMANAC_VAR_DIR": str(bench.var),
           "ALMANAC_SECRET_KEY": bench.settings.secret_key, "ALMANAC_ALLOW_PRIVATE_TARGETS": "1",
           "ALMANAC_SANDBOX_PROCESSES": str(args.processes), "ALMANAC_LOG_LEVEL": "warning",
           "PATH": "/usr/bin:/bin"}
    if args.code is not None:  # the server imports almanac from that checkout too (the old tree, side by side)
        env["PYTHONPATH"] = str(args.code.resolve())
    almanac = str(Path(sys.executable).parent / "almanac")
    log = (bench.var / "server.log").open("w")
    proc = subprocess.Popen([almanac, "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    while time.monotonic() - started < SERVER_START_S:
        if _pool_alive(base) >= args.processes:
            print(f"server ready, its sandbox pool up, in {time.monotonic() - started:.1f} s", file=sys.stderr)
            return proc, base
        time.sleep(0.2)
    raise RuntimeError("the server did not start: see " + str(bench.var / "server.log"))


def _pool_alive(base: str) -> float:
    """The server's sandbox workers alive (/metrics), 0 while it starts.

    The flood begins only once they are: a fresh var dir compiles the sandbox's image first (tens of
    seconds on a loaded box, once per install), and runs meanwhile would measure that, not the sharing."""
    try:
        text = httpx.get(base + "/metrics", timeout=5).text
    except httpx.HTTPError:
        return 0.0
    found = re.search(r"^almanac_sandbox_workers_alive (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _client(bench: Any, base: str, slug: str) -> httpx.Client:
    from almanac.tenants import auth, registry

    with bench.db.shared_session() as session:
        token = auth.create_token(session, registry.get_tenant(session, slug), "b", "admin",
                                  now=datetime.now(timezone.utc))[1]
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def _page(base: str, slug: str) -> tuple[httpx.Client, str]:
    page = httpx.Client(base_url=base, timeout=60, follow_redirects=False)
    csrf = CSRF.search(page.get("/login").text).group(1)  # type: ignore[union-attr]
    page.post("/login", data={"email": f"a@{slug}.test", "password": "correct-horse-battery", "csrf_token": csrf})
    return page, CSRF.search(page.get("/").text).group(1)  # type: ignore[union-attr]


def _loop(stop: threading.Event, counts: dict[int, int], call: Any) -> None:
    while not stop.is_set():
        try:
            status = call().status_code
        except httpx.HTTPError:
            status = 0
        counts[status] = counts.get(status, 0) + 1


def _attack(attacker: httpx.Client, base: str, slug: str, hang: str, jobs: int) -> list[Any]:
    """The attacker's set-up: its allowlist, the waiting script, its jobs; the calls it floods with."""
    attacker.put("/api/v1/egress", json={"hosts": [hang.split("/")[2]]})
    waits = attacker.post("/api/v1/scripts", json={"name": "waits", "timeout_ms": WAIT_TIMEOUT_MS, "source":
                          f"export default async () => (await fetch('{hang}')).status;"}).json()["id"]
    schedule = attacker.post("/api/v1/schedules", json={"name": "w", "script_id": waits, "rule": "@daily"}).json()["id"]
    now = datetime.now(timezone.utc).isoformat()
    attacker.post("/api/v1/jobs/batch", json={"jobs": [{"key": f"w{i}", "script_id": waits, "run_at": now}
                                                       for i in range(jobs)]})
    page, csrf = _page(base, slug)
    trial = lambda: page.post(f"/schedules/{schedule}/try", data={"payload": "{}", "csrf_token": csrf},  # noqa: E731
                              headers={"HX-Request": "true"})
    run_now = lambda: attacker.post(f"/api/v1/scripts/{waits}/run", json={})  # noqa: E731
    return [run_now] * 8 + [trial] * 2


def flood_and_measure(bench: Any, args: Any) -> dict[str, Any]:
    from load_bench import pct, secs

    attacker_slug, victim_slug = bench.tenant("attacker"), bench.tenant("victim")
    hang = ThreadingHTTPServer(("127.0.0.1", 0), _Hang)
    hang.daemon_threads = True
    threading.Thread(target=hang.serve_forever, daemon=True).start()
    proc, base = _serve(bench, args)
    stop, counts = threading.Event(), {}  # type: ignore[var-annotated]
    try:
        attacker, victim = _client(bench, base, attacker_slug), _client(bench, base, victim_slug)
        calls = _attack(attacker, base, attacker_slug, f"http://127.0.0.1:{hang.server_address[1]}/hang",
                        args.hostile_jobs)
        noop = victim.post("/api/v1/scripts", json={"name": "n", "source": "export default () => 1;"}).json()["id"]
        first = datetime.now(timezone.utc) + timedelta(seconds=1)
        due = [first + timedelta(seconds=0.5 * i) for i in range(int(args.hostile_s * 2) - 2)]
        victim.post("/api/v1/jobs/batch", json={"jobs": [{"key": f"v{i}", "script_id": noop, "run_at": at.isoformat()}
                                                         for i, at in enumerate(due)]})
        threads = [threading.Thread(target=_loop, args=(stop, counts, call), daemon=True) for call in calls]
        for thread in threads:
            thread.start()
        print(f"flood started: server pid {proc.pid}", file=sys.stderr, flush=True)  # for a profiler to attach
        health, api = _probe(base, victim, args.hostile_s)
        stop.set()
        time.sleep(WAIT_TIMEOUT_MS / 1000 + 2)  # the last runs end and are recorded
        runs = victim.get("/api/v1/runs", params={"limit": 200}).json()["items"]
    finally:
        stop.set()
        hang.shutdown()
        proc.terminate()  # it lets the runs it holds end first: those still waiting end at their timeout
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    lags = [secs(datetime.fromisoformat(r["started_at"]), datetime.fromisoformat(r["scheduled_for"]))
            for r in runs if r["started_at"]]
    return {"healthz_p50_ms": round(pct(health, 50) * 1000, 1), "healthz_p99_ms": round(pct(health, 99) * 1000, 1),
            "api_p50_ms": round(pct(api, 50) * 1000, 1), "api_p99_ms": round(pct(api, 99) * 1000, 1),
            "victim_runs": f"{sum(1 for r in runs if r['status'] == 'succeeded')}/{len(due)}",
            "victim_lag_p50_s": round(pct(lags, 50), 3), "victim_lag_p99_s": round(pct(lags, 99), 3),
            "victim_lag_max_s": round(max(lags), 3) if lags else None,
            "attacker_answers": dict(sorted(counts.items()))}


def _probe(base: str, victim: httpx.Client, seconds: float) -> tuple[list[float], list[float]]:
    probe = httpx.Client(base_url=base, timeout=60)
    health: list[float] = []
    api: list[float] = []
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        started = time.monotonic()
        probe.get("/healthz")
        health.append(time.monotonic() - started)
        started = time.monotonic()
        victim.get("/api/v1/schedules")
        api.append(time.monotonic() - started)
        time.sleep(0.02)
    return health, api
