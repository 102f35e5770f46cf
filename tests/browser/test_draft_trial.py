"""The script editor's first hour, in chromium: type a draft, try it on a payload, and see the result
beside the editor (right column at 1280 px, directly under the editor at 390 px) while the saved
version and the kv store stay as they were; the editor in dark mode. Screenshots at 1280 and 390 px,
light and dark."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import SCRIPT, shot, sign_in
from tests.unit.web.test_editor_theme import contrast, palettes

DRAFT = """export default async function (event) {
  // a draft: counts, and says so
  const seen = (await almanac.kv.get("seen")) ?? 0;
  await almanac.kv.set("seen", seen + 1);
  await almanac.emit("counted", {seen});
  console.log("trying", event.payload.who);
  return {hello: event.payload.who, seen: seen + 1};
}
"""


def _api(live: dict[str, Any]) -> httpx.Client:
    return httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}, timeout=30)


def _type_draft(page: Any, text: str) -> None:
    expect(page.locator(".cm-host[data-ready=true]")).to_be_visible()
    content = page.locator(".cm-content")
    content.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    content.fill(text)


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box, f"{selector} is not laid out"
    return box


def _rgb_hex(css: str) -> str:
    r, g, b = (int(x) for x in re.findall(r"\d+", css)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def _try(page: Any, live: dict[str, Any], width: int, height: int, scheme: str) -> None:
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"/scripts/{live['script_id']}")
    _type_draft(page, DRAFT)
    page.get_by_label("Payload").fill('{"who": "Ada"}')
    page.get_by_role("button", name="Try draft (no side effects)").click()
    expect(page.locator("#trial-status")).to_have_text("succeeded")
    result = page.get_by_role("region", name="Run result")
    expect(result).to_contain_text('"hello": "Ada"')
    expect(result).to_contain_text("trying Ada")
    expect(page.locator("#trial-kv")).to_contain_text("seen")
    expect(page.locator("#trial-events")).to_contain_text("counted")
    editor, panel = _box(page, ".cm-host"), _box(page, "#run-result")
    if width >= 1280:  # beside the editor, and on screen without scrolling
        assert panel["x"] >= editor["x"] + editor["width"], (editor, panel)
        status = _box(page, "#trial-status")
        assert status["y"] + status["height"] <= height, status
    else:  # directly under the editor: before the upload field and Save
        assert panel["y"] >= editor["y"] + editor["height"], (editor, panel)
        assert panel["y"] < _box(page, "#source-file")["y"], panel
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width} px"
    shot(page, f"draft-trial-{width}-{scheme}")


def test_a_draft_is_tried_beside_the_editor_and_nothing_is_saved(page: Any, live: dict[str, Any]) -> None:
    sign_in(page)
    for width, height in ((1280, 900), (390, 844)):
        for scheme in ("light", "dark"):
            _try(page, live, width, height, scheme)
    with _api(live) as api:
        script = api.get(f"/api/v1/scripts/{live['script_id']}").json()
        assert (script["version"], script["source"]) == (1, SCRIPT)  # the saved version, untouched
        assert api.get("/api/v1/kv/seen").status_code == 404  # no kv write applied (every trial saw 0)
        runs = api.get("/api/v1/runs").json()["items"]
        assert [r["trigger"] for r in runs] == ["trial"] * 4 and all(r["events"] == [] for r in runs)


def test_a_syntax_error_in_the_draft_is_answered_in_the_result_panel(page: Any, live: dict[str, Any]) -> None:
    sign_in(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/scripts/{live['script_id']}")
    _type_draft(page, "export default function (event) {\n  return 1 +;\n}\n")
    page.get_by_role("button", name="Try draft (no side effects)").click()
    expect(page.get_by_role("region", name="Run result").get_by_role("alert")).to_contain_text(
        re.compile(r"The draft was not run\. Line 2"))


def test_the_editor_is_dark_in_dark_mode_and_its_tokens_read(page: Any, live: dict[str, Any]) -> None:
    sign_in(page)
    for scheme in ("dark", "light"):
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"/scripts/{live['script_id']}")
        _type_draft(page, DRAFT)
        expected = palettes()[scheme]
        background = _rgb_hex(page.locator(".cm-editor").evaluate("e => getComputedStyle(e).backgroundColor"))
        assert background == expected["--cm-bg"], (scheme, background)
        gutter = _rgb_hex(page.locator(".cm-gutters").evaluate("e => getComputedStyle(e).backgroundColor"))
        assert gutter == expected["--cm-gutter-bg"], (scheme, gutter)
        # Every coloured token as drawn: the keyword, the string, the comment, ... each reads on the background.
        colours = set(page.locator(".cm-content span").evaluate_all(
            "spans => spans.map(s => getComputedStyle(s).color)"))
        drawn = {_rgb_hex(c) for c in colours}
        assert {expected["--cm-keyword"], expected["--cm-string"], expected["--cm-comment"]} <= drawn, drawn
        assert all(contrast(c, background) >= 4.5 for c in drawn), [(c, contrast(c, background)) for c in drawn]
        # The completion list is themed too: its box, and the picked option.
        page.locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("almanac.kv.")
        picked = page.locator(".cm-tooltip-autocomplete li[aria-selected]")
        expect(picked).to_be_visible()
        box = _rgb_hex(page.locator(".cm-tooltip-autocomplete").evaluate("e => getComputedStyle(e).backgroundColor"))
        assert box == expected["--cm-gutter-bg"], (scheme, box)
        fg, bg = (_rgb_hex(picked.evaluate(f"e => getComputedStyle(e).{p}")) for p in ("color", "backgroundColor"))
        detail = _rgb_hex(picked.locator(".cm-completionDetail").evaluate("e => getComputedStyle(e).color"))
        assert contrast(fg, bg) >= 4.5 and contrast(detail, bg) >= 4.5, (scheme, fg, detail, bg)
        shot(page, f"editor-{scheme}")
