"""Per-client request rate limiting for ``mathsearch serve``: one token bucket per client.

A bucket holds up to ``burst`` tokens and refills at ``rate`` tokens per second; a request takes
one token or is refused with the seconds until the next token (the ``Retry-After`` of the 429
answer). The clock is injectable, so the arithmetic is tested without sleeping. ``rate <= 0``
turns limiting off. The table of buckets is bounded: the idlest clients are forgotten first
(a forgotten client starts again with a full bucket, which only errs on the side of serving).

Example:
    >>> now = [0.0]
    >>> limiter = RateLimiter(rate=1.0, burst=2, clock=lambda: now[0])
    >>> [limiter.acquire("10.0.0.1") for _ in range(3)]
    [0.0, 0.0, 1.0]
    >>> now[0] = 1.0
    >>> limiter.acquire("10.0.0.1")
    0.0
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

logger = logging.getLogger(__name__)

MAX_CLIENTS = 10_000


class RateLimiter:
    """Token buckets keyed by client (thread-safe).

    Args:
        rate: tokens added per second (requests per second sustained); ``<= 0``: no limit.
        burst: bucket size (requests a client may send at once), at least 1.
        clock: monotonic seconds (``time.monotonic``).
        max_clients: buckets kept; the least recently seen client is dropped beyond it.
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, client: str) -> float:
        """Take a token for ``client``: 0.0 when granted, else the seconds to wait."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[client] = (tokens - 1.0, now)
                wait = 0.0
            else:
                self._buckets[client] = (tokens, now)
                wait = (1.0 - tokens) / self.rate
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
        return wait
