"""Tests share one directory of compiled sandbox images (see conftest's `sandbox_image_cache`)."""

from __future__ import annotations

from pathlib import Path


def with_shared_cache(var_dir: Path, cache: Path) -> Path:
    """`var_dir`, made, whose sandbox cache (`var/cache`) is the run's shared one."""
    var_dir.mkdir(parents=True, exist_ok=True)
    (var_dir / "cache").symlink_to(cache, target_is_directory=True)
    return var_dir
