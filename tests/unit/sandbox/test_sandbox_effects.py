"""writes are buffered in the run (no host call per write), reads see
them, a run that does not succeed carries none, and quota checks read a key's committed value only
when the upper bound would refuse."""

from almanac.sandbox import InMemoryCapabilities
from almanac.sandbox.contract import Effects, RunResult


class Counting(InMemoryCapabilities):
    def __init__(self, kv=None, room=None):
        super().__init__(kv)
        self.calls, self.room = [], room

    def kv_get(self, key):
        self.calls.append(("kv_get", key))
        return super().kv_get(key)

    def kv_list(self, prefix):
        self.calls.append(("kv_list", prefix))
        return super().kv_list(prefix)

    def allowance(self):
        self.calls.append(("allowance",))
        return self.room


def test_writes_reach_the_host_only_with_the_result(run):
    caps = Counting()
    r = run("""export default async () => {
      for (let i = 0; i < 200; i++) await almanac.kv.set('k' + i, i);
      for (let i = 0; i < 50; i++) almanac.emit('t', i);
      await almanac.kv.delete('k0');
      await almanac.schedule.at('2026-12-01T09:00:00+01:00', null, {key: 'j'});
    }""", caps=caps)
    assert r.status == "succeeded"
    assert caps.calls == [("allowance",)]  # asked once, on the first write; no call per write
    assert len(r.effects.kv) == 200 and r.effects.kv["k0"] is None and r.effects.kv["k7"] == "7"
    assert len(r.effects.events) == 50 and r.effects.jobs == {"j": ("2026-12-01T08:00:00Z", "null")}


def test_reads_see_the_runs_own_writes(run):
    caps = InMemoryCapabilities({"a": 1, "b": 2, "c": 3})
    r = run("""export default async () => {
      await almanac.kv.set('d', {x: 1});
      await almanac.kv.delete('b');
      await almanac.kv.set('a', 10);
      return [await almanac.kv.get('a'), await almanac.kv.get('b'), await almanac.kv.get('d'),
              await almanac.kv.list(''), await almanac.kv.list('d')];
    }""", caps=caps)
    assert r.output == [10, None, {"x": 1}, ["a", "c", "d"], ["d"]]
    assert caps.kv == {"a": 10, "c": 3, "d": {"x": 1}}  # applied by the fixture, as the platform does


def test_a_run_that_does_not_succeed_carries_no_effects(run):
    # The throwing run gets a deadline no busy machine reaches; the looping one ends at a short one.
    for tail, status, deadline in (("throw new Error('no')", "failed", 20_000), ("for (;;) {}", "timed_out", 200)):
        r = run(f"export default async () => {{ await almanac.kv.set('k', 1); almanac.emit('t', 1); {tail} }}",
                caps=InMemoryCapabilities(), timeout_ms=deadline)
        assert r.status == status and not r.effects


def test_the_kv_quota_is_exact_and_reads_a_committed_key_only_at_the_edge(run):
    room = {"kv_keys": 2, "kv_keys_used": 1, "kv_bytes": 10**6, "kv_bytes_used": 10}
    caps = Counting({"old": 1}, room)
    r = run("""export default async () => {
      await almanac.kv.set('new', 1);          // 2 keys: fits without looking
      await almanac.kv.set('old', 2);          // would be 3 if 'old' were new: its committed value is read
      try { await almanac.kv.set('more', 1) } catch (e) { return e.message }
    }""", caps=caps)
    assert r.output == "quota_exceeded: The tenant's quota of 2 kv keys is used up."
    assert caps.calls == [("allowance",), ("kv_get", "old"), ("kv_get", "more")]


def test_a_platform_limit_refusal_marks_a_failed_run_not_retried(run):
    caps = Counting(room={"emits": 2})
    r = run("export default async () => { for (let i = 0; i < 3; i++) await almanac.emit('t', i) }", caps=caps)
    assert (r.status, r.refused) == ("failed", "a run may emit at most 2 events")


def test_the_result_crosses_a_pipe_as_itself():
    result = RunResult("succeeded", output={"é": [1]}, logs=("a", "b"), duration_ms=3,
                       effects=Effects(kv={"k": "1", "gone": None}, events=(("t", "{}"),),
                                       jobs={"j": ("2026-12-01T09:00:00Z", "null")}))
    assert RunResult.from_wire(result.to_wire()) == result
