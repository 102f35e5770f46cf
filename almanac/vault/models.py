"""The tenant's secrets: name, the value encrypted (`keyring`), when it last changed.
Written to match migration t0009_egress_secrets."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from almanac.db import TenantBase, UTCDateTime


class Secret(TenantBase):
    __tablename__ = "secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)  # "fernet:<token>": never the plain value
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
