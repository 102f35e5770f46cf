"""SandboxPool while runs wait on the network: the workers keep serving (parked workers, spares)."""

import threading
import time

from almanac.sandbox import CapabilityError, InMemoryCapabilities, Limits, RunRequest, SandboxPool

HANGING = "export default async () => (await fetch('https://slow.example/')).status"
QUICK = "export default async (e) => e.n * 2"


def test_twenty_runs_waiting_on_a_hanging_server_do_not_hold_up_the_others(sandbox_image_cache):
    release = threading.Event()
    waiting = threading.Semaphore(0)

    def hang(url, method, headers, body, deadline):
        waiting.release()
        release.wait()  # the "server" answers only when the test says so
        raise CapabilityError("fetch https://slow.example/: no answer")

    hung_done, quick_done = [], []
    all_quick = threading.Event()
    with SandboxPool(workers=2, cache_dir=sandbox_image_cache, spares=24) as pool:
        for _ in range(20):
            pool.submit(RunRequest(HANGING, {}, Limits(timeout_ms=30_000)), InMemoryCapabilities(fetcher=hang),
                        hung_done.append)
        for _ in range(20):
            assert waiting.acquire(timeout=60), "not every hanging run reached its fetch"

        def quick(result):
            quick_done.append(result)
            if len(quick_done) == 40:
                all_quick.set()

        for n in range(40):
            pool.submit(RunRequest(QUICK, {"n": n}, Limits()), InMemoryCapabilities(), quick)
        assert all_quick.wait(60), f"only {len(quick_done)} of 40 quick runs ended"
        assert hung_done == []  # every hanging run still waits, and the others ran meanwhile
        assert sorted(r.output for r in quick_done) == [2 * n for n in range(40)]
        release.set()
        finished = threading.Event()
        threading.Thread(target=lambda: [pool.run(QUICK, {"n": 1}, Limits(), InMemoryCapabilities()),
                                         finished.set()]).start()
        assert finished.wait(60)
    assert len(hung_done) == 20 and {r.status for r in hung_done} == {"failed"}


def test_spares_leave_once_the_wait_is_over(sandbox_image_cache):
    release = threading.Event()
    started = threading.Semaphore(0)

    def hang(url, method, headers, body, deadline):
        started.release()
        release.wait()
        return {"status": 204, "statusText": "", "url": url, "headers": [], "body": ""}

    # Spares linger 1 s here, not the default 5 s: what is tested is that they leave, not when.
    with SandboxPool(workers=1, cache_dir=sandbox_image_cache, spares=4, spare_linger_s=1.0) as pool:
        done = []
        for _ in range(3):
            pool.submit(RunRequest(HANGING, {}, Limits(timeout_ms=30_000)), InMemoryCapabilities(fetcher=hang), done.append)
        for _ in range(3):
            assert started.acquire(timeout=60)
        assert len(pool.worker_pids()) >= 3  # each waiting run holds a worker: two of them are spares
        release.set()
        # The spares linger a few seconds (a burst of waits would reuse them), then leave.
        for _ in range(6):
            assert pool.run(QUICK, {"n": 3}, Limits(), InMemoryCapabilities()).output == 6
        for _ in range(300):  # the three waiting runs end on the pool's thread: wait for their callbacks
            if len(done) == 3:
                break
            time.sleep(0.1)
        assert [r.output for r in done] == [204, 204, 204]
        for _ in range(300):  # waiting for the spares to leave, not timing them
            if len(pool.worker_pids()) == 1:
                break
            time.sleep(0.1)
        assert len(pool.worker_pids()) == 1


def test_one_owners_runs_waiting_on_the_network_leave_the_other_owners_a_worker(sandbox_image_cache):
    release = threading.Event()
    reached = []

    def hang(url, method, headers, body, deadline):
        reached.append(url)
        release.wait()
        raise CapabilityError("fetch https://slow.example/: no answer")

    # One worker and three spares: four processes, of which one owner's runs may hold two.
    with SandboxPool(workers=1, cache_dir=sandbox_image_cache, spares=3) as pool:
        hung = []
        try:
            for _ in range(8):
                pool.submit(RunRequest(HANGING, {}, Limits(timeout_ms=30_000)), InMemoryCapabilities(fetcher=hang),
                            hung.append, owner="a")
            for _ in range(600):  # waiting for them to reach the network, not timing it
                if len(reached) >= 2:
                    break
                time.sleep(0.05)
            time.sleep(0.5)  # and whatever more of the pool they could take
            other = threading.Event()
            results = []
            pool.submit(RunRequest(QUICK, {"n": 4}, Limits()), InMemoryCapabilities(),
                        lambda r: (results.append(r), other.set()), owner="b")
            assert other.wait(60), "the other owner's run waited for the first owner's waits to end"
            assert results[0].output == 8 and hung == []
            assert len(reached) == 2  # the rest of the first owner's runs wait in the pool, not started
        finally:
            release.set()


def test_a_run_stopped_at_its_deadline_while_it_waits_keeps_its_worker(sandbox_image_cache):
    def slow(url, method, headers, body, deadline):
        time.sleep(max(0.0, deadline - time.monotonic()) + 0.2)  # answers only after the run's deadline
        return {"status": 200, "statusText": "", "url": url, "headers": [], "body": ""}

    with SandboxPool(workers=1, cache_dir=sandbox_image_cache, spares=0) as pool:
        before = pool.worker_pids()
        waited = pool.execute(RunRequest(HANGING, {}, Limits(timeout_ms=300)), InMemoryCapabilities(fetcher=slow))
        assert waited.status == "timed_out", waited
        assert pool.run(QUICK, {"n": 1}, Limits(), InMemoryCapabilities()).output == 2
        # Stopped by the host at its call, nothing of the guest was cut off: no new process for it.
        assert pool.worker_pids() == before and pool.worker_counts()["recycled"] == 0
        busy = pool.run("export default () => { for (;;) {} }", {}, Limits(timeout_ms=200), InMemoryCapabilities())
        assert busy.status == "timed_out"
        for _ in range(300):  # a loop cut off by its deadline's interrupt: its worker makes way for a fresh one
            if pool.worker_counts()["recycled"] == 1:
                break
            time.sleep(0.1)
        assert pool.worker_counts()["recycled"] == 1
