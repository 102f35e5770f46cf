"""E-mail subject and body templates: Jinja2's immutable sandbox, plain text (no autoescape).

Templates are parsed in-process when a target is saved (a syntax error is a 422 then, not a
dead delivery later); they are rendered in a short-lived child process (`_render_child.py`)
with CPU, memory, wall-time and output caps, because a sandboxed template can still loop or
allocate without bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from jinja2 import TemplateSyntaxError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from almanac.errors import ValidationError

SUBJECT_TEMPLATE_MAX = 1024
BODY_TEMPLATE_MAX = 16 * 1024
SUBJECT_MAX = 998  # RFC 5322's line limit
BODY_MAX = 256 * 1024
RENDER_WALL_S = 5.0
RENDER_CPU_S = 2
RENDER_MEMORY_MB = 256
_CHILD = Path(__file__).with_name("_render_child.py")
DEFAULT_SUBJECT = "[{{ event.tenant }}] {{ event.topic }}"
DEFAULT_BODY = "Event {{ event.id }} ({{ event.topic }}) at {{ event.created_at }}:\n\n{{ event.data | tojson(indent=2) }}\n"


class RenderError(Exception):
    """The template could not be rendered within its caps (recorded on the delivery)."""


def check(subject: str, body: str) -> None:
    """Refuse templates that are too long or do not parse."""
    if len(subject) > SUBJECT_TEMPLATE_MAX or len(body) > BODY_TEMPLATE_MAX:
        raise ValidationError(
            f"A subject template may have {SUBJECT_TEMPLATE_MAX} characters and a body {BODY_TEMPLATE_MAX}.")
    env = ImmutableSandboxedEnvironment(autoescape=False)
    for what, source in (("subject", subject), ("body", body)):
        try:
            env.parse(source)
        except TemplateSyntaxError as exc:
            raise ValidationError(f"The {what} template has an error on line {exc.lineno}: {exc.message}",
                                  details={"field": f"{what}_template", "line": exc.lineno}) from None


def render(subject: str, body: str, context: dict[str, Any]) -> tuple[str, str]:
    """(subject on one line, body) rendered in the capped child; raises RenderError."""
    job = dict(subject=subject, body=body, context=context, subject_cap=SUBJECT_MAX * 4, body_cap=BODY_MAX,
               memory_mb=RENDER_MEMORY_MB, cpu_s=RENDER_CPU_S)
    try:
        done = subprocess.run([sys.executable, "-I", str(_CHILD)], input=json.dumps(job), capture_output=True,
                              text=True, timeout=RENDER_WALL_S, check=False)
    except subprocess.TimeoutExpired:
        raise RenderError(f"rendering took over {RENDER_WALL_S:g} s") from None
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise RenderError(f"rendering stopped (exit {done.returncode}): it hit a CPU or memory cap") from None
    if "error" in result:
        raise RenderError(result["error"])
    # A header may not span lines: newlines in the subject would inject headers.
    one_line = " ".join(result["subject"].split())[:SUBJECT_MAX]
    return one_line, result["body"]
