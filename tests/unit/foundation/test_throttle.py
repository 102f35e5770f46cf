from datetime import datetime, timedelta, timezone

import pytest

from almanac.errors import RateLimited
from almanac.tenants.throttle import SignInThrottle

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=timezone.utc)


def test_ten_failures_for_one_email_lock_it_for_the_window() -> None:
    throttle = SignInThrottle()
    keys = ["email:a@b.test", "addr:1.2.3.4"]
    for i in range(10):
        throttle.check(keys, T0 + timedelta(seconds=i))
        throttle.failed(keys, T0 + timedelta(seconds=i))
    with pytest.raises(RateLimited) as refused:
        throttle.check(keys, T0 + timedelta(minutes=1))
    assert refused.value.code == "rate_limited" and refused.value.details["retry_after_s"] > 0
    throttle.check(["email:other@b.test", "addr:1.2.3.4"], T0 + timedelta(minutes=1))  # others still may
    throttle.check(keys, T0 + timedelta(minutes=15, seconds=10))  # the window slid past


def test_an_address_gets_more_room_than_an_email_and_success_clears_the_email() -> None:
    throttle = SignInThrottle()
    for i in range(99):
        throttle.failed([f"email:u{i}@b.test", "addr:proxy"], T0)
    throttle.check(["email:new@b.test", "addr:proxy"], T0)
    throttle.failed(["email:u0@b.test", "addr:proxy"], T0)
    with pytest.raises(RateLimited):
        throttle.check(["email:new@b.test", "addr:proxy"], T0)
    throttle.succeeded("email:u0@b.test")
    throttle.check(["email:u0@b.test"], T0)
