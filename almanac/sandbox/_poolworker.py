"""The child side of ``SandboxPool``: one process, one ``Sandbox``, a shared ticket socket and its own pipe.

A worker takes the next ticket from the socket shared by every worker (one
``recv`` is one whole ticket, so no two workers take the same), runs it, and
takes the next: it never waits for the parent between runs.  A ticket is an
8-byte job id followed by JSON ``[kind, source token, limits, event, may]``
(``kind`` "run" or "check"; the rest is the ``contract.RunRequest``).  The
source is named by a token; a worker fetches a source it has not seen, and the
whole request if the ticket was too large to carry the event ("thin": limits
and event are null).

On its own pipe (JSON arrays sent with ``send_bytes``, never pickle, so the
parent never unpickles anything a worker wrote):

worker -> parent   ``["ready"]`` once; then per ticket any number of
                   ``["fetch", id]`` and ``["cap", id, method, args]`` (remote
                   calls only: kv reads, secrets.get, fetch; writes stay in the
                   worker's buffer and leave with the result), and exactly one ``["done", id, result]``
                   (``RunResult.to_wire``) |
                   ``["checked", id, problem or null]``; before it exits on
                   its own, ``["bye", reason]``
                   (``bye`` "surplus": the pool set the third word of its slot, so it left
                   before taking another ticket; see ``pool``'s spares)
parent -> worker   ``["v", value]`` | ``["e", message]`` | ``["x", message]``
                   (the answer to a fetch or a capability call)

Which job a worker runs, and since when, it writes into its own shared-memory
``slot`` ([id, start in monotonic ns]; see ``_poolprocs.Worker.running``), not
into a message: the parent reads it to enforce deadlines and to know which
run a dead worker took with it.

A remote capability call (a read, a secret, a fetch) blocks the guest until the parent answers;
the parent executes it on the caller's ``caps``, so tenant data and host
objects never enter this process.  A write costs no message at all.  The worker exits
when the ticket socket is closed and empty (the pool closed), when the parent
closes its pipe, or after a run cut off inside the guest's code (``timed_out`` by its
deadline's interrupt, or ``memory_exceeded``) or its ``max_runs``-th run (a fresh process
replaces it). A run the host stopped at one of its calls (a fetch past the deadline) leaves the
worker as it was: it goes on.
"""

from __future__ import annotations

import json
import logging
import select
import signal
import socket
import struct
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .capabilities import CapabilityError, ForwardingCapabilities
from .contract import RunRequest
from .runtime import Sandbox

TICKET_HEAD = struct.Struct("<Q")
MAX_TICKET = 32 * 1024  # larger jobs go as thin tickets and are fetched
SOURCES_KEPT = 64
SURPLUS_CHECK_S = 1.0  # how often an idle worker looks whether the pool has told it to exit


# Built once: json.dumps with options builds an encoder per call, on every message both ways.
# ASCII output: lone surrogates in sources and logs survive as \\u escapes.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def dump(message: list) -> bytes:
    return _ENCODER.encode(message).encode()


class HostFailure(Exception):
    """The parent's capability call failed for a reason the script must not see."""


class ParentCaps(ForwardingCapabilities):
    """``Capabilities`` whose every call is answered by the parent process."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.job = 0  # the job whose run is calling

    def _call(self, method: str, *args: Any) -> Any:
        return ask(self._conn, ["cap", self.job, method, list(args)])


def ask(conn: Any, message: list) -> Any:
    """Send a request to the parent and wait for its answer."""
    conn.send_bytes(dump(message))
    kind, value = json.loads(conn.recv_bytes())
    if kind == "v":
        return value
    if kind == "e":
        raise CapabilityError(value)
    raise HostFailure(value)


def ticket(job_id: int, kind: str, token: int, request: RunRequest) -> bytes:
    """The parent's side: a job as the socket carries it."""
    _, event, limits, may = request.to_wire()
    body = dump([kind, token, limits, event, may])
    if len(body) > MAX_TICKET:
        body = dump([kind, token, None, None, None])
    return TICKET_HEAD.pack(job_id) + body


def main(tickets: Any, conn: Any, slot: Any, cache_dir: str, max_runs: int) -> None:
    """Entry point of a worker process (the pool's ``Process`` target)."""
    # Ctrl-C reaches the whole process group; the parent decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The parent logs failed capability calls with their traceback; the
    # bridge's copy of the same failure here would only be noise on stderr.
    bridge_log = logging.getLogger("almanac.sandbox")
    bridge_log.addHandler(logging.NullHandler())
    bridge_log.propagate = False
    tickets.setblocking(True)
    with Sandbox(Path(cache_dir)) as box:
        try:
            _serve_tickets(box, tickets, conn, slot, max_runs)
        except (EOFError, OSError):
            return  # the parent closed our pipe (or is gone)


def _serve_tickets(box: Sandbox, tickets: Any, conn: Any, slot: Any, max_runs: int) -> None:
    caps = ParentCaps(conn)
    sources: OrderedDict[int, str] = OrderedDict()
    conn.send_bytes(dump(["ready"]))
    for _ in range(max_runs):
        data = _next_ticket(tickets, slot)
        if data is None:
            conn.send_bytes(dump(["bye", "surplus"]))
            return
        if not data:  # the pool closed the socket and nothing is left in it
            conn.send_bytes(dump(["bye", "closed"]))
            return
        caps.job = job_id = TICKET_HEAD.unpack_from(data)[0]
        _mark_running(slot, job_id)
        kind, token, limits, event, may = json.loads(data[TICKET_HEAD.size:])
        source = sources.get(token)
        if source is None or limits is None:
            try:
                source, event, limits, may = ask(conn, ["fetch", job_id])
            except HostFailure:  # the parent has given up on this job (its pool is closing)
                _mark_idle(slot)
                conn.send_bytes(dump(["done" if kind == "run" else "checked", job_id, None]))
                continue
            sources[token] = source
            if len(sources) > SOURCES_KEPT:
                sources.popitem(last=False)
        else:
            sources.move_to_end(token)
        reply, status, cut_off = _serve(box, caps, job_id, kind, RunRequest.from_wire([source, event, limits, may]))
        _mark_idle(slot)
        conn.send_bytes(dump(reply))
        if cut_off:
            conn.send_bytes(dump(["bye", status]))
            return
    conn.send_bytes(dump(["bye", "max_runs"]))


def _next_ticket(tickets: Any, slot: Any) -> bytes | None:
    """The next ticket (b"" once the pool closed the socket), or None once the pool says we are surplus.

    Waits in slices of ``SURPLUS_CHECK_S`` so that an idle spare sees the flag too; the
    socket is shared, so another worker may take a ticket first (then we wait again).
    """
    while not slot[2]:
        try:  # first without waiting: under load a ticket is nearly always there (one syscall, not two)
            return tickets.recv(TICKET_HEAD.size + MAX_TICKET + 1024, socket.MSG_DONTWAIT)
        except BlockingIOError:
            select.select([tickets], [], [], SURPLUS_CHECK_S)
    return None


def _mark_running(slot: Any, job_id: int) -> None:
    # Start 0 first, then the id, then the start: the parent's reader (_poolprocs.Worker.running)
    # trusts an id only between two equal, non-zero reads of the start.
    slot[1] = 0
    slot[0] = job_id
    slot[1] = time.monotonic_ns()


def _mark_idle(slot: Any) -> None:
    # Before the run's done is sent: once the parent has read it, the slot no longer names it.
    slot[1] = 0
    slot[0] = 0


def _serve(box: Sandbox, caps: ParentCaps, job_id: int, kind: str,
           request: RunRequest) -> tuple[list, str | None, bool]:
    """The reply, the run's status, and whether the run was cut off in the guest's code (then the worker exits)."""
    if kind == "run":
        result, cut_off = box.execute_telling(request, caps)
        return ["done", job_id, result.to_wire()], result.status, cut_off
    problem = box.check_syntax(request.source)
    return ["checked", job_id, None if problem is None else
            {"message": problem.message, "line": problem.line, "column": problem.column}], None, False
