"""Scale-out pieces that exist only on PostgreSQL: these tests run on the throwaway server alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from almanac.db import Database
from almanac.settings import Settings

pytestmark = pytest.mark.postgres


@pytest.fixture
def backend() -> str:
    return "postgresql"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """One lane (no lane connections): these tests read the statements and transactions of a claim
    pass and of a record on `database.engine`; a lane's pass makes the same ones on its own
    connection. Lanes themselves: test_lanes.py."""
    return settings.model_copy(update={"pg_lanes": 1})


LANES = 4


@pytest.fixture
def laned(settings: Settings, database: Database) -> Iterator[Database]:
    """A process's database with lanes, beside `database` (one lane), on the same server."""
    db = Database(settings.model_copy(update={"pg_lanes": LANES}))
    yield db
    db.dispose()
