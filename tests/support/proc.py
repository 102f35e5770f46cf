"""Run the real `almanac` command and server in subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ALMANAC = str(Path(sys.executable).parent / "almanac")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli_env(settings: Any, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env.update(
        ALMANAC_DATABASE_URL=settings.database_url,
        ALMANAC_VAR_DIR=str(settings.var_dir),
        ALMANAC_SECRET_KEY=settings.secret_key or "",
        ALMANAC_LOG_LEVEL="warning",
    )
    env.update(extra)
    return env


def settings_of(env: dict[str, str]) -> Any:
    """The Settings a CLI process with `env` reads (the inverse of `cli_env`), for checks in this process."""
    from almanac.settings import Settings

    return Settings(database_url=env["ALMANAC_DATABASE_URL"], var_dir=Path(env["ALMANAC_VAR_DIR"]),
                    secret_key=env["ALMANAC_SECRET_KEY"])


def almanac(*args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([ALMANAC, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


class Server:
    """`almanac serve` on a free port; stopped (or killed) by the test."""

    def __init__(self, env: dict[str, str], *args: str, cwd: Path | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = Path(env.get("ALMANAC_VAR_DIR", "/tmp")) / f"server-{self.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_handle = self.log.open("w")
        self.proc = subprocess.Popen(
            [ALMANAC, "serve", "--port", str(self.port), *args], env=env, cwd=cwd,
            stdout=self._log_handle, stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 60) -> "Server":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.base + "/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"server not ready: {self.log.read_text()[-2000:]}")

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_handle.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._log_handle.close()
