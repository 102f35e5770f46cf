"""Fan-out and delivery against real local receivers, on a manual clock (only the sends are real time)."""

from __future__ import annotations

import json
import time
from datetime import timedelta

from almanac.delivery import signing
from tests.integration.delivery.world import SLOW_S, Receiver, SmtpServer, World


def test_an_event_reaches_matching_targets_signed_and_once(world: World, receiver: Receiver) -> None:
    hook, secret = world.add_target(kind="webhook", name="h", url=receiver.base + "/ok", topics=["order.*"])
    world.add_target(kind="webhook", name="other", url=receiver.base + "/ok", topics=["invoice.paid"])
    event_id = world.emit("order.created", {"order": 7})
    assert world.step() >= 1
    assert world.step() == 0  # nothing left: fanned out once, delivered once
    [got] = receiver.got
    payload = json.loads(got.body)
    assert payload == {"id": got.headers["webhook-id"], "topic": "order.created", "created_at": "2026-11-21T09:00:00Z",
                       "tenant": world.tenant, "data": {"order": 7}, "run_id": payload["run_id"], "schedule_id": 1,
                       "job_key": None}
    assert payload["id"].startswith("evt_") and got.headers["almanac-topic"] == "order.created"
    assert signing.verify(secret, got.headers, got.body, now=int(time.time()))
    [delivery] = world.deliveries()
    assert (delivery.event_id, delivery.target_id, delivery.status, delivery.attempts) == (event_id, hook, "succeeded", 1)
    assert delivery.last_status_code == 200 and delivery.next_attempt_at is None


def test_failures_back_off_then_die_and_keep_the_same_event_id(world: World, receiver: Receiver) -> None:
    world.add_target(kind="webhook", name="h", url=receiver.base + "/fail", topics=["*"])
    world.emit("x", {})
    world.step()
    [d] = world.deliveries()
    assert d.status == "failed" and d.last_status_code == 500 and d.attempts == 1
    first_wait = d.next_attempt_at - world.clock.now()
    assert timedelta(seconds=5) <= first_wait <= timedelta(seconds=10)  # base 10 s, equal jitter
    assert world.step(1) == 0  # not due yet
    world.until_next()
    world.until_next()
    [d] = world.deliveries()
    assert d.status == "dead" and d.attempts == 3 and d.next_attempt_at is None
    assert [a.outcome for a in world.attempts(d.id)] == ["failed"] * 3
    assert len({r.headers["webhook-id"] for r in receiver.got}) == 1
    assert [r.headers["almanac-delivery-attempt"] for r in receiver.got] == ["1", "2", "3"]


def test_a_hanging_receiver_times_out_and_a_slow_one_succeeds(world: World, receiver: Receiver) -> None:
    world.add_target(kind="webhook", name="hang", url=receiver.base + "/hang", topics=["a"])
    world.add_target(kind="webhook", name="slow", url=receiver.base + "/slow", topics=["a"])
    world.emit("a", 1)
    started = time.monotonic()
    world.step()
    assert time.monotonic() - started < 1.5  # the 0.5 s timeout held; the two went out side by side
    hang, slow = world.deliveries()
    assert hang.status == "failed" and "timed out" in hang.last_error and hang.last_status_code is None
    assert slow.status == "succeeded" and slow.last_latency_ms >= SLOW_S * 1000 * 0.9


def test_retry_after_is_respected_up_to_the_cap(world: World, receiver: Receiver) -> None:
    world.add_target(kind="webhook", name="h", url=receiver.base + "/busy", topics=["*"])
    world.emit("x", {})
    world.step()
    [d] = world.deliveries()
    assert d.last_status_code == 503 and d.next_attempt_at - world.clock.now() >= timedelta(seconds=120)


def test_redirects_are_not_followed(world: World, receiver: Receiver) -> None:
    world.add_target(kind="webhook", name="h", url=receiver.base + "/redirect", topics=["*"])
    world.emit("x", {})
    world.step()
    [d] = world.deliveries()
    assert d.status == "failed" and d.last_status_code == 302
    assert [r.path for r in receiver.got] == ["/redirect"]


def test_events_of_one_schedule_reach_a_target_in_order(world: World, receiver: Receiver) -> None:
    receiver.flaky_left, receiver.flaky_data = 1, 1  # the first send of event 1 fails
    world.add_target(kind="webhook", name="h", url=receiver.base + "/flaky", topics=["*"])
    world.emit("n", 1, schedule_id=1)
    world.emit("n", 2, schedule_id=1)
    world.emit("n", 3, schedule_id=2)  # another schedule is not held back
    world.step()
    assert sorted(json.loads(r.body)["data"] for r in receiver.got) == [1, 3]  # sent side by side
    world.until_next()
    assert sorted(json.loads(r.body)["data"] for r in receiver.got[:2]) == [1, 3]
    assert [json.loads(r.body)["data"] for r in receiver.got[2:]] == [1]  # event 2 still waits behind 1
    world.step()
    assert [json.loads(r.body)["data"] for r in receiver.got[2:]] == [1, 2]


def test_a_lapsed_lease_is_taken_over_and_the_late_result_is_fenced(world: World, receiver: Receiver) -> None:
    from almanac.delivery import store
    from almanac.delivery.sending import Result

    world.add_target(kind="webhook", name="h", url=receiver.base + "/ok", topics=["*"])
    world.emit("x", {})
    cfg = world.dispatcher.config
    with world.db.tenant_session(world.tenant) as s:
        from almanac.delivery import fanout
        fanout.fan_out(s, now=world.clock.now(), limit=10)
    with world.db.tenant_session(world.tenant) as s:
        [first] = store.claim_due(s, world.tenant, world.clock.now(), cfg)
    with world.db.tenant_session(world.tenant) as s:
        assert store.claim_due(s, world.tenant, world.clock.now(), cfg) == []  # leased
    world.clock.advance(cfg.lease_s + 1)
    assert world.step() == 1  # taken over and delivered
    with world.db.tenant_session(world.tenant) as s:
        assert store.record(s, first, Result(ok=False, latency_ms=1), world.clock.now(), cfg, world.dispatcher.rng) is None
    [d] = world.deliveries()
    assert d.status == "succeeded" and d.attempts == 2


def test_disabled_targets_get_nothing_and_unmatched_events_are_marked(world: World, receiver: Receiver) -> None:
    world.add_target(kind="webhook", name="h", url=receiver.base + "/ok", topics=["only.this"])
    world.emit("something.else", {})
    assert world.step() == 0 and world.deliveries() == []
    assert world.step() == 0


def test_email_goes_through_smtp_rendered_in_the_sandbox(world: World, smtp: SmtpServer) -> None:
    world.add_target(kind="email", name="m", recipients=["ops@example.com", "b@example.com"], topics=["order.*"],
                     subject_template="Order {{ event.data.order }}\nBcc: evil@x.test",
                     body_template="Hello {{ event.data.who }} <b>{{ event.topic }}</b>")
    world.emit("order.shipped", {"order": 7, "who": "<Ann>"})
    world.step()
    [envelope] = smtp.box.messages
    text = envelope.content.decode()
    assert envelope.rcpt_tos == ["ops@example.com", "b@example.com"]
    assert "Subject: Order 7 Bcc: evil@x.test" in text and "\nBcc:" not in text
    assert "Hello <Ann> <b>order.shipped</b>" in text  # plain text: no HTML escaping
    assert world.deliveries()[0].status == "succeeded"


def test_email_refusals_and_template_errors_follow_the_retry_rules(world: World, smtp: SmtpServer) -> None:
    smtp.box.refuse = True
    world.add_target(kind="email", name="m", recipients=["ops@example.com"], topics=["a"])
    world.add_target(kind="email", name="bad", recipients=["ops@example.com"], topics=["a"],
                     body_template="{{ ().__class__.__mro__ }}")
    world.emit("a", {})
    world.step()
    refused, bad = world.deliveries()
    assert refused.status == "failed" and ("550" in refused.last_error or "refused" in refused.last_error)
    assert bad.status == "failed" and "unsafe" in bad.last_error
    smtp.box.refuse = False
    world.step(60)  # past both planned retries
    assert world.deliveries()[0].status == "succeeded"


def test_the_background_loop_delivers_without_help(world: World, receiver: Receiver) -> None:
    world.add_target(kind="webhook", name="h", url=receiver.base + "/ok", topics=["*"])
    world.dispatcher.start()
    world.emit("x", {})
    world.dispatcher.wake(world.tenant)
    deadline = time.monotonic() + 5
    while not receiver.got and time.monotonic() < deadline:
        time.sleep(0.02)
    world.dispatcher.stop()
    assert len(receiver.got) == 1
