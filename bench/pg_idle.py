"""`pg_scale_bench.py --idle S`: what N worker processes cost while nothing is due, from /proc.

An idle tenant should cost nothing, however many there are: no pass of the timer, the
dispatcher or the leases may look at each tenant now and then. This samples the CPU time of
the workers (their main processes) and of every PostgreSQL process (the `postgres` user's) every
`step` seconds, and reports, after the workers' start (`START_S`: imports, the first leases),
the mean and the busiest window in cores. A look at every tenant once a minute shows as a
window far above the mean (before the delivery signals were settled rather than swept: 0.9
cores of workers and 0.7 of PostgreSQL for one window a minute, over 1,000 tenants).

It also holds the /proc readers the other phases share (CPU with exited backends, memory).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from statistics import fmean
from collections.abc import Callable
from typing import Any

START_S = 10.0  # the first seconds: the processes' start (imports, the first leases), reported apart
_HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int], *, reaped: bool = False) -> float:
    """User + system CPU time of these processes (those gone count nothing), and with `reaped` that of
    their children that have ended and been waited for."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
        if reaped:
            total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total / _HZ


def postgres_cpu_seconds() -> float:
    """CPU time of every PostgreSQL process so far, backends that have exited included: the postmaster
    counts those it reaped (a pool's overflow connections close when returned, retired ones too)."""
    return cpu_seconds(postgres_pids(), reaped=True)


def status_kb(pid: int, fields: tuple[str, ...]) -> dict[str, int]:
    """These kB fields of the process's /proc status (VmRSS, RssAnon...); {} when it is gone or not on this machine."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(fields):
                    key, value = line.split(":")
                    out[key] = int(value.split()[0])
    except FileNotFoundError:
        pass
    return out


# The postmaster of the server the bench works on (`use_server`), or None: every PostgreSQL process.
# On a machine shared with other servers (a test suite's throwaway ones), counting every `postgres`
# process counted their work too.
POSTMASTER: list[int | None] = [None]


def use_server(url: str) -> None:
    """Count only the processes of the server at `url` (a SQLAlchemy URL): its postmaster and children."""
    import psycopg

    from bench.pg_setup import dsn

    with psycopg.connect(dsn(url)) as conn:  # read while the backend lives: it exits once the connection closes
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        POSTMASTER[0] = _parent(backend)  # a backend's parent is the postmaster


def postgres_pids() -> list[int]:
    found = [int(pid) for pid in subprocess.run(["pgrep", "-u", "postgres"], capture_output=True,
                                                text=True).stdout.split()]
    root = POSTMASTER[0]
    if root is None:
        return found
    return [root, *(pid for pid in found if _parent(pid) == root)]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


class BackendMemory:
    """The peak anonymous memory (RssAnon) of the PostgreSQL backends that `pids_of` names (the bench
    names those serving its workers, by the `PGAPPNAME` it gives them), read from /proc every `step`
    s on a thread: their sum, and the largest one. What a backend's catalog cache costs (README,
    Sizing) shows here; the bench's own connections are not counted."""

    def __init__(self, pids_of: Callable[[], list[int]], step: float = 0.5) -> None:
        self.pids_of, self.step = pids_of, step
        self.peak_sum_kb = self.peak_one_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="backend-memory", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.step):
            sizes = [status_kb(pid, ("RssAnon",)).get("RssAnon", 0) for pid in self.pids_of()]
            self.peak_sum_kb = max(self.peak_sum_kb, sum(sizes))
            self.peak_one_kb = max(self.peak_one_kb, max(sizes, default=0))


def sample(worker_pids: list[int], seconds: float, step: float = 2.0) -> dict[str, Any]:
    """Sample for `seconds`; the windows after START_S give the idle mean and the busiest window."""
    windows: list[tuple[float, float, float]] = []  # (end, workers' cores, PostgreSQL's cores)
    t0 = last_t = time.monotonic()
    last_w, last_p = cpu_seconds(worker_pids), postgres_cpu_seconds()
    while last_t - t0 < seconds:
        time.sleep(step)
        now, w, p = time.monotonic(), cpu_seconds(worker_pids), postgres_cpu_seconds()
        windows.append((now - t0, (w - last_w) / (now - last_t), (p - last_p) / (now - last_t)))
        last_t, last_w, last_p = now, w, p
    start = [w for w in windows if w[0] <= START_S]
    idle = [w for w in windows if w[0] > START_S]

    def cores(how: Any, i: int) -> float:  # i: 1 the workers, 2 PostgreSQL
        return round(how([r[i] for r in idle]), 3) if idle else float("nan")

    return {"start_cpu_s": [round(sum(r[i] for r in start) * step, 1) for i in (1, 2)],
            "idle_mean_cores": [cores(fmean, i) for i in (1, 2)],
            "idle_max_cores": [cores(max, i) for i in (1, 2)], "seconds": round(last_t - t0, 1)}


def table(row: dict[str, Any], procs: int, tenants: int) -> str:
    return "\n".join([
        f"idle: {procs} worker processes, {tenants} tenants, nothing due, {row['seconds']} s sampled every 2 s",
        "| | workers | PostgreSQL |", "|---|---|---|",
        f"| CPU s in the first {START_S:.0f} s (start) | {row['start_cpu_s'][0]} | {row['start_cpu_s'][1]} |",
        f"| mean cores after | {row['idle_mean_cores'][0]} | {row['idle_mean_cores'][1]} |",
        f"| busiest 2 s window, cores | {row['idle_max_cores'][0]} | {row['idle_max_cores'][1]} |",
        f"load 1/5/15: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}"])
