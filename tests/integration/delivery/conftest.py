"""Fixtures of the delivery tests: a tenant, a dispatcher on a manual clock, real receivers."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.policy import DeliveryConfig
from tests.integration.delivery.world import Receiver, SmtpServer, World

FAST = DeliveryConfig(timeout_s=0.5, max_attempts=3, backoff_base_s=10, backoff_cap_s=60, retry_after_cap_s=300,
                      poll_s=0.05)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer()
    yield server
    server.close()


@pytest.fixture
def world(database: Any, settings: Any, make_tenant: Callable[..., str], manual_clock: Any,
          smtp: SmtpServer) -> Iterator[World]:
    """Loopback receivers need the operator's switch; test_guard proves it is off by default."""
    open_settings = settings.model_copy(update={"allow_private_targets": True, "smtp_port": smtp.port})
    slug = make_tenant()
    # On PostgreSQL as in production: the dispatcher looks at the tenants whose writes signalled work,
    # and nothing else brings a tenant, so every test here shows that the signals alone bring each delivery.
    dispatcher = Dispatcher(database, manual_clock, open_settings, lambda: [slug], config=FAST, rng=random.Random(7),
                            signals=not database.is_sqlite)
    yield World(database, slug, manual_clock, dispatcher)
    dispatcher.stop()
