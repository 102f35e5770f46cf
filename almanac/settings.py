"""Configuration from `ALMANAC_*` environment variables (SPEC section 1).

Nothing is built at import time: call `get_settings()` (or construct
`Settings` in tests) and pass the result down.
"""

from __future__ import annotations

import os
import secrets
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PLACEHOLDER_SECRETS = {"changeme", "change-me", "secret", "changethis", ""}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ALMANAC_", extra="ignore")

    database_url: str = "sqlite:///./var/almanac.db"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    secret_key: str | None = None
    log_level: str = "info"
    var_dir: Path = Path("./var")
    # Mark the session cookie Secure (only sent over HTTPS): turn on behind a TLS proxy.
    secure_cookies: bool = False
    # Size of the SQLAlchemy pool per process; tenants share it (no per-tenant connections).
    pool_size: int = Field(default=10, ge=1, le=200)
    # Lowest minimum interval between occurrences for a new tenant (SPEC section 5).
    default_min_interval_seconds: int = Field(default=60, ge=1)
    # Outbound webhooks may reach private and loopback addresses only when the operator says so.
    allow_private_targets: bool = False
    # A claimed run's lease is its script's timeout plus this margin; then another process may retry it.
    lease_margin_s: float = Field(default=30.0, gt=0, le=3600)
    # No tenant takes more than this share of the run slots while other tenants wait (SPEC section 11).
    tenant_max_share: float = Field(default=0.5, gt=0, le=1)
    # Sandbox worker processes (0 = run scripts in threads of this process; None = one per core).
    sandbox_processes: int | None = Field(default=None, ge=0, le=64)
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(default=25, ge=1, le=65535)
    smtp_from: str = "almanac@localhost"
    smtp_username: str | None = None
    smtp_password: str | None = None
    smtp_starttls: bool = False
    # Event delivery (webhooks and e-mail): per-attempt timeout, retries with doubling backoff.
    delivery_timeout_s: float = Field(default=10.0, gt=0, le=120)
    delivery_max_attempts: int = Field(default=8, ge=1, le=50)
    delivery_backoff_base_s: float = Field(default=30.0, gt=0)
    delivery_backoff_cap_s: float = Field(default=3 * 3600.0, gt=0)
    delivery_retry_after_cap_s: float = Field(default=3600.0, gt=0)
    delivery_poll_s: float = Field(default=1.0, gt=0, le=60)

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        value = value.lower()
        if value not in {"debug", "info", "warning", "error", "critical"}:
            raise ValueError("log level must be debug, info, warning, error or critical")
        return value

    @field_validator("secret_key")
    @classmethod
    def _no_placeholder(cls, value: str | None) -> str | None:
        if value is not None and (value.strip().lower() in PLACEHOLDER_SECRETS or len(value) < 16):
            raise ValueError("ALMANAC_SECRET_KEY must be at least 16 characters and not a placeholder")
        return value

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def sqlite_dir(self) -> Path:
        """Folder holding the main SQLite file and one file per tenant."""
        path = self.database_url.split("///", 1)[1] if "///" in self.database_url else ""
        if not path or path == ":memory:":
            return self.var_dir
        return Path(path).resolve().parent

    def resolved_secret_key(self) -> str:
        """The configured key, or one generated once and kept under `var_dir`."""
        if self.secret_key:
            return self.secret_key
        keyfile = self.var_dir / "secret_key"
        if keyfile.exists():
            return keyfile.read_text().strip()
        self.var_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(48)
        fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(key)
        return key


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
