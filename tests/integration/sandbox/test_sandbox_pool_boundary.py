"""A script cannot kill its pool worker through the host's channel (item 1).

On the stock reactor, ``qjs:std``'s ``fdopen(100)`` let a script write a result
the worker could not send (NaN, 20,000-deep JSON): the worker died and the run
ended "sandbox worker died".  The worker must survive whatever a script writes.
"""

import pytest

from almanac.sandbox import Limits, NullCapabilities, SandboxPool

STD = "const std = await import('qjs:std'); const out = std.fdopen(100, 'w');"


@pytest.fixture(scope="module")
def single(sandbox_image_cache):
    with SandboxPool(workers=1, cache_dir=sandbox_image_cache) as p:
        yield p


@pytest.mark.parametrize("message", [
    '["result",["NaN"]]',
    '["result",["' + "[" * 20000 + "]" * 20000 + '"]]',
    '["kv.set",["k",' + "[" * 20000 + "]" * 20000 + "]]",
])
def test_a_forged_message_does_not_kill_the_worker(single, message):
    before = single.worker_pids()
    r = single.run("""export default async () => {
      try { %s out.puts(%r + '\\n'); out.flush(); } catch (e) {}
      throw new Error('the script failed');
    }""" % (STD, message), {}, Limits(), NullCapabilities())
    assert (r.status, r.error) == ("failed", "Error: the script failed")
    assert single.worker_pids() == before
    assert single.run("export default () => 'ok'", {}, Limits(), NullCapabilities()).output == "ok"


@pytest.mark.parametrize("levels", [250, 300, 900, 5000])
def test_a_deeply_nested_result_fails_the_run_not_the_worker(single, levels):
    before = single.worker_pids()
    r = single.run("export default () => { let x = 1; for (let i = 0; i < %d; i++) x = [x]; return x }" % levels,
                   {}, Limits(), NullCapabilities())
    if levels < 256:
        assert r.status == "succeeded"
    elif levels < 1000:
        assert (r.status, r.error) == ("failed", "output is not JSON the host can store (nested too deeply)"), r
    else:  # QuickJS's own JSON.stringify gives up first
        assert (r.status, r.error) == ("failed", "RangeError: stack overflow"), r
    assert single.worker_pids() == before
