"""The second peer of `pg_scale_bench.py`: graphile-worker draining the same burst on the same PostgreSQL.

    (used by pg_scale_bench.py --graphile 8000; alone: python -m bench.pg_graphile DSN COUNT PROCS defaults|fast)

`install()` puts graphile-worker from the npm registry into `bench/.graphile/` (git ignores it): the newest
release whose `engines.node` the machine's node satisfies. `burst()` installs its schema (once), starts
`procs` worker processes (`bench/graphile_worker.js`) at its defaults or at the fast settings of its
performance page (24 jobs a process, a local queue of 500, completions batched, a 200 ms poll), adds
`count` no-op jobs due at one instant in one `add_jobs` call, runs `ANALYZE` on its tables as its
documentation asks after a bulk load, and waits until the job table is empty (graphile-worker deletes a
job when it succeeds). The workers report each job's start lag and their last completion on the machine's
clock: drain rate = jobs / (last completion - due).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from bench.pg_scale_bench import pct, stop_workers

HERE = Path(__file__).resolve().parent
FOLDER = HERE / ".graphile"
WORKER = HERE / "graphile_worker.js"
MODES = ("defaults", "fast")


def _node_version() -> tuple[int, ...]:
    out = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(p) for p in out.strip().lstrip("v").split("."))


def _satisfied(engines: str | None, node: tuple[int, ...]) -> bool:
    """Only the `>=X.Y.Z` form graphile-worker's releases use; anything else is taken as not satisfied."""
    if not engines:
        return True
    found = re.fullmatch(r"\s*>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*", engines)
    if not found:
        return False
    return node >= tuple(int(p or 0) for p in found.groups())


def newest_runnable() -> str:
    raw = subprocess.run(["npm", "view", "graphile-worker", "versions", "--json"], capture_output=True,
                         text=True, check=True).stdout
    stable = [v for v in json.loads(raw) if re.fullmatch(r"\d+\.\d+\.\d+", v)]
    node = _node_version()
    for version in sorted(stable, key=lambda v: tuple(int(p) for p in v.split(".")), reverse=True):
        engines = subprocess.run(["npm", "view", f"graphile-worker@{version}", "engines.node"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        if _satisfied(engines, node):
            return version
    raise SystemExit("no graphile-worker release runs on this node")


def install() -> str:
    """The installed version, installing the newest runnable release first if none is there."""
    package = FOLDER / "node_modules" / "graphile-worker" / "package.json"
    if not package.exists():
        version = newest_runnable()
        FOLDER.mkdir(exist_ok=True)
        (FOLDER / "package.json").write_text('{"private": true}\n')
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", f"graphile-worker@{version}"], cwd=FOLDER,
                       check=True, stdout=subprocess.DEVNULL)
    return str(json.loads(package.read_text())["version"])


def prepare(dsn: str) -> None:
    cli = FOLDER / "node_modules" / ".bin" / "graphile-worker"
    subprocess.run([str(cli), "--schema-only", "-c", dsn], check=True, stdout=subprocess.DEVNULL)


def _add(dsn: str, count: int, due: datetime) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM graphile_worker._private_jobs")
        conn.execute(
            "SELECT graphile_worker.add_jobs(array(SELECT ROW('noop', '{}'::json, NULL, %s::timestamptz, NULL, "
            "NULL, NULL, NULL)::graphile_worker.job_spec FROM generate_series(1, %s)))", (due, count))
        conn.execute("ANALYZE graphile_worker._private_jobs")
        conn.execute("ANALYZE graphile_worker._private_tasks")


def _wait_empty(dsn: str, timeout_s: float) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            time.sleep(1)
            if conn.execute("SELECT count(*) FROM graphile_worker._private_jobs").fetchone()[0] == 0:
                return


def burst(dsn: str, count: int, procs: int, mode: str, var: Path, timeout_s: float = 600.0,
          lead_s: float = 6.0) -> dict[str, Any]:
    version = install()
    prepare(dsn)
    env = {**os.environ, "GRAPHILE_DIR": str(FOLDER)}
    outs = [var / f"graphile-{mode}-{procs}-{n}.json" for n in range(procs)]
    for out in outs:
        out.unlink(missing_ok=True)
    workers = [subprocess.Popen(["node", str(WORKER), dsn, mode, str(out)], env=env,
                                stdout=(var / f"{out.stem}.log").open("w"), stderr=subprocess.STDOUT)
               for out in outs]
    try:
        time.sleep(1.5)  # the workers connect and LISTEN before the jobs are added
        due = datetime.now(timezone.utc) + timedelta(seconds=lead_s)
        _add(dsn, count, due)
        cpu0 = _cpu([w.pid for w in workers])
        _wait_empty(dsn, timeout_s)
        cpu = [b - a for a, b in zip(cpu0, _cpu([w.pid for w in workers]))]
        load = [round(x, 2) for x in os.getloadavg()]
    finally:
        stop_workers(workers)
    reports = [json.loads(out.read_text()) for out in outs if out.exists()]
    row = summarize(reports, due, count, procs, mode, version)
    row["cpu_ms_per_run"] = [round(1000 * c / max(1, row["ran"]), 3) for c in cpu]  # workers, PostgreSQL
    row["load"] = load
    return row


def _cpu(pids: list[int]) -> list[float]:
    from bench import pg_idle

    return [pg_idle.cpu_seconds(pids), pg_idle.postgres_cpu_seconds()]


def summarize(reports: list[dict[str, Any]], due: datetime, count: int, procs: int, mode: str,
              version: str) -> dict[str, Any]:
    ran = sum(r["started"] for r in reports)
    lags = [lag / 1000 for r in reports for lag in r["lags_ms"]]
    last = max((r["last_done_ms"] for r in reports), default=0) / 1000
    span = last - due.timestamp()
    return {"system": f"graphile-worker {version} ({mode})", "processes": procs, "due": count, "ran": ran,
            "per_second": round(ran / span, 1) if span > 0 else 0, "drain_s": round(span, 2),
            "lag_p50_s": round(pct(lags, 50), 3), "lag_p99_s": round(pct(lags, 99), 3)}


if __name__ == "__main__":
    import tempfile

    dsn_arg, count_arg, procs_arg, mode_arg = sys.argv[1:5]
    folder = Path(tempfile.mkdtemp(prefix="almanac-graphile-"))
    print(json.dumps(burst(dsn_arg, int(count_arg), int(procs_arg), mode_arg, folder)))
    shutil.rmtree(folder, ignore_errors=True)
