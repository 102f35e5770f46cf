"""The editor's completion table is generated from the sandbox's capability registry and must be current."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_editor_api", ROOT / "tools" / "gen_editor_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_what_the_generator_writes_now():
    gen = _generator()
    assert gen.OUTPUT.read_text(encoding="utf-8") == gen.render(), "run tools/gen_editor_api.py"


def test_the_guide_reference_is_what_the_generator_writes_now():
    gen = _generator()
    assert gen.REFERENCE.read_text(encoding="utf-8") == gen.render_markdown(), "run tools/gen_editor_api.py"
    for name in gen.registry_names():
        assert f"`{name}(" in gen.REFERENCE.read_text(encoding="utf-8")


def test_every_registry_capability_is_in_the_table():
    gen = _generator()
    table = json.loads(gen.render())
    names = {c["name"] for c in table["capabilities"] if c["source"] == "registry"}
    assert names == set(gen.registry_names()) and "almanac.kv.get" in names and "almanac.schedule.at" in names


def test_a_capability_without_text_stops_the_generator(monkeypatch):
    gen = _generator()
    monkeypatch.setattr(gen, "registry_names", lambda: ["almanac.kv.get", "almanac.teleport"])
    try:
        gen.build()
    except SystemExit as stop:
        assert "almanac.teleport" in str(stop)
    else:
        raise AssertionError("the generator accepted a capability it cannot describe")


def test_the_bundle_is_built_from_the_committed_lock():
    lock = json.loads((ROOT / "editor" / "package-lock.json").read_text())
    assert "node_modules/@codemirror/view" in lock["packages"]
    assert (ROOT / "almanac" / "web" / "static" / "editor" / "editor.js").stat().st_size > 100_000
