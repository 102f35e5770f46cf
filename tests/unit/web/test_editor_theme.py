"""The script editor's theme, light and dark: every colour it declares for a token reads at 4.5:1
or more (WCAG AA) against the editor's background, its current line and its selection.

Read from the real sources: the colours the theme uses (`var(--cm-*)` in editor/src/theme.js) and
their two values (the light `:root` block and the `prefers-color-scheme: dark` block of style.css),
so a bad colour, or a token colour missing from one palette, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
THEME = ROOT / "editor" / "src" / "theme.js"
STYLE = ROOT / "almanac" / "web" / "static" / "style.css"
BUNDLE = ROOT / "almanac" / "web" / "static" / "editor" / "editor.js"

AA_TEXT = 4.5
AA_NON_TEXT = 3.0  # the cursor is a line, not text: WCAG's 3:1 for graphical objects
BACKGROUNDS = ("--cm-bg", "--cm-active-line", "--cm-selection")


def luminance(hex_colour: str) -> float:
    """WCAG 2 relative luminance of `#rrggbb` (or `#rgb`)."""
    digits = hex_colour.lstrip("#")
    if len(digits) == 3:
        digits = "".join(d * 2 for d in digits)
    assert re.fullmatch(r"[0-9a-fA-F]{6}", digits), f"not an opaque hex colour: {hex_colour}"

    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (int(digits[i:i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_contrast_formula_matches_wcag_reference_values() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # the classic just-too-light grey
    assert contrast("#fff", "#fff") == pytest.approx(1.0)


def _block(css: str, opener: str) -> str:
    """The declarations of the first rule after `opener` (up to its closing brace)."""
    start = css.index(opener)
    body_start = css.index("{", css.index(":root", start)) + 1
    return css[body_start:css.index("}", body_start)]


def _variables(block: str) -> dict[str, str]:
    return dict(re.findall(r"(--cm-[\w-]+)\s*:\s*([^;}\s]+)", block))


def palettes() -> dict[str, dict[str, str]]:
    css = re.sub(r"/\*.*?\*/", "", STYLE.read_text(encoding="utf-8"), flags=re.S)
    light = _variables(_block(css, ":root"))
    dark = _variables(_block(css, "@media (prefers-color-scheme: dark)"))
    return {"light": light, "dark": dark}


def token_variables() -> set[str]:
    """The variables the theme's highlight style gives as a token's `color`."""
    source = THEME.read_text(encoding="utf-8")
    highlight = source[source.index("HighlightStyle.define"):]
    return set(re.findall(r"\bcolor:\s*\"var\((--cm-[\w-]+)\)\"", highlight))


def test_the_theme_gives_tokens_their_own_colours() -> None:
    tokens = token_variables()
    assert len(tokens) >= 10, tokens  # keyword, string, number, comment ... each read from the theme
    assert {"--cm-keyword", "--cm-string", "--cm-comment", "--cm-number"} <= tokens


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_token_colour_reads_on_the_editor_background(scheme: str) -> None:
    palette = palettes()[scheme]
    missing = (token_variables() | set(BACKGROUNDS)) - palette.keys()
    assert not missing, f"{scheme} palette lacks {sorted(missing)}"
    poor = [f"{var} {palette[var]} on {bg} {palette[bg]}: {contrast(palette[var], palette[bg]):.2f}"
            for var in sorted(token_variables()) for bg in BACKGROUNDS
            if contrast(palette[var], palette[bg]) < AA_TEXT]
    assert not poor, poor


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_gutter_cursor_and_picked_completion_read(scheme: str) -> None:
    p = palettes()[scheme]
    assert contrast(p["--cm-gutter-fg"], p["--cm-gutter-bg"]) >= AA_TEXT
    assert contrast(p["--cm-fg"], p["--cm-active-line"]) >= AA_TEXT  # the current line's number
    assert contrast(p["--cm-picked-fg"], p["--cm-picked-bg"]) >= AA_TEXT
    assert contrast(p["--cm-cursor"], p["--cm-bg"]) >= AA_NON_TEXT
    assert contrast(p["--cm-cursor"], p["--cm-active-line"]) >= AA_NON_TEXT


def test_the_dark_palette_is_dark_and_the_light_one_light() -> None:
    both = palettes()
    assert luminance(both["light"]["--cm-bg"]) > 0.8 and luminance(both["dark"]["--cm-bg"]) < 0.05


def test_the_committed_bundle_carries_the_theme() -> None:
    """`make editor` was run after the theme changed: the bundle names every colour the theme uses."""
    bundle = BUNDLE.read_text(encoding="utf-8")
    source = THEME.read_text(encoding="utf-8")
    for var in set(re.findall(r"var\((--cm-[\w-]+)\)", source)):
        assert f"var({var})" in bundle, f"{var} is not in the bundle: run `make editor`"
