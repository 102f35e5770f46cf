"""The script editor in chromium: highlighting, completion, syntax checked as one types, templates,
the reference panel, versions side by side; screenshots at 1280 and 390 px."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in


def _editor(page):
    expect(page.locator(".cm-host[data-ready=true]")).to_be_visible()
    return page.locator(".cm-content")


def _replace_source(page, text):
    content = _editor(page)
    content.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    content.fill(text)


def test_editor_highlights_completes_and_checks_as_one_types(page):
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    sign_in(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/scripts/new")
    content = _editor(page)
    expect(page.locator("textarea#source")).to_be_hidden()
    # Highlighting: the starter's keywords carry a highlight class.
    expect(page.locator(".cm-content span").first).to_be_visible()
    assert page.locator(".cm-content span").count() > 3
    _replace_source(page, "export default async function (event) {\n  return 1;\n}\n")
    expect(page.locator("#syntax-status")).to_have_text(re.compile("No syntax errors"))
    # Completion of almanac.kv.
    page.keyboard.press("Control+End")
    page.keyboard.type("almanac.kv.")
    options = page.locator(".cm-tooltip-autocomplete li")
    expect(options.filter(has_text="get")).to_be_visible()
    expect(options.filter(has_text="list")).to_be_visible()
    page.keyboard.press("Escape")
    # Bracket matching: with the cursor after a closing bracket, both brackets are marked.
    _replace_source(page, "export default function (event) {\n  return [1, 2];\n}")
    page.keyboard.press("Control+End")
    expect(page.locator(".cm-matchingBracket")).to_have_count(2)
    # Indentation: Enter inside a block indents the new line.
    page.keyboard.press("ArrowUp")
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("x;")
    expect(content).to_contain_text("  x;")
    # A syntax error is reported at its line while typing, by the server's parser.
    _replace_source(page, "export default function (event) {\n  return 1 +;\n}\n")
    expect(page.locator("#syntax-status")).to_contain_text("Line 2")
    expect(page.locator(".cm-gutter-lint .cm-lint-marker-error")).to_have_count(1)
    _replace_source(page, "export function notDefault() {}\n")
    expect(page.locator("#syntax-status")).to_contain_text("no default export")
    shot(page, "editor-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "editor-390")
    assert not [e for e in errors if "Content Security Policy" in e or "editor failed" in e], errors
    assert page.locator(".cm-gutters").is_visible()  # the editor's own styles applied (CSP nonce)


def test_template_save_and_run_with_payload(page):
    sign_in(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/scripts/new")
    page.get_by_label("Start from a template").select_option("check-again-later")
    page.get_by_role("button", name="Use template").click()
    expect(page.get_by_role("status").filter(has_text="is in the editor")).to_be_visible()
    expect(_editor(page)).to_contain_text("MAX_CHECKS")
    reference = page.get_by_role("complementary", name="Reference")
    expect(reference).to_contain_text("almanac.schedule.at")
    expect(reference).to_contain_text("event.scheduledFor")
    page.get_by_label("Name").fill("rechecker")
    page.get_by_label("Timeout (ms)").fill("20000")  # the run is meant to succeed, however busy the machine
    page.get_by_role("button", name="Save script").click()
    expect(page.get_by_role("heading", name=re.compile("rechecker"))).to_be_visible()
    page.get_by_label("Payload").fill('{"order": 7}')
    page.get_by_role("button", name="Run now").click()
    result = page.get_by_role("region", name="Run result")
    expect(result.locator("#run-status")).to_have_text("succeeded")
    expect(result.locator("#run-output")).to_contain_text("checkAgainAt")
    shot(page, "script-template-run-1280")


def test_without_javascript_the_textarea_is_the_editor(chromium, live):
    context = chromium.new_context(base_url=live["base"], java_script_enabled=False)
    page = context.new_page()
    try:
        sign_in(page)
        page.goto("/scripts/new")
        source = page.get_by_label("Source")
        expect(source).to_be_visible()
        source.fill("export const x = 1;\n")
        page.get_by_label("Name").fill("no-js")
        page.get_by_role("button", name="Save script").click()
        expect(page.get_by_role("alert")).to_contain_text("no default export")
        page.get_by_label("Source").fill("export default () => ({ok: true});\n")
        page.get_by_role("button", name="Save script").click()
        expect(page.get_by_role("heading", name=re.compile("no-js"))).to_be_visible()
    finally:
        context.close()


def test_versions_side_by_side_and_restore(page, live):
    import httpx

    v1 = "export default async function (event) {\n  const n = 1;\n  return {n};\n}\n"
    v2 = "export default async function (event) {\n  const n = 2;\n  console.log(n);\n  return {n};\n}\n"
    with httpx.Client(base_url=live["base"], headers={"Authorization": f"Bearer {live['token']}"}) as api:
        script_id = api.post("/api/v1/scripts", json={"name": "versioned", "source": v1}).json()["id"]
        assert api.put(f"/api/v1/scripts/{script_id}", json={"source": v2}).status_code == 200
    sign_in(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/scripts/{script_id}/versions")
    expect(page.get_by_role("cell", name="token setup").first).to_be_visible()
    page.get_by_label("From version").select_option("1")
    page.get_by_label("To version").select_option("2")
    page.get_by_role("button", name="Compare side by side").click()
    diff = page.get_by_role("region", name="Differences")
    expect(diff.locator("tr.changed td.l")).to_have_text("  const n = 1;")
    expect(diff.locator("tr.changed td.r")).to_have_text("  const n = 2;")
    expect(diff.locator("tr.added td.r")).to_have_text("  console.log(n);")
    shot(page, "versions-diff-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "versions-diff-390")
    page.get_by_role("button", name="Restore v1").click()
    expect(page.get_by_role("status").filter(has_text="restored as version 3")).to_be_visible()
    expect(_editor(page)).to_contain_text("const n = 1;")
