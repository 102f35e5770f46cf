"""What `make run` does after installing: `almanac serve --demo` in a fresh folder with no configuration."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.proc import ALMANAC, free_port


def _start(cwd: Path, port: int) -> tuple[subprocess.Popen, Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env["ALMANAC_PORT"] = str(port)
    log = cwd / f"serve-{time.monotonic_ns()}.log"
    proc = subprocess.Popen([ALMANAC, "serve", "--demo"], cwd=cwd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc, log
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(log.read_text()[-3000:])


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=20)


def test_first_start_creates_demo_and_prints_credentials_then_keeps_them(tmp_path: Path) -> None:
    port = free_port()
    proc, log = _start(tmp_path, port)
    try:
        output = log.read_text()
        assert "admin@demo.local" in output
        # The address stands plainly beside the credentials, not only inside a JSON log line.
        assert f"Sign in at http://127.0.0.1:{port}/ with\n  email:    admin@demo.local" in output, output
        password = re.search(r"password:\s+(\S+)", output).group(1)
        assert (tmp_path / "var" / "almanac.db").exists() and (tmp_path / "var" / "tenants" / "demo.db").exists()
        assert (tmp_path / "var" / "secret_key").exists()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as browser:
            form = browser.get("/login").text
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
            login = browser.post("/login", data={"email": "admin@demo.local", "password": password, "csrf_token": csrf})
            assert login.status_code == 303, login.text
            assert browser.get("/").status_code == 200
    finally:
        _stop(proc)
    proc, log = _start(tmp_path, port)
    try:
        assert f"Demo tenant exists: sign in at http://127.0.0.1:{port}/ as admin@demo.local" in log.read_text()
    finally:
        _stop(proc)
