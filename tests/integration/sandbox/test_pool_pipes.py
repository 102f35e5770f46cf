"""A capability's answer never reaches the worker started after the one it was meant for.

ciR: the pool retired a worker killed in the middle of a `kv.get`, while a thread was still sending
that call's answer. The sender had read the pipe's descriptor number before `retire` closed it, and
wrote after the replacement worker's new pipe was given the same number: the new worker read
`["v", null]` as the answer to its own request and died. Writes and the close are now serialized
(`Worker.send`, `retire`). The interleaving is forced here by pausing a send between the moment it
reads the descriptor and the write, as CPython's `Connection._send` can be paused by a thread switch.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection as mpc
import os
import threading
from typing import Any

from almanac.sandbox._poolprocs import Worker, answer_capability, retire


class _DeadProcess:
    pid, exitcode = 0, -9

    def join(self, timeout: float | None = None) -> None:
        pass

    def kill(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Caps:
    def kv_get(self, key: str) -> None:
        return None


def test_an_answer_in_flight_when_the_worker_is_retired_goes_nowhere(monkeypatch: Any) -> None:
    read_the_descriptor, go_on = threading.Event(), threading.Event()
    original = mpc.Connection._send

    def paused_send(self: Any, buf: bytes, write: Any = os.write) -> None:
        if threading.current_thread().name != "answering":
            return original(self, buf)
        handle = self._handle  # what `write(self._handle, buf)` evaluates first
        read_the_descriptor.set()
        go_on.wait(5)
        try:
            write(handle, buf)
        except OSError:
            pass  # a closed descriptor: the bytes went nowhere

    monkeypatch.setattr(mpc.Connection, "_send", paused_send)
    parent_end, child_end = multiprocessing.Pipe()
    worker = Worker(_DeadProcess(), parent_end, slot=[0, 0, 0])
    answering = threading.Thread(target=answer_capability, args=(worker, _Caps(), "kv_get", ["k"]),
                                 name="answering")
    answering.start()
    assert read_the_descriptor.wait(5)
    retiring = threading.Thread(target=retire, args=(worker, "died"))
    retiring.start()
    retiring.join(0.3)  # the old code closes at once; the fixed one waits for the write under way
    child_end.close()
    new_parent, new_child = multiprocessing.Pipe()  # the replacement's pipe: the lowest free numbers
    try:
        go_on.set()
        answering.join(5)
        retiring.join(5)
        assert not retiring.is_alive() and not answering.is_alive()
        assert not new_child.poll(0.2), "the old worker's answer reached the new worker's pipe"
        assert not new_parent.poll(0)
    finally:
        new_parent.close()
        new_child.close()
