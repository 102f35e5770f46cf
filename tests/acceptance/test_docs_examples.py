"""The guide's and the README's API examples, run as printed against a real `almanac serve --demo`.

A tutorial that no test runs drifts from the product: every command block of the README's API tour
and every file the guide includes from docs/examples/ runs here, and each answer is checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import docblocks
from tests.support.proc import ALMANAC, Server, free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


@pytest.fixture
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A fresh folder with `almanac serve --demo` in it (what `make run` does) and an admin token."""
    cwd = tmp_path_factory.mktemp("docs-demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env.update(ALMANAC_PORT=str(free_port()), ALMANAC_LOG_LEVEL="warning", ALMANAC_VAR_DIR=str(cwd / "var"))
    server = Server(env, "--demo", cwd=cwd)
    server.wait_ready()
    try:
        made = subprocess.run([ALMANAC, "token", "create", "--tenant", "demo", "--name", "docs", "--role", "admin"],
                              env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
        yield {**env, "TOKEN": made.stdout.strip().splitlines()[-1], "ALMANAC": server.base, "DEMO_DIR": str(cwd)}
    finally:
        server.stop()


def _json_lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_the_readme_then_the_tutorials_run_as_printed(demo: dict[str, str], tmp_path: Path) -> None:
    """In the order a newcomer meets them, on one new demo tenant (the README's ids assume a new one)."""
    _readme_api_tour(demo, tmp_path)
    _token_step(demo, tmp_path)
    _curl_tutorial(demo)
    _python_tutorial(demo)
    _scripts_on_the_pages(demo)


def _token_step(demo: dict[str, str], tmp_path: Path) -> None:
    """The API tutorial's first block, as printed: it leaves a working token in TOKEN."""
    block = docblocks.block("docs/tutorials/first-automation-api.md", "tutorial-token").replace(".venv/bin/almanac", ALMANAC)
    script = tmp_path / "token.sh"
    script.write_text("set -euo pipefail\n" + block + 'curl -s --fail-with-body -H "Authorization: Bearer $TOKEN" '
                      f'{demo["ALMANAC"]}/api/v1/tenant\n')
    env = {k: v for k, v in demo.items() if k != "TOKEN"}
    done = subprocess.run(["bash", str(script)], env=env, cwd=demo["DEMO_DIR"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["role"] == "admin"


def _scripts_on_the_pages(demo: dict[str, str]) -> None:
    """The scripts the README and the guide print, saved and run as they are."""
    greeted = _greetings(demo)  # the tutorials' greeter has counted already: the two below count on
    pages = {("README.md", "readme-greeter"): ({"name": "Ada"}, {"greetings": greeted + 1}),
             ("docs/tutorials/first-automation-browser.md", "browser-greeter"): ({}, {"greetings": greeted + 2}),
             ("docs/reference/script-api.md", "script-api-example"): ({}, {"seen": 0}),  # the count before this run
             ("README.md", "readme-script"): ({"order": 7}, {"order": 7, "shipped": False})}
    with httpx.Client(base_url=demo["ALMANAC"], headers={"Authorization": f"Bearer {demo['TOKEN']}"}) as api:
        for (page, name), (payload, output) in pages.items():
            made = api.post("/api/v1/scripts", json={"name": name, "source": docblocks.block(page, name)})
            assert made.status_code == 201, made.text
            run = api.post(f"/api/v1/scripts/{made.json()['id']}/run", json={"payload": payload}).json()
            assert (run["status"], run["output"]) == ("succeeded", output), (page, name, run)


def _curl_tutorial(demo: dict[str, str]) -> None:
    done = subprocess.run(["bash", str(EXAMPLES / "first-automation.sh")], env=demo, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    preview, run, schedule, job, runs = _json_lines(done.stdout)
    assert preview["description"] and len(preview["next"]) == 3
    assert run["status"] == "succeeded" and run["output"] == {"greetings": 1}
    assert schedule["next_run_at"] and "weekday" in schedule["description"]
    assert job["key"] == "hello-once"
    assert runs["items"][0]["trigger"] == "manual" and runs["items"][0]["output"] == {"greetings": 1}


def _python_tutorial(demo: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "first_automation.py")], env=demo, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "succeeded" in done.stdout and "hello" in done.stdout


def _greetings(demo: dict[str, str]) -> int:
    answer = httpx.get(f"{demo['ALMANAC']}/api/v1/kv/greetings", headers={"Authorization": f"Bearer {demo['TOKEN']}"})
    return int(answer.json()["value"]) if answer.status_code == 200 else 0


def _readme_api_tour(demo: dict[str, str], tmp_path: Path) -> None:
    """The README's block, with the token line run as it is written (the CLI on PATH from the venv)."""
    block = docblocks.block("README.md", "readme-api-tour").replace(".venv/bin/almanac", ALMANAC)
    env = {k: v for k, v in demo.items() if k not in {"TOKEN", "ALMANAC"}}
    port = demo["ALMANAC"].rsplit(":", 1)[1]
    block = block.replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}")
    script = tmp_path / "tour.sh"
    script.write_text("set -euo pipefail\n" + block.replace("curl -s ", "curl -s -w '\\n' "))
    done = subprocess.run(["bash", str(script)], env=env, cwd=demo["DEMO_DIR"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    answers = _json_lines(done.stdout)
    assert len(answers) == 6 and not [a for a in answers if isinstance(a.get("error"), dict)], done.stdout
    assert answers[2]["status"] == "succeeded"
