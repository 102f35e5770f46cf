"""Tokens, passwords, slugs and settings: the primitives every request relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from almanac.db import schema_for, validate_slug
from almanac.errors import ValidationError
from almanac.settings import Settings
from almanac.tenants import tokens
from almanac.tenants.passwords import hash_password, verify_password


def test_token_has_prefix_and_only_its_hash_matches() -> None:
    minted = tokens.mint()
    assert minted.plaintext.startswith("alm_")
    public_id, secret = tokens.split(minted.plaintext)
    assert public_id == minted.public_id
    assert secret not in minted.secret_hash
    assert tokens.secret_matches(secret, minted.secret_hash)
    assert not tokens.secret_matches(secret + "x", minted.secret_hash)


@pytest.mark.parametrize("bad", ["", "alm_", "alm_short_x", "Bearer alm_x", "xyz_abcdefghijkl_secret", "alm_" + "a" * 300])
def test_malformed_tokens_are_rejected(bad: str) -> None:
    assert tokens.split(bad) is None


def test_password_hash_is_argon2_and_verifies() -> None:
    hashed = hash_password("correct-horse-battery")
    assert hashed.startswith("$argon2id$")
    assert verify_password(hashed, "correct-horse-battery")
    assert not verify_password(hashed, "wrong-horse-battery")
    assert not verify_password("not a hash", "correct-horse-battery")


def test_short_password_is_refused() -> None:
    with pytest.raises(ValidationError):
        hash_password("short")


@pytest.mark.parametrize("slug", ["acme", "acme-corp", "a1", "x" * 40])
def test_valid_slugs(slug: str) -> None:
    assert validate_slug(slug) == slug
    assert schema_for(slug).startswith("t_")


@pytest.mark.parametrize(
    "slug", ["", "a", "Acme", "1acme", "acme_corp", "acme--corp", "-acme", "acme-", 'a";drop', "x" * 41, "a b", "ä"]
)
def test_invalid_slugs_never_reach_sql(slug: str) -> None:
    with pytest.raises(ValidationError):
        schema_for(slug)


def test_secret_key_is_generated_once_and_kept(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path / "var", database_url=f"sqlite:///{tmp_path}/var/a.db")
    first = settings.resolved_secret_key()
    assert len(first) >= 32
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o077 == 0
    assert Settings(var_dir=tmp_path / "var").resolved_secret_key() == first


@pytest.mark.parametrize("placeholder", ["changeme", "secret", "short"])
def test_placeholder_secret_is_refused(placeholder: str) -> None:
    with pytest.raises(ValueError):
        Settings(secret_key=placeholder)


def test_settings_read_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALMANAC_PORT", "9123")
    monkeypatch.setenv("ALMANAC_LOG_LEVEL", "DEBUG")
    settings = Settings()
    assert settings.port == 9123 and settings.log_level == "debug"


def test_the_product_hashes_passwords_at_rfc_9106_cost() -> None:
    """The suite lowers the cost for speed (tests/conftest.py); the package itself must not."""
    import subprocess
    import sys

    code = ("from argon2 import PasswordHasher, Type\nfrom almanac.tenants import passwords\n"
            "h = passwords._hasher\nd = PasswordHasher()\n"
            "assert h.type is Type.ID and (h.time_cost, h.memory_cost, h.parallelism) == "
            "(d.time_cost, d.memory_cost, d.parallelism) and d.memory_cost >= 65536, vars(h)\n"
            "assert passwords.hash_password('correct-horse-battery').startswith('$argon2id$v=19$m=65536,t=3,p=4$')\n")
    subprocess.run([sys.executable, "-c", code], check=True)
