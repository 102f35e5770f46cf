"""The guide's verification recipe, run as printed against a real request; and the guard at delivery time."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.models import Target
from tests.integration.delivery.conftest import FAST
from tests.integration.delivery.world import Receiver, World

pytestmark = pytest.mark.any_backend  # no SQL here that differs between the backends

README = Path(__file__).resolve().parents[3] / "docs" / "guide" / "delivery.md"


def _recipe() -> Callable[..., bool]:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    scope: dict[str, Any] = {}
    exec(compile(code, "README recipe", "exec"), scope)
    return scope["verify_almanac_webhook"]


def test_the_readme_recipe_verifies_a_real_request(world: World, receiver: Receiver) -> None:
    verify = _recipe()
    _, secret = world.add_target(kind="webhook", name="h", url=receiver.base + "/ok", topics=["*"])
    world.emit("order.created", {"order": 7})
    world.step()
    [got] = receiver.got
    assert verify(secret, got.headers, got.body)
    assert not verify(secret, got.headers, got.body.replace(b"7", b"8"))
    assert not verify("whsec_" + "A" * 44, got.headers, got.body)
    old = {**got.headers, "webhook-timestamp": str(int(got.headers["webhook-timestamp"]) - 301)}
    assert not verify(secret, old, got.body)
    assert set(json.loads(got.body)) == {"id", "topic", "created_at", "tenant", "data", "run_id", "schedule_id", "job_key"}


def test_the_guard_refuses_loopback_at_delivery_when_not_allowed(world: World, receiver: Receiver,
                                                                  database: Any, settings: Any) -> None:
    """A target stored while allowed (or whose name later resolves inside) is refused at send time."""
    assert settings.allow_private_targets is False
    world.add_target(kind="webhook", name="h", url=receiver.base + "/ok", topics=["*"])
    world.add_target(kind="webhook", name="named", url=receiver.base.replace("127.0.0.1", "localhost") + "/ok",
                     topics=["*"])
    guarded = Dispatcher(database, world.clock, settings, lambda: [world.tenant], config=FAST, rng=random.Random(1))
    world.dispatcher = guarded
    world.emit("x", {})
    world.step()
    guarded.stop()
    assert receiver.got == []
    for d in world.deliveries():
        assert d.status == "failed" and d.last_error.startswith("refused:")
    with database.tenant_session(world.tenant) as s:
        assert s.query(Target).count() == 2
