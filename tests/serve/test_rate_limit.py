"""The token buckets of ``mathsearch serve`` (pure: an injected clock, no sleeping)."""

from __future__ import annotations

import pytest

from mathsearch.serve.rate_limit import RateLimiter


def test_burst_then_refill_at_the_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("a") == pytest.approx(0.5)  # one token every 1/rate seconds
    now[0] = 0.5
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") == pytest.approx(0.5)
    now[0] = 100.0  # a long pause refills to the burst, not beyond
    assert [limiter.acquire("a") for _ in range(4)][-1] > 0.0


def test_clients_have_their_own_buckets_and_the_table_is_bounded() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=1.0, burst=1, clock=lambda: now[0], max_clients=2)
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("b") == 0.0
    assert limiter.acquire("a") > 0.0  # a is empty, b did not take from it
    limiter.acquire("c")  # a third client: the idlest (b) is forgotten
    assert set(limiter._buckets) == {"a", "c"}


def test_rate_zero_turns_limiting_off() -> None:
    limiter = RateLimiter(rate=0.0, burst=1)
    assert all(limiter.acquire("a") == 0.0 for _ in range(100))
