"""Writes what a script can call, from one source, in two forms: almanac/web/static/editor/almanac-api.json
for the editor's completion and reference panel, and docs/reference/script-api.md for the user guide.

The capability names and their arguments come from the one registry of host functions,
`almanac/sandbox/capabilities.py` (the `Capabilities` protocol: `kv_get` is `almanac.kv.get`,
`schedule_at` is `almanac.schedule.at`); what each does and its limits come from SPEC section 6,
written once below. A capability in the registry with no text here stops the generator, so the
editor cannot silently drift from the sandbox. `tests/unit/test_editor_api.py` fails when the
committed files differ from what this script writes now.

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
REFERENCE = ROOT / "docs" / "reference" / "script-api.md"

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


REFERENCE_INTRO = """\
<!-- Generated by tools/gen_editor_api.py from the sandbox's capability registry: do not edit by hand. -->
# Script API

A script is an ES module whose default export is a (possibly async) function of one event. It runs in a
WebAssembly sandbox with the language and the globals below only: no file system, environment, process,
module import or clock beyond `Date`. The editor's completion is built from the same table.

<!-- block: script-api-example -->
```js
export default async function (event) {
  const seen = (await almanac.kv.get("seen")) ?? 0;
  await almanac.kv.set("seen", seen + 1);
  return {seen};                       // stored as the run's output (JSON)
}
```
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "-"


def render_markdown() -> str:
    table = build()
    lines = [REFERENCE_INTRO, "## The event", "", "| field | what it holds |", "|---|---|"]
    lines += [f"| `event.{f['name']}` | {_cell(f['doc'])} |" for f in table["event_fields"]]
    lines += ["", "## Capabilities", "", "| call | what it does | limits |", "|---|---|---|"]
    lines += [f"| `{c['name']}{c['signature']}` | {_cell(c['doc'])} | {_cell(c['limits'])} |"
              for c in table["capabilities"]]
    lines += ["", "## console", "", "| call | what it does | limits |", "|---|---|---|"]
    lines += [f"| `console.{name}{sig}` | {_cell(doc)} | {_cell(lim)} |" for name, (sig, doc, lim) in CONSOLE.items()]
    lines += ["", "## Limits", "", "| what | limit |", "|---|---|"]
    lines += [f"| {_cell(item['name'])} | {_cell(item['limit'])} |" for item in table["limits"]]
    lines += ["", "## How a run ends", "", "| status | when |", "|---|---|"]
    lines += [f"| `{status}` | {when} |" for status, when in STATUSES]
    return "\n".join(lines) + "\n"


STATUSES = [
    ("succeeded", "the function returned (or its promise resolved); its value is the run's output"),
    ("failed", "it threw or rejected: the message and the line are kept"),
    ("timed_out", "it ran past `timeout_ms`, counted from the moment the script started"),
    ("memory_exceeded", "it used more than `memory_mb`"),
    ("skipped", "it did not run: overlap, a misfire policy, or a daily quota used up (the reason says which)"),
    ("expired", "it could not start in time (`expire_after_s`, or missed beyond the catch-up window)"),
    ("cancelled", "it was cancelled before it started"),
]


def main(argv: list[str]) -> int:
    outputs = {OUTPUT: render(), REFERENCE: render_markdown()}
    if "--check" in argv:
        stale = [path for path, text in outputs.items()
                 if not path.exists() or path.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run tools/gen_editor_api.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
