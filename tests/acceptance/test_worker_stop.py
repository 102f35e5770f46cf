"""`almanac worker` and `almanac serve` stop on SIGTERM whichever of their threads the kernel hands it to.

A signal sent to a process is delivered to any one of its threads that does not block it.
Python runs its handler only in the main thread, when that thread next runs Python code; a
main thread blocked in an untimed `Event.wait()` never does, so a worker whose SIGTERM
landed on another thread (the timer's, the listener's...) ran on until SIGKILL. Seen once in
a few CI runs (the NOTIFY acceptance test's workers) and in one stop of 25 by hand. Here the
signal is aimed at a thread other than the main one with `tgkill`, so it lands there every time.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.proc import ALMANAC, Server, almanac, cli_env
from tests.support.wait import wait_until

TGKILL = {"x86_64": 234, "aarch64": 131}  # the syscall's number (Python has no tgkill)


def tgkill(pid: int, tid: int, sig: int) -> None:
    number = TGKILL[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def a_thread_other_than_the_main_one(pid: int) -> int:
    others = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
    assert others, "the process runs its timer in threads of its own"
    return others[0]


@pytest.mark.skipif(os.uname().machine not in TGKILL, reason="tgkill's syscall number")
def test_a_sigterm_delivered_to_a_thread_other_than_the_main_one_stops_the_worker(sqlite_settings: Any) -> None:
    env = cli_env(sqlite_settings, ALMANAC_LOG_LEVEL="info")
    assert almanac("migrate", env=env).returncode == 0
    log = Path(sqlite_settings.var_dir) / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen([ALMANAC, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_until(lambda: "worker.started" in log.read_text() or proc.poll() is not None, timeout=60,
                   what="the worker's start")
        assert proc.poll() is None, log.read_text()[-2000:]
        tgkill(proc.pid, a_thread_other_than_the_main_one(proc.pid), signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "worker.stopped" in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.skipif(os.uname().machine not in TGKILL, reason="tgkill's syscall number")
def test_the_server_and_its_scheduler_stop_on_a_sigterm_delivered_to_another_thread(sqlite_settings: Any) -> None:
    """uvicorn's event loop wakes on a signal whatever thread receives it (its wake-up fd); kept so."""
    env = cli_env(sqlite_settings, ALMANAC_LOG_LEVEL="info")
    assert almanac("migrate", env=env).returncode == 0
    server = Server(env).wait_ready()
    try:
        tgkill(server.proc.pid, a_thread_other_than_the_main_one(server.proc.pid), signal.SIGTERM)
        server.proc.wait(timeout=20)  # uvicorn re-raises the signal once it has shut down: the exit code is -15
        log = server.log.read_text()
        assert "scheduler.stopped" in log and "Application shutdown complete." in log, log[-2000:]
    finally:
        server.stop()
