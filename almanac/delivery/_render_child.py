"""Renders one e-mail's subject and body in a child process with CPU, memory and output caps.

A tenant's template runs in Jinja2's immutable sandbox, which stops attribute tricks but not
`{% for a in x %}{% for b in x %}…` or `"x" * 10**9`; the child's rlimits and the parent's wall
deadline stop those without harming the dispatcher. It imports only jinja2 and the standard
library, so it starts with `python -I <this file>`. Input and output are JSON on stdin/stdout.
"""

import json
import resource
import sys


def _limit(memory_mb: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 1024 * 1024,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))


def _render(env, source: str, context: dict, cap: int) -> str:
    out, size = [], 0
    for chunk in env.from_string(source).generate(context):
        out.append(chunk)
        size += len(chunk)
        if size > cap:
            raise OverflowError(f"the rendered text is over {cap} characters")
    return "".join(out)


def main() -> None:
    job = json.loads(sys.stdin.read())
    _limit(job["memory_mb"], job["cpu_s"])
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(autoescape=False)
    try:
        result = {
            "subject": _render(env, job["subject"], job["context"], job["subject_cap"]),
            "body": _render(env, job["body"], job["context"], job["body_cap"]),
        }
    except MemoryError:
        result = {"error": "the template used too much memory"}
    except Exception as exc:  # any template error is the tenant's, reported on the delivery
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
