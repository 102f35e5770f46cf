"""Rebuild ``almanac/sandbox/almanac-qjs.wasm`` reproducibly: ``make sandbox-wasm``.

Inputs, all pinned (``BUILD``): the QuickJS-NG C sources from the ``quickjs-ng``
sdist on PyPI (checked by sha256), zig's clang and wasi-libc from the
``ziglang`` wheel (installed by the ``wasm-build`` extra), ``almanac_qjs.c``
beside this file, and the flags below.  The output carries no paths or dates
(``-s`` strips debug info), so the same inputs give the same bytes; the
sha256 of the committed binary is recorded in ``BUILD`` and checked by
``tests/unit/sandbox/test_sandbox_reactor.py``.

    python -m almanac.sandbox.reactor.build [--check] [--out PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WASM = HERE.parent / "almanac-qjs.wasm"
BUILD = {
    "sdist": "quickjs_ng-0.17.0.2.tar.gz",
    "sdist_sha256": "43d2e48272208721a7aaea8e3f02d4b9318f12ef20cc4f5421b59d9a470706ef",
    "zig": "0.17.1",
}
SOURCES = ["quickjs.c", "libregexp.c", "libunicode.c", "dtoa.c"]
STACK_BYTES = 2 * 1024 * 1024  # the C shadow stack, placed first in memory (zig's default)
FLAGS = ["-target", "wasm32-wasi", "-mexec-model=reactor", "-O2", "-s", "-D_GNU_SOURCE",
         f"-Wl,-z,stack-size={STACK_BYTES}"]
WASM_SHA256 = "cadf27839d127dd49ca1257470fea28d74c76be2ba5d72bd20fa58c7c327b614"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_sdist(into: Path) -> Path:
    name = BUILD["sdist"]
    version = name.removeprefix("quickjs_ng-").removesuffix(".tar.gz")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"quickjs-ng=={version}", "-d", str(into)], check=True)
    sdist = into / name
    if sha256(sdist) != BUILD["sdist_sha256"]:
        raise SystemExit(f"{name}: sha256 {sha256(sdist)} is not the pinned {BUILD['sdist_sha256']}")
    return sdist


def zig_version() -> str:
    out = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True, text=True)
    return out.stdout.strip()


def build(out: Path) -> str:
    """Compile into ``out``; its sha256."""
    if zig_version() != BUILD["zig"]:
        raise SystemExit(f"needs ziglang=={BUILD['zig']} (pip install -e '.[wasm-build]')")
    with tempfile.TemporaryDirectory(prefix="almanac-qjs-") as tmp:
        work = Path(tmp)
        with tarfile.open(fetch_sdist(work / "dl")) as tar:
            tar.extractall(work / "src", filter="data")
        upstream = next((work / "src").glob("*/upstream-quickjs"))
        shutil.copy(HERE / "almanac_qjs.c", upstream / "almanac_qjs.c")
        # Relative paths, run from the sources' directory: nothing of this machine in the output.
        subprocess.run([sys.executable, "-m", "ziglang", "cc", *FLAGS, "-I.", "almanac_qjs.c", *SOURCES,
                        "-o", "out.wasm"], cwd=upstream, check=True, stderr=subprocess.DEVNULL)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(upstream / "out.wasm", out)
    return sha256(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WASM)
    parser.add_argument("--check", action="store_true", help="build elsewhere; fail unless it matches")
    args = parser.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            built = build(Path(tmp) / "check.wasm")
        committed = sha256(WASM)
        print(f"built {built}\ncommitted {committed}\npinned {WASM_SHA256}")
        raise SystemExit(0 if built == committed == WASM_SHA256 else 1)
    print(f"{args.out}: sha256 {build(args.out)}")


if __name__ == "__main__":
    main()
