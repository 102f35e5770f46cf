"""Configuration from `ALMANAC_*` environment variables (SPEC section 1).

Nothing is built at import time: call `get_settings()` (or construct
`Settings` in tests) and pass the result down.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PLACEHOLDER_SECRETS = {"changeme", "change-me", "secret", "changethis", ""}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ALMANAC_", extra="ignore")

    # Each field's description is the README's configuration table (tools/settings_table.py writes
    # it; tests/unit/foundation/test_settings_doc.py keeps the two the same).
    database_url: str = Field(
        default="sqlite:///./var/almanac.db",
        description="`sqlite:///path` (embedded, one machine) or `postgresql+psycopg://user:pass@host/db`")
    host: str = Field(default="127.0.0.1", description="address `almanac serve` listens on")
    port: int = Field(default=8000, ge=1, le=65535, description="port `almanac serve` listens on")
    secret_key: str | None = Field(
        default=None,
        description="SPEC section 1's signing key, generated once into `var_dir/secret_key` (mode 0600) on the "
                    "first `almanac serve` when unset; sessions now live on the server, so nothing signs with it "
                    "today; placeholders and keys under 16 characters are refused")
    secrets_key: str | None = Field(
        default=None,
        description="Fernet key(s) that encrypt tenants' secrets and webhook signing secrets at rest, comma-separated "
                    "(the first encrypts, all decrypt); unset, generated once into `var_dir/secrets_key` (mode 0600); "
                    "`almanac secrets rotate-key` re-encrypts everything under a new key")
    log_level: str = Field(default="info", description="debug, info, warning, error or critical (JSON lines on stderr)")
    var_dir: Path = Field(
        default=Path("./var"),
        description="where the generated secret key, the SQLite tenant files and the compiled sandbox cache live")
    guide_dir: Path = Field(
        default=Path("./site"),
        description="the built user guide (`make docs` writes it), served at `/guide`; while it is missing, `/guide` "
                    "says how to build it and links the API reference at `/docs`")
    trusted_proxies: str = Field(
        default="",
        description="comma-separated addresses or CIDR ranges of the reverse proxies in front of `almanac serve`; "
                    "only a request from one of them may name its client (`X-Forwarded-For`, "
                    "`X-Forwarded-Proto`), which the audit log and the sign-in throttle then use; empty: no one")
    secure_cookies: bool = Field(
        default=False, description="send the session cookie only over HTTPS (turn on behind a TLS proxy)")
    pool_size: int = Field(
        default=10, ge=1, le=200,
        description="database connections per process, shared by all tenants (no per-tenant connections)")
    pg_tenants_per_connection: int = Field(
        default=100, ge=1, le=1_000_000,
        description="PostgreSQL: a pooled connection that has named more tenants' schemas than this is closed "
                    "and replaced when it is next handed out; a database backend keeps ~150 kB of catalog cache "
                    "and ~1.2 MB of plans (the claim's and the record's functions) for every tenant it has met "
                    "and never frees them (README, Sizing)")
    pg_lanes: int = Field(
        default=4, ge=1, le=64,
        description="PostgreSQL: connections per process that each claim and record the runs of a fixed share of "
                    "the tenants, so that a backend keeps meeting the same tenants' tables and plans (warm caches, "
                    "~1.4 MB a tenant once per process); 1: every tenant on the shared pool (README, Sizing)")
    default_min_interval_seconds: int = Field(
        default=60, ge=1, description="minimum interval between occurrences for new tenants (SPEC section 5)")
    allow_private_targets: bool = Field(
        default=False,
        description="let webhooks reach loopback, private and link-local addresses (tests, closed networks)")
    lease_margin_s: float = Field(
        default=30.0, gt=0, le=3600,
        description="a claimed run's lease is its script's timeout plus this; then another process may retry it")
    timer_lease_s: float = Field(
        default=10.0, gt=0, le=3600,
        description="PostgreSQL scale-out: how long a process holds a tenant's timer without renewing it")
    tenant_max_share: float = Field(
        default=0.5, gt=0, le=1,
        description="no tenant takes more than this share of the run slots while other tenants wait, nor of the "
                    "sandbox pool's workers and spares at any time (SPEC section 11; decision 0240)")
    run_now_waiting_max: int = Field(
        default=4, ge=1, le=1000,
        description="runs a tenant may have waiting at once, per server process, that a request started and waits "
                    "for (`POST /api/v1/scripts/{id}/run`, a page's Run now, Try draft, Run again, Try with "
                    "payload); past it 429 `rate_limited` with `Retry-After`")
    sandbox_processes: int | None = Field(
        default=None, ge=0, le=64,
        description="sandbox worker processes; unset: one per core; 0 runs scripts in threads of this process")
    sandbox_spare_workers: int = Field(
        default=32, ge=0, le=256,
        description="extra sandbox worker processes started while runs wait on `fetch`, so the pool keeps "
                    "`sandbox_processes` workers running scripts (each waiting run parks its worker)")
    smtp_host: str = Field(default="127.0.0.1", description="outgoing e-mail server")
    smtp_port: int = Field(default=25, ge=1, le=65535, description="outgoing e-mail port")
    smtp_from: str = Field(default="almanac@localhost", description="sender of e-mail deliveries")
    smtp_username: str | None = Field(default=None, description="SMTP login, if the server wants one")
    smtp_password: str | None = Field(default=None, description="SMTP password, if the server wants one")
    smtp_starttls: bool = Field(default=False, description="upgrade the SMTP connection with STARTTLS")
    delivery_timeout_s: float = Field(default=10.0, gt=0, le=120, description="per-attempt timeout of a delivery")
    delivery_max_attempts: int = Field(default=8, ge=1, le=50, description="attempts before a delivery is dead")
    delivery_backoff_base_s: float = Field(default=30.0, gt=0, description="first retry delay, doubling each time")
    delivery_backoff_cap_s: float = Field(default=3 * 3600.0, gt=0, description="longest retry delay")
    delivery_retry_after_cap_s: float = Field(
        default=3600.0, gt=0, description="longest `Retry-After` a receiving server may ask for")
    delivery_poll_s: float = Field(
        default=1.0, gt=0, le=60, description="how often the dispatcher looks for due deliveries when not woken")

    retention_days: int = Field(
        default=30, ge=1, le=36_500,
        description="days of history (runs, ended occurrences, events and their deliveries) kept per tenant "
                    "before pruning (SPEC section 9); `almanac tenant retention SLUG --days N` overrides it per tenant")
    prune_interval_s: float = Field(
        default=600.0, gt=0, le=86_400,
        description="how often `almanac serve` / `almanac worker` prune history past its retention "
                    "(`almanac prune` does it at once)")
    prune_batch: int = Field(
        default=500, ge=1, le=10_000,
        description="rows removed per pruning transaction: small, so that pruning never holds up claims")
    token_cache_s: float = Field(
        default=2.0, ge=0, le=60,
        description="seconds an API token verified by the database is trusted without looking it up again; "
                    "a token revoked by another process stops working within this time (0: look up every request)")

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        value = value.lower()
        if value not in {"debug", "info", "warning", "error", "critical"}:
            raise ValueError("log level must be debug, info, warning, error or critical")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, value: str) -> str:
        for item in filter(None, (part.strip() for part in value.split(","))):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"ALMANAC_TRUSTED_PROXIES: {item!r} is not an IP address or CIDR range") from None
        return value

    def trusted_proxy_list(self) -> list[str]:
        """The trusted proxies' addresses and ranges, as the proxy-headers middleware takes them."""
        return [str(ipaddress.ip_network(part.strip(), strict=False))
                for part in self.trusted_proxies.split(",") if part.strip()]

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
        self.var_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = secrets.token_urlsafe(48)
        fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(key)
        return key


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
