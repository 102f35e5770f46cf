"""almanac.jsonsafe: the one rule for text and JSON from outside."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st

from almanac import jsonsafe

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(JSON)
def test_what_passes_can_always_be_stored_and_served(value: object) -> None:
    try:
        text = jsonsafe.dumps(value)
    except jsonsafe.Unsafe:
        return
    text.encode("utf-8")  # no lone surrogate survives
    assert json.loads(text) == value


@pytest.mark.parametrize("bad", ["\ud800", ["ok", {"k": "\udfff"}], {"\ud83d": 1}, 2**63, -(2**63) - 1,
                                 float("nan"), float("inf"), {1: 2}, object()])
def test_what_is_refused(bad: object) -> None:
    with pytest.raises(jsonsafe.Unsafe):
        jsonsafe.check(bad)


def test_nesting_is_limited_to_64_levels_without_recursion() -> None:
    value: object = 0
    for _ in range(64):
        value = [value]
    jsonsafe.check(value)
    with pytest.raises(jsonsafe.Unsafe, match="64 levels"):
        jsonsafe.check([value])
    deep: object = 0
    for _ in range(100_000):  # far past the interpreter's recursion limit
        deep = [deep]
    with pytest.raises(jsonsafe.Unsafe):
        jsonsafe.check(deep)


def test_sizes_are_utf8_bytes_of_the_stored_json() -> None:
    assert jsonsafe.dumps("é" * 10, limit=22) == '"' + "é" * 10 + '"'
    with pytest.raises(jsonsafe.Unsafe, match="23 bytes"):
        jsonsafe.dumps("é" * 10 + "x", limit=22)


def test_diagnostic_text_is_cleaned_and_capped() -> None:
    assert jsonsafe.clean_text("a\ud800b") == "a\ufffdb"
    capped = jsonsafe.clean_text("é" * 100_000)
    assert len(capped.encode()) <= jsonsafe.TEXT_CAP and capped.endswith("[truncated]")
    capped.encode("utf-8")  # not cut inside a character


def test_instants_stay_inside_the_calendar() -> None:
    minus12 = timezone(timedelta(hours=-12))
    for bad in (datetime(9999, 12, 31, 23, 59, tzinfo=minus12), datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
                datetime(9999, 12, 31, 12, 0), datetime(1, 1, 1, 12, 0)):
        with pytest.raises(jsonsafe.Unsafe):
            jsonsafe.check_instant(bad)
    with pytest.raises(jsonsafe.Unsafe, match="offset"):
        jsonsafe.check_instant(datetime(2030, 1, 1), need_offset=True)
    fine = datetime(2030, 1, 1, tzinfo=minus12)
    assert jsonsafe.check_instant(fine, need_offset=True) is fine


@pytest.mark.parametrize(("text", "expected"), [("1", 1), ("2147483647", 2**31 - 1), ("2147483648", None), ("9223372036854775807", None),
                                                ("9223372036854775808", None), ("-1", None), ("1e3", None),
                                                ("abc", None), ("", None), ("١٢", None), (" 1", None)])
def test_path_ids(text: str, expected: int | None) -> None:
    assert jsonsafe.parse_id(text) == expected


def test_nul_is_not_text_but_is_repaired_in_diagnostics() -> None:
    for value in ("a\x00", {"k": ["\x00"]}, {"a\x00": 1}):
        with pytest.raises(jsonsafe.Unsafe, match="U\\+0000"):
            jsonsafe.check(value)
    assert jsonsafe.clean_text("a\x00b") == "a\ufffdb"
    assert jsonsafe.loads_stored('{"a":"\\u0000"}') == {"a": "\ufffd"}
