"""The key secrets are encrypted under: Fernet (AES-128-CBC + HMAC-SHA256, from `cryptography`).

`ALMANAC_SECRETS_KEY` holds one Fernet key, or several separated by commas: the first encrypts,
every one decrypts (`MultiFernet`), which is how a rotation proceeds without a moment when a
stored value cannot be read. Unset, the keys live in `var_dir/secrets_key` (mode 0600), made on
first use like `secret_key`. `almanac secrets rotate-key` (see `rotate`) adds a new first key,
re-encrypts every stored value under it, then drops the old ones. A process whose key file was
rotated underneath it reloads the file once when a token does not decrypt.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from almanac.errors import ValidationError
from almanac.settings import Settings

KEYFILE = "secrets_key"
PREFIX = "fernet:"  # marks an encrypted column value (a legacy plain value has none)


class BadKey(ValidationError):
    """The configured key is not a Fernet key."""


def parse_keys(text: str) -> list[bytes]:
    keys = [k.strip().encode() for k in text.split(",") if k.strip()]
    if not keys:
        raise BadKey("ALMANAC_SECRETS_KEY holds no key.")
    for key in keys:
        try:
            Fernet(key)
        except (ValueError, TypeError):
            raise BadKey("ALMANAC_SECRETS_KEY must be Fernet keys (32 url-safe base64 bytes), comma-separated.") \
                from None
    return keys


def write_keyfile(path: Path, keys: list[bytes]) -> None:
    """Replace the key file atomically (mode 0600): a crash leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(",".join(k.decode() for k in keys) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class Keyring:
    """Encrypts and decrypts column values; thread-safe."""

    def __init__(self, configured: str | None, var_dir: Path) -> None:
        self.configured, self.path = configured, Path(var_dir) / KEYFILE
        self._lock = threading.Lock()
        self._fernet = MultiFernet([Fernet(k) for k in self.keys()])

    def keys(self) -> list[bytes]:
        """The keys now in force, first the one that encrypts (the file is created when missing)."""
        if self.configured:
            return parse_keys(self.configured)
        if not self.path.exists():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileNotFoundError:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                fd = -1
            if fd >= 0:
                with os.fdopen(fd, "w") as handle:
                    handle.write(Fernet.generate_key().decode() + "\n")
        return parse_keys(self.path.read_text())

    def encrypt(self, plain: str) -> str:
        return PREFIX + self._fernet.encrypt(plain.encode("utf-8")).decode("ascii")

    def decrypt(self, stored: str) -> str:
        """The plain value; a value stored before encryption (no prefix) is returned as it is."""
        if not stored.startswith(PREFIX):
            return stored
        token = stored[len(PREFIX):].encode("ascii")
        try:
            return self._fernet.decrypt(token).decode("utf-8")
        except InvalidToken:
            self.reload()  # rotated by `almanac secrets rotate-key` since this process started?
            return self._fernet.decrypt(token).decode("utf-8")

    def rotate_value(self, stored: str) -> str:
        """The value encrypted under the first key (a legacy plain value gets encrypted)."""
        if not stored.startswith(PREFIX):
            return self.encrypt(stored)
        return PREFIX + self._fernet.rotate(stored[len(PREFIX):].encode("ascii")).decode("ascii")

    def reload(self) -> None:
        with self._lock:
            self._fernet = MultiFernet([Fernet(k) for k in self.keys()])


_RINGS: dict[tuple[str | None, str], Keyring] = {}
_RINGS_LOCK = threading.Lock()


def for_settings(settings: Settings) -> Keyring:
    """The process's keyring for these settings (one per key source, built on first use)."""
    configured, var_dir = settings.secrets_key, Path(settings.var_dir)
    key = (configured, str(var_dir.resolve()))
    with _RINGS_LOCK:
        ring = _RINGS.get(key)
        if ring is None:
            ring = _RINGS[key] = Keyring(configured, var_dir)
        return ring
