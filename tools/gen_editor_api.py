"""Writes almanac/web/static/editor/almanac-api.json: what a script can call, for the editor and the reference panel.

The capability names and their arguments come from the one registry of host functions,
`almanac/sandbox/capabilities.py` (the `Capabilities` protocol: `kv_get` is `almanac.kv.get`,
`schedule_at` is `almanac.schedule.at`); what each does and its limits come from SPEC section 6,
written once below. A capability in the registry with no text here stops the generator, so the
editor cannot silently drift from the sandbox. `tests/unit/test_editor_api.py` fails when the
committed file differs from what this script writes now.

    .venv/bin/python tools/gen_editor_api.py          # rewrite the file
    .venv/bin/python tools/gen_editor_api.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "almanac" / "sandbox" / "capabilities.py"
OUTPUT = ROOT / "almanac" / "web" / "static" / "editor" / "almanac-api.json"

# SPEC section 6, one entry per JavaScript name: (signature, what it does, its limits).
CAPABILITY_TEXT: dict[str, tuple[str, str, str]] = {
    "almanac.kv.get": ("(key) → Promise<value | null>", "Reads one of the tenant's own values.",
                       "Keys are the tenant's own; values are JSON."),
    "almanac.kv.set": ("(key, value) → Promise<void>", "Stores a JSON value under a key.",
                       "A value at most 64 KiB; the tenant's kv quota (100 MiB, 100,000 keys by default) "
                       "rejects with quota_exceeded. Kept as written: a secret's value stored here is not "
                       "redacted, and every editor and viewer can read it."),
    "almanac.kv.delete": ("(key) → Promise<void>", "Removes a key.", ""),
    "almanac.kv.list": ("(prefix) → Promise<string[]>", "The keys that start with a prefix.", ""),
    "almanac.emit": ("(topic, data) → Promise<void>", "An event for delivery to the tenant's webhooks and "
                     "e-mail targets, sent after the run commits.",
                     "data is JSON; a secret's value in the topic or data is stored and sent as [secret NAME]."),
    "almanac.schedule.at": ("(when, payload, {key}) → Promise<{key, run_at}>",
                            "Upserts a one-off job of the same script: the check-again-later pattern.",
                            "when carries an offset or Z; a chain from one root job holds at most 100 jobs; "
                            "a secret's value in the payload is stored as [secret NAME] (the job's run reads "
                            "the secret again)."),
    "almanac.secrets.get": ("(name) → Promise<string | null>", "A secret's value (set by an admin), or null.",
                            "Its value, escaped or URL-encoded too, never appears in output, logs, errors, "
                            "fetch records, planned jobs or emitted events: it shows as [secret NAME]."),
    "fetch": ("(url, {method, headers, body}) → Promise<Response>",
              "A subset of the web's fetch: status, ok, headers.get(name), text(), json().",
              "Only hosts on the egress allowlist; at most 20 requests a run; bodies at most 1 MiB each; "
              "at most 5 redirects; every request ends by the run's deadline."),
}
# In SPEC section 6 but not (yet) in the host registry: listed so scripts written to the SPEC complete.
SPEC_ONLY: dict[str, tuple[str, str, str]] = {}
# Registry ops that are globals of the script, not members of `almanac`.
GLOBAL_METHODS = {"fetch": "fetch"}
CONSOLE = {name: ("(...values)", f"A log line{'' if name == 'log' else f' marked [{name}]'}.",
                  "Logs are capped at 64 KiB a run.") for name in ("log", "info", "warn", "error", "debug")}
EVENT_FIELDS = {
    "payload": "The JSON payload of the schedule, job or manual run.",
    "scheduledFor": "ISO-8601 time the occurrence was planned for.",
    "firedAt": "ISO-8601 time the run started.",
    "attempt": "1 for the first try, 2 and up for retries.",
    "scheduleId": "The schedule's id, or null for a job or manual run.",
    "jobKey": "The one-off job's key, or null.",
    "runId": "This run's id.",
}
LIMITS = [
    ("timeout_ms", "default 1000, at most 30000; a run past it ends timed_out"),
    ("memory_mb", "default 32, at most 256; a run past it ends memory_exceeded"),
    ("output, logs, error message", "each at most 64 KiB"),
    ("kv value", "at most 64 KiB"),
]


def registry_names() -> list[str]:
    """The JavaScript names of the registry's capabilities (`capabilities.REGISTRY`'s ops), in its order."""
    tree = ast.parse(REGISTRY.read_text(encoding="utf-8"))
    table = next(node for node in tree.body if isinstance(node, ast.AnnAssign)
                 and isinstance(node.target, ast.Name) and node.target.id == "REGISTRY")
    assert isinstance(table.value, ast.Tuple)
    ops = [entry.args[0].value for entry in table.value.elts
           if isinstance(entry, ast.Call) and entry.args and isinstance(entry.args[0], ast.Constant)]
    return [GLOBAL_METHODS.get(op) or "almanac." + op for op in ops]


def build() -> dict:
    names = registry_names()
    missing = [name for name in names if name not in CAPABILITY_TEXT]
    if missing:
        raise SystemExit(f"capabilities with no SPEC text in {__file__}: {', '.join(missing)}")
    entries = [(name, CAPABILITY_TEXT[name], "registry") for name in names]
    entries += [(name, text, "spec") for name, text in SPEC_ONLY.items() if name not in names]
    globals_: dict = {"almanac": {"type": "namespace", "children": {}}}
    for name, (signature, doc, limits), source in entries:
        node, parts = globals_, name.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {"type": "namespace", "children": {}})["children"]
        node[parts[-1]] = {"type": "function", "signature": signature, "doc": doc, "limits": limits,
                           "source": source}
    globals_["console"] = {"type": "namespace", "children": {
        name: {"type": "function", "signature": sig, "doc": doc, "limits": lim}
        for name, (sig, doc, lim) in CONSOLE.items()}}
    globals_["event"] = {"type": "variable", "doc": "The one argument of the default export.", "children": {
        name: {"type": "property", "doc": doc} for name, doc in EVENT_FIELDS.items()}}
    return {"generated_by": "tools/gen_editor_api.py", "globals": globals_,
            "capabilities": [{"name": name, "signature": text[0], "doc": text[1], "limits": text[2],
                              "source": source} for name, text, source in entries],
            "event_fields": [{"name": name, "doc": doc} for name, doc in EVENT_FIELDS.items()],
            "limits": [{"name": name, "limit": limit} for name, limit in LIMITS]}


def render() -> str:
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run tools/gen_editor_api.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
