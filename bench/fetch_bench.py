"""fetch benchmark: `python bench/fetch_bench.py` prints a table (about a minute on 2 cores).

* The added cost of one `fetch` to a local HTTP server, p50/p99 per call: a script that makes
  one fetch against the same script without it, each run through a `SandboxPool` (the path of
  every scheduled run: worker -> parent -> the waiting-call thread -> the pinned transport and
  back), and, beside it, the host side alone (allowlist, guard, connect, request, read).
* Runs per second of a script that does one fetch each, with 20 runs in flight.

The server is Python's ThreadingHTTPServer in this process: it shares the cores (and this
process's GIL) with the pool's parent, so the figures are a floor for a real, separate server.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from almanac.egress import allowlist  # noqa: E402
from almanac.egress.fetch import Fetcher, request_of  # noqa: E402
from almanac.sandbox import InMemoryCapabilities, Limits, RunRequest, SandboxPool  # noqa: E402
from tests.support.httpservers import LocalServer  # noqa: E402

RUNS = 150
THROUGHPUT_RUNS = 300
IN_FLIGHT = 20


def fetcher_for(server: LocalServer) -> object:
    entries = allowlist.parse([f"127.0.0.1:{server.port}"])
    host_ms: list[float] = []

    def fetch(url: str, method: object, headers: object, body: object, deadline: float) -> dict:
        started = time.perf_counter()
        answer = Fetcher(entries, deadline, allow_private=True).fetch(request_of(url, method, headers, body))
        host_ms.append((time.perf_counter() - started) * 1000)
        return answer

    fetch.host_ms = host_ms  # type: ignore[attr-defined]
    return fetch


def run_ms(pool: SandboxPool, source: str, caps: InMemoryCapabilities) -> float:
    started = time.perf_counter()
    result = pool.run(source, {}, Limits(timeout_ms=5000), caps)
    assert result.status == "succeeded", result
    return (time.perf_counter() - started) * 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def throughput(pool: SandboxPool, source: str, caps: InMemoryCapabilities) -> float:
    gate = threading.Semaphore(IN_FLIGHT)
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def finished(result: object) -> None:
        gate.release()
        with lock:
            count[0] += 1
            if count[0] == THROUGHPUT_RUNS:
                done.set()

    started = time.perf_counter()
    for _ in range(THROUGHPUT_RUNS):
        gate.acquire()
        pool.submit(RunRequest(source, {}, Limits(timeout_ms=5000)), caps, finished)
    done.wait(300)
    return THROUGHPUT_RUNS / (time.perf_counter() - started)


def main() -> None:
    rows = [("command", "python bench/fetch_bench.py"),
            ("load average (1 min) at start; other work on the box skews every figure",
             f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")]
    server = LocalServer()
    fetch = fetcher_for(server)
    caps = InMemoryCapabilities(fetcher=fetch)  # type: ignore[arg-type]
    with_fetch = f"export default async () => (await fetch('{server.url('/json')}')).status"
    without = "export default async () => 200"
    with tempfile.TemporaryDirectory() as cache, SandboxPool(workers=os.cpu_count() or 2, cache_dir=cache) as pool:
        for _ in range(10):  # warm up both paths
            run_ms(pool, with_fetch, caps), run_ms(pool, without, caps)
        fetch.host_ms.clear()  # type: ignore[attr-defined]
        base, fetched = [], []
        for _ in range(RUNS):  # interleaved, so drift in the box's load hits both alike
            base.append(run_ms(pool, without, caps))
            fetched.append(run_ms(pool, with_fetch, caps))
        added50 = statistics.median(fetched) - statistics.median(base)
        added99 = pct(fetched, 0.99) - pct(base, 0.99)
        host = fetch.host_ms  # type: ignore[attr-defined]
        rows += [
            (f"run without fetch, ms p50 / p99 ({RUNS} runs, one at a time)", f"{statistics.median(base):.2f} / "
                                                                          f"{pct(base, .99):.2f}"),
            ("run with one fetch to a local server, ms p50 / p99", f"{statistics.median(fetched):.2f} / "
                                                                 f"{pct(fetched, .99):.2f}"),
            ("added cost of one fetch, ms p50 / p99 (difference of the two)", f"{added50:.2f} / {added99:.2f}"),
            ("of which host side (allowlist, guard, connect, request, read), ms p50 / p99",
             f"{statistics.median(host):.2f} / {pct(host, .99):.2f}"),
        ]
        throughput(pool, with_fetch, caps)  # warm-up round
        rate = throughput(pool, with_fetch, caps)
        plain = throughput(pool, without, caps)
        rows += [(f"runs/s, one fetch each, {IN_FLIGHT} in flight ({THROUGHPUT_RUNS} runs)", f"{rate:.0f}"),
                 (f"runs/s, no fetch, {IN_FLIGHT} in flight (same pool, for scale)", f"{plain:.0f}")]
    server.close()
    rows.append(("load average (1 min) at the end", f"{os.getloadavg()[0]:.2f}"))
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  value")
    print("-" * (width + 12))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
