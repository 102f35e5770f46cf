"""The tenant's egress allowlist, one row per entry (written to match migration t0009_egress_secrets)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from almanac.db import TenantBase, UTCDateTime


class EgressHost(TenantBase):
    __tablename__ = "egress_hosts"

    entry: Mapped[str] = mapped_column(String(300), primary_key=True)  # as `allowlist.Entry.__str__` writes it
    position: Mapped[int] = mapped_column(Integer)  # the order the admin gave
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
