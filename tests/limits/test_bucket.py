"""Token buckets on a fake clock: burst, refill, the Retry-After they give, one bucket per key."""

from __future__ import annotations

import pytest

from adslot.limits.bucket import KeyBuckets, TokenBucket, default_burst, retry_after


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_bucket_admits_its_burst_at_once_then_refuses() -> None:
    bucket = TokenBucket(rate=2, burst=4, now=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [0.0] * 4
    assert bucket.take(0.0) == pytest.approx(0.5)


def test_tokens_come_back_at_the_rate_and_never_beyond_the_burst() -> None:
    bucket = TokenBucket(rate=10, burst=3, now=0.0)
    for _ in range(3):
        bucket.take(0.0)
    assert bucket.take(0.05) > 0  # half a token
    assert bucket.take(0.1) == 0.0  # one token after 0.1 s
    assert bucket.take(0.1) > 0
    # A long pause refills only up to the burst.
    assert [bucket.take(100.0) for _ in range(4)].count(0.0) == 3


def test_the_wait_is_the_time_until_one_whole_token() -> None:
    bucket = TokenBucket(rate=0.5, burst=1, now=0.0)
    assert bucket.take(0.0) == 0.0
    assert bucket.take(0.5) == pytest.approx(1.5)  # a quarter token after 0.5 s: 1.5 s to go
    assert bucket.take(2.0) == 0.0


def test_a_refused_request_takes_nothing() -> None:
    bucket = TokenBucket(rate=1, burst=1, now=0.0)
    bucket.take(0.0)
    for _ in range(10):
        assert bucket.take(0.5) > 0
    assert bucket.take(1.0) == 0.0


def test_a_clock_going_back_neither_adds_nor_removes_tokens() -> None:
    bucket = TokenBucket(rate=1, burst=2, now=10.0)
    bucket.take(10.0)
    assert bucket.take(5.0) == 0.0
    assert bucket.take(5.0) > 0


def test_retry_after_is_whole_seconds_rounded_up_and_at_least_one() -> None:
    assert retry_after(0.001) == 1
    assert retry_after(1.0) == 1
    assert retry_after(1.01) == 2
    assert retry_after(7.5) == 8


def test_the_default_burst_is_twice_the_rate_and_at_least_one() -> None:
    assert default_burst(50) == 100
    assert default_burst(0.2) == 1


def test_bad_buckets_are_refused() -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=0, burst=1, now=0.0)
    with pytest.raises(ValueError):
        TokenBucket(rate=1, burst=0.5, now=0.0)


def test_each_key_has_its_own_bucket_and_gets_retry_after_in_seconds() -> None:
    clock = Clock()
    limits = KeyBuckets(rate=1, burst=2, clock=clock)
    assert [limits.check(1) for _ in range(3)] == [0, 0, 1]
    assert limits.check(2) == 0  # another key is served while key 1 is limited
    clock.now += 1.0
    assert limits.check(1) == 0
    assert limits.check(1) == 1


def test_a_slow_rate_answers_a_long_retry_after() -> None:
    clock = Clock()
    limits = KeyBuckets(rate=0.1, clock=clock)  # burst: 1
    assert limits.check(7) == 0
    assert limits.check(7) == 10
    clock.now += 4
    assert limits.check(7) == 6
