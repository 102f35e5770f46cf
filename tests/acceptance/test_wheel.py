"""The built wheel, installed outside the repository, migrates a fresh database and serves.

The wheel is built from a copy of the package's sources (so nothing of the checkout's layout can
leak in) and installed with `--no-deps` into a new venv; the dependencies come from the test's own
environment through a path entry (not a site dir, so the checkout's editable install is not loaded).
The test then checks that `almanac` is imported from the new venv, not from the repository.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.proc import free_port

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    shutil.copytree(REPO / "almanac", src / "almanac", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", root / "dist", ".",
         cwd=src)
    (wheel,) = (root / "dist").glob("almanac-*.whl")
    venv = root / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=root)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, wheel, cwd=root)
    return venv


def test_the_wheel_migrates_a_fresh_database_outside_the_repository(installed: Path, tmp_path: Path) -> None:
    python = installed / "bin" / "python"
    where = _run(python, "-c", "import almanac, sys; print(almanac.__file__)", cwd=tmp_path)
    assert where.startswith(str(installed)), f"almanac imported from {where}"
    shipped = _run(python, "-c", "import almanac.tenants.migrations as m; print(m.ALEMBIC_DIR)", cwd=tmp_path)
    assert shipped.strip().startswith(str(installed)) and "site-packages" in shipped
    env = {"PATH": "/usr/bin:/bin", "ALMANAC_DATABASE_URL": f"sqlite:///{tmp_path}/var/almanac.db",
           "ALMANAC_VAR_DIR": str(tmp_path / "var"), "ALMANAC_LOG_LEVEL": "warning"}
    cli = [python, "-c", "from almanac.cli import main; main()"]
    _run(*cli, "tenant", "create", "acme", "--admin-email", "a@acme.test", cwd=tmp_path, env=env)
    out = _run(*cli, "migrate", cwd=tmp_path, env=env)
    assert "migrated the shared schema and 1 tenant(s)" in out
    port = free_port()
    server = subprocess.Popen([*map(str, cli), "serve", "--port", str(port), "--no-scheduler"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        import httpx

        from tests.support.wait import wait_until

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return server.poll() is not None  # stop waiting for a server that died
        wait_until(ready, timeout=60, what="the installed server to answer /readyz")
        assert server.poll() is None
        assert "Sign in" in httpx.get(f"http://127.0.0.1:{port}/login", timeout=5).text
    finally:
        server.terminate()
        server.wait(15)
