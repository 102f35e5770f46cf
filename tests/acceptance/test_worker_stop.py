"""`almanac worker` stops on SIGTERM whichever of its threads the kernel hands the signal to.

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
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.proc import ALMANAC, almanac, cli_env

SYS_TGKILL = 234  # x86_64; aarch64 is 131


def tgkill(pid: int, tid: int, sig: int) -> None:
    number = {"x86_64": SYS_TGKILL, "aarch64": 131}[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def started(log: Path, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while "worker.started" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.1)


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="tgkill's syscall number")
def test_a_sigterm_delivered_to_a_thread_other_than_the_main_one_stops_the_worker(sqlite_settings: Any) -> None:
    env = cli_env(sqlite_settings, ALMANAC_LOG_LEVEL="info")
    assert almanac("migrate", env=env).returncode == 0
    log = Path(sqlite_settings.var_dir) / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen([ALMANAC, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        started(log, proc, timeout=60)
        others = sorted(int(tid) for tid in os.listdir(f"/proc/{proc.pid}/task") if int(tid) != proc.pid)
        assert others, "the worker runs its timer in threads of its own"
        tgkill(proc.pid, others[0], signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "worker.stopped" in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
