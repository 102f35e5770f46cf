"""The parent's side of the pool's worker processes: start one, wait until it is ready,
answer its capability calls, retire it."""

from __future__ import annotations

import json
import logging
import math
import os
import select
import struct
import threading
from pathlib import Path
from typing import Any

from . import _poolworker
from ._poolworker import dump
from .capabilities import REMOTE, Capabilities, CapabilityError

log = logging.getLogger("almanac.sandbox")

START_TIMEOUT_S = 60.0
READ_CHUNK = 256 * 1024  # what one wake-up of the reactor reads from a worker's pipe at most
_LENGTH = struct.Struct("!i")  # multiprocessing.Connection's frame header (messages under 2 GiB)


class Worker:
    def __init__(self, process: Any, conn: Any, slot: Any) -> None:
        self.process = process  # multiprocessing.Process
        self.conn = conn  # multiprocessing.connection.Connection
        self.fd = conn.fileno()
        self.slot = slot  # shared [job id, start in monotonic ns, surplus]: the worker writes the first two
        self.parked = False  # waiting on a capability that waits (fetch); the pool's lock guards it
        self.parked_at = 0.0
        self.retiring: str | None = None  # it said it exits after its run, and why
        self.runs = 0
        self.handed = (0, 0.0)  # (job id, when the parent answered its fetch); see ``_poolwatch``
        self.retired = False
        # Held while writing to the pipe and while closing it. Unserialized, a capability's answer that
        # read the descriptor before `retire` closed it could be written after a replacement worker was
        # given the same number: the new worker read another run's answer as its own (CI, ciR).
        self._sending = threading.Lock()
        self.exitcode: int | None = None
        # Connection.poll builds a selector per call; a poll object is ~10x cheaper.
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN)
        self.pending = b""  # the start of a message the worker has not finished writing

    def send(self, data: bytes) -> None:
        """Write one message to the worker; OSError once it is retired (see ``_sending``)."""
        with self._sending:
            if self.retired:
                raise OSError("the sandbox worker is retired")
            self.conn.send_bytes(data)

    def messages(self, most: int) -> list[bytes]:
        """Every whole message the worker has written so far, read with one ``read``.

        Call it only when the pipe is readable (poll said so).  ``Connection.recv_bytes``
        costs two reads per message and the reactor a poll between messages; a burst of
        results arrives in one read here.  EOFError once the worker closed its end;
        OSError for a frame longer than ``most`` bytes.
        """
        data = os.read(self.fd, READ_CHUNK)
        if not data:
            raise EOFError
        data, found, at = self.pending + data if self.pending else data, [], 0
        while len(data) - at >= 4:
            length = _LENGTH.unpack_from(data, at)[0]
            if not 0 <= length <= most:
                raise OSError("bad message length")
            if len(data) - at - 4 < length:
                break
            found.append(data[at + 4:at + 4 + length])
            at += 4 + length
        self.pending = data[at:]
        return found

    def running(self) -> tuple[int, float]:
        """(job id, its start in ``time.monotonic()`` seconds), or (0, 0.0) when idle.

        The worker writes start 0, then the id, then the start (and start 0, id 0 when done):
        a start read twice unchanged, and not 0, belongs to the id read between them.
        """
        for _ in range(100):
            started, job_id, again = self.slot[1], self.slot[0], self.slot[1]
            if started == again:
                return (job_id, started / 1e9) if started and job_id else (0, 0.0)
        return 0, 0.0  # (it changed a hundred times while we looked: it is certainly not hung)

    def wait(self, seconds: float) -> bool:
        """True once a message (or EOF) is readable, False after ``seconds``."""
        return bool(self.poller.poll(max(0, math.ceil(seconds * 1000))))


def spawn(ctx: Any, tickets: Any, cache_dir: Path, max_runs: int) -> Worker:
    """Start a worker process on the shared ticket socket; it is ready once ``await_ready`` says so."""
    parent, child = ctx.Pipe(duplex=True)
    slot = ctx.RawArray("q", 3)
    process = ctx.Process(target=_poolworker.main, args=(tickets, child, slot, str(cache_dir), max_runs),
                          name="almanac-sandbox-worker", daemon=True)
    process.start()
    child.close()  # so that our end sees EOF when the worker dies
    return Worker(process, parent, slot)


def await_ready(worker: Worker) -> Worker:
    """The worker once it said ``ready``; RuntimeError (and the worker retired) if it did not."""
    try:
        if worker.wait(START_TIMEOUT_S) and json.loads(worker.conn.recv_bytes(64)) == ["ready"]:
            return worker
    except (EOFError, OSError, ValueError):
        pass
    retire(worker, "start failed")
    raise RuntimeError(f"sandbox worker did not start (exit code {worker.exitcode})")


def retire(worker: Worker, why: str) -> None:
    """Close the pipe; kill the worker if it lingers."""
    if not worker._sending.acquire(timeout=1.0):
        worker.process.kill()  # a write blocked on a worker that does not read: its end unblocks it
        worker._sending.acquire()
    try:
        if worker.retired:
            return
        worker.retired = True
        worker.conn.close()  # no write is under way, and none starts after this (Worker.send)
    finally:
        worker._sending.release()
    worker.process.join(0.5)
    if worker.process.exitcode is None:
        worker.process.kill()
        worker.process.join()
    worker.exitcode = worker.process.exitcode
    fields = {"pid": worker.process.pid, "exitcode": worker.exitcode, "runs": worker.runs,
              "reason": why}
    if why in ("died", "hung", "malformed", "start failed"):
        log.warning("sandbox.worker_lost", extra=fields)
    else:
        log.info("sandbox.worker_retired", extra=fields)
    worker.process.close()


def answer_capability(worker: Worker, caps: Capabilities | None, method: Any, args: Any) -> None:
    try:
        worker.send(serve_capability(caps, method, args))
    except (OSError, ValueError):
        pass  # the worker is gone; the reactor sees its pipe close


def serve_capability(caps: Capabilities | None, method: Any, args: Any) -> bytes:
    """Execute one of the worker's remote capability calls (reads) here, on the caller's ``caps``.

    Writes never come here: they stay in the worker's buffer until the run's result.
    """
    if caps is None or method not in REMOTE or not isinstance(args, list):
        return dump(["x", "malformed request"])
    try:
        value = getattr(caps, method)(*args)
    except CapabilityError as exc:
        return dump(["e", str(exc) or "capability error"])
    except Exception:  # a platform bug: the script only learns that the call failed
        log.exception("sandbox.capability_failed", extra={"op": method})
        return dump(["x", "failed"])
    try:
        return dump(["v", value])
    except (TypeError, ValueError):
        log.error("sandbox.capability_not_json", extra={"op": method})
        return dump(["x", "not JSON"])
