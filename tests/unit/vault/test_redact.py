"""The one redaction of secret values: every form a value takes in stored text, the marker left alone."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

import pytest

from almanac.vault.redact import Redactor

AWKWARD = 'pa"ss\\wörd / (x)!\n'


def _json(value: str, ascii_only: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)[1:-1]


FORMS = {
    "raw": AWKWARD,
    "json": _json(AWKWARD),
    "json-ascii": _json(AWKWARD, True),
    "json-ascii-upper-hex": _json(AWKWARD, True).replace("\\u00f6", "\\u00F6"),
    "json-twice": _json(_json(AWKWARD)),
    "json-twice-ascii": _json(_json(AWKWARD), True),
    "quote": quote(AWKWARD, safe=""),
    "quote-default-safe": quote(AWKWARD),
    "quote-lower-hex": quote(AWKWARD, safe="").lower(),  # the value has no upper-case letter of its own
    "quote_plus": quote_plus(AWKWARD, safe=""),
    "encodeURIComponent": quote(AWKWARD, safe="!'()*"),
}


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_every_form_of_a_value_is_replaced(form: str) -> None:
    redactor = Redactor({"KEY": AWKWARD})
    assert redactor.text(f"before {form} after") == "before [secret KEY] after"


def test_a_short_value_kept_from_before_is_still_replaced() -> None:
    assert Redactor({"PIN": "42"}).text("pin=42;") == "pin=[secret PIN];"


def test_the_longer_value_wins_and_text_already_redacted_is_left_as_it_is() -> None:
    redactor = Redactor({"SHORT": "abcd", "LONG": "abcdef", "WORD": "secret"})
    once = redactor.text("abcdef abcd secret")
    assert once == "[secret LONG] [secret SHORT] [secret WORD]"
    assert redactor.text(once) == once


def test_json_shaped_values_keys_included_keep_their_shape() -> None:
    redactor = Redactor({"KEY": "tok-1234"})
    assert redactor.value({"tok-1234": ["a tok-1234", 5, None, {"x": "tok-1234"}]}) == \
        {"[secret KEY]": ["a [secret KEY]", 5, None, {"x": "[secret KEY]"}]}


def test_stored_json_text_is_redacted_inside_its_strings_and_stays_json() -> None:
    redactor = Redactor({"KEY": AWKWARD})
    stored = json.dumps({"k": AWKWARD, "s": json.dumps({"k": AWKWARD})}, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(redactor.json_text(stored)) == {"k": "[secret KEY]", "s": '{"k": "[secret KEY]"}'}
    untouched = '{"a":"b"}'
    assert redactor.json_text(untouched) is untouched


def test_no_secrets_changes_nothing() -> None:
    redactor = Redactor({})
    assert not redactor and redactor.text("x") == "x" and redactor.json_text('{"a":1}') == '{"a":1}'


def test_a_text_cut_short_loses_what_is_left_of_a_value_at_its_end() -> None:
    redactor = Redactor({"KEY": "tok-123456"})
    assert redactor.cut_text("sent tok-123456 then tok-12") == "sent [secret KEY] then [secret KEY]"
    assert redactor.cut_text("ends in a quote: tok-1%22") == "ends in a quote: tok-1%22"  # not a form's start
    assert redactor.cut_text("nothing to see") == "nothing to see"
    assert redactor.text("then tok-12") == "then tok-12"  # a whole text is not cut: its end is its own
