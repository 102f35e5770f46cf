"""Running scripts: the event, default export, async, console, output, errors."""

import pytest

from almanac.sandbox import Limits, NullCapabilities, RunResult, SyntaxProblem


def test_default_export_gets_the_event_and_returns_output(run):
    r = run("export default (event) => ({doubled: event.payload.n * 2})", {"payload": {"n": 21}})
    assert (r.status, r.output, r.error) == ("succeeded", {"doubled": 42}, None)
    assert isinstance(r, RunResult) and r.duration_ms >= 0


def test_async_default_export_and_top_level_await(run):
    src = """
    const base = await Promise.resolve(40);
    export default async function (e) {
      await null;
      const x = await new Promise((resolve) => resolve(2));
      return base + x;
    }"""
    assert run(src).output == 42


def test_undefined_result_is_null_output(run):
    r = run("export default () => {}")
    assert (r.status, r.output) == ("succeeded", None)


def test_console_levels_are_captured_in_logs(run):
    r = run("""export default () => {
      console.log('hello', {a: 1}, [1, 2], 3);
      console.info('i'); console.warn('w'); console.error('e');
    }""")
    assert r.logs == ('hello {"a":1} [1,2] 3', "[info] i", "[warn] w", "[error] e")


def test_logs_are_capped_with_a_marker(run):
    r = run("export default () => { for (let i = 0; i < 5000; i++) console.log('x'.repeat(100)); return 1 }",
            log_bytes=1000)
    assert r.status == "succeeded"
    assert r.logs[-1] == "[truncated]" and len("\n".join(r.logs)) <= 1000 + len("\n[truncated]")


def test_logs_survive_a_failure(run):
    r = run("export default () => { console.log('before'); null.x }")
    assert r.status == "failed" and r.logs == ("before",)


def test_output_over_the_cap_fails_clearly(run):
    r = run("export default () => 'x'.repeat(70000)")
    assert r.status == "failed" and r.output is None
    assert "over the 65536-byte limit" in r.error


def test_output_must_be_json(run):
    r = run("export default () => 10n")
    assert r.status == "failed" and r.error.startswith("TypeError")


def test_error_names_line_and_column_in_the_script(run):
    r = run("export default function (e) {\n  let x = 1;\n  x();\n}")
    assert r.status == "failed"
    assert r.error == "TypeError: not a function"
    assert (r.error_line, r.error_column) == (3, 3)
    assert "/script.js:3:3" in r.error_stack and "<cmdline>" not in r.error_stack


def test_async_rejection_reports_its_line(run):
    r = run("export default async () => {\n  await null;\n  throw new RangeError('bad value');\n}")
    assert (r.status, r.error, r.error_line) == ("failed", "RangeError: bad value", 3)


def test_thrown_non_error_value(run):
    r = run("export default () => { throw 'boom' }")
    assert r.status == "failed" and "boom" in r.error


def test_syntax_error_at_run_time_has_line_and_column(run):
    r = run("export default function () {\n  let x = ;\n}")
    assert (r.status, r.error_line, r.error_column) == ("failed", 2, 11)
    assert r.error.startswith("SyntaxError")


def test_missing_default_export_fails(run):
    r = run("export const x = 1")
    assert r.status == "failed" and "export default" in r.error


def test_check_syntax(sandbox):
    assert sandbox.check_syntax("export default async (e) => e") is None
    problem = sandbox.check_syntax("export default function () {\n  return 1 +;\n}")
    assert isinstance(problem, SyntaxProblem)
    assert (problem.line, problem.column) == (2, 13)
    assert problem.message.startswith("SyntaxError")


def test_check_syntax_does_not_run_the_script(sandbox):
    assert sandbox.check_syntax("while (true) {}\nexport default () => 1") is None


def test_nothing_survives_between_runs(run):
    assert run("globalThis.leak = 41; Array.prototype.evil = 1; export default () => 1").output == 1
    r = run("export default () => [typeof leak, typeof [].evil]")
    assert r.output == ["undefined", "undefined"]


def test_date_and_math_work(run):
    r = run("export default () => [Date.now() > 1.7e12, typeof Math.random()]")
    assert r.output == [True, "number"]


@pytest.mark.parametrize("bad", [{"timeout_ms": 0}, {"timeout_ms": 30001}, {"memory_mb": 0},
                                 {"memory_mb": 257}, {"output_bytes": -1}])
def test_limits_are_validated(bad):
    with pytest.raises(ValueError):
        Limits(**bad)


def test_closed_sandbox_refuses(sandbox):
    from almanac.sandbox import Sandbox
    box = Sandbox()
    box.close()
    with pytest.raises(RuntimeError):
        box.run("export default () => 1", {}, Limits(), NullCapabilities())
    assert sandbox.run("export default () => 1", {}, Limits(), NullCapabilities()).output == 1


def test_runs_start_from_one_snapshot_yet_math_random_differs(run):
    # Every run starts from the same memory image; QuickJS's own generator
    # state would repeat, so each run is reseeded with host randomness.
    draws = {run("export default () => [Math.random(), Math.random()]").output[0] for _ in range(5)}
    assert len(draws) == 5
    assert all(0 <= x < 1 for x in draws)


def test_the_run_entry_point_is_gone_before_the_script_runs(run):
    r = run("export default () => [typeof __almanacRun, Object.getOwnPropertyNames(globalThis)"
            ".filter((n) => n.startsWith('__'))]")
    assert r.output == ["undefined", []]


def test_event_is_parsed_as_json_not_evaluated_as_a_literal(run):
    # As an object literal, "__proto__" would set the prototype; JSON.parse
    # makes it an own property, as the event's JSON says.
    event = {"__proto__": {"polluted": True}, "s": "\u2028</script>\"'\\`${x}", "n": [1, None]}
    r = run("export default (e) => [Object.keys(e), e.polluted === undefined, e.s, e.n]", event)
    assert r.output == [["__proto__", "s", "n"], True, event["s"], [1, None]]


def test_memory_limit_is_set_per_run_on_the_shared_image(run):
    bomb = "export default () => { const a = []; for (;;) a.push('x' + a.length) }"
    # About memory, not time: every run gets a deadline no busy machine reaches before the cap (at
    # load 13 the default second ran out before a 16 MB bomb filled its heap).
    assert run(bomb, memory_mb=16, timeout_ms=20_000).status == "memory_exceeded"
    fits = "export default () => { const a = []; for (let i = 0; i < 300000; i++) a.push('x' + i); return a.length }"
    assert run(fits, memory_mb=64, timeout_ms=20_000).output == 300000
    assert run(fits, memory_mb=8, timeout_ms=20_000).status == "memory_exceeded"
