"""Load shedding of ``mathsearch serve``: a bound on the requests in flight, a short wait, 503.

At most ``limit`` API requests run at once (``MATHSEARCH_SERVE_MAX_INFLIGHT``); up to ``limit``
more wait for a slot in arrival order, each at most ``timeout`` seconds
(``MATHSEARCH_SERVE_QUEUE_TIMEOUT``). A request beyond that queue, or one whose wait runs out, is
refused at once with ``503`` and ``Retry-After`` instead of piling up threads, sockets and cluster
searches until everything times out. When OpenSearch itself sheds (HTTP 429 / 503, an
``es_rejected_execution_exception``) or times out, the search fails with
:class:`ClusterBusyError`, which the API also answers with 503 + ``Retry-After`` (not 500).

The limiter holds no asyncio primitive bound to one event loop (a waiter's future belongs to
the loop that awaits it and is woken thread-safely), so one limiter serves any loop, and it is
tested with tiny timeouts and without a server.

Example::

    slots = InflightLimiter(limit=16, timeout=1.0)
    if not await slots.acquire():
        return error(503, "busy")          # with Retry-After: RETRY_AFTER_S
    try:
        ...
    finally:
        slots.release()
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from mathsearch.core.errors import ClusterUnavailableError

logger = logging.getLogger(__name__)

__all__ = ["RETRY_AFTER_S", "ClusterBusyError", "InflightLimiter", "cluster_busy_reason"]

#: Seconds a shed client is told to wait (``Retry-After``).
RETRY_AFTER_S = 1
#: OpenSearch answers that mean "overloaded, try again", not "bad request".
BUSY_STATUSES = frozenset({429, 503, 504})
_BUSY_TYPES = ("rejected_execution", "circuit_breaking", "timeout")


class ClusterBusyError(ClusterUnavailableError):
    """OpenSearch shed the request (429 / 503 / rejected execution) or timed out: retry later."""


def cluster_busy_reason(status: Any, info: Any) -> str | None:
    """Why an OpenSearch error answer is an overload (``None`` when it is not one).

    >>> cluster_busy_reason(429, {"error": {"type": "es_rejected_execution_exception"}})
    'OpenSearch is overloaded (429 es_rejected_execution_exception)'
    >>> cluster_busy_reason(400, {"error": {"type": "parsing_exception"}}) is None
    True
    """
    types = _error_types(info.get("error") if isinstance(info, dict) else None)
    busy = [t for t in types if any(word in t for word in _BUSY_TYPES)]
    if status not in BUSY_STATUSES and not busy:
        return None
    kind = (busy or types or [""])[0]
    return (
        f"OpenSearch is overloaded ({status} {kind})"
        if kind
        else f"OpenSearch is overloaded ({status})"
    )


def _error_types(error: Any, depth: int = 0) -> list[str]:
    """The ``type`` of an error answer, its root causes and what caused it."""
    if isinstance(error, str):
        return [error]
    if not isinstance(error, dict) or depth > 5:
        return []
    types = [str(error["type"])] if error.get("type") else []
    for root in error.get("root_cause") or []:
        types += _error_types(root, depth + 1)
    return types + _error_types(error.get("caused_by"), depth + 1)


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = field(default=False)


class InflightLimiter:
    """At most ``limit`` holders; at most ``max_waiting`` waiters (default ``limit``), each for
    at most ``timeout`` seconds. Thread-safe; any event loop.

    Counters (for ``/metrics`` and ``/health``): :attr:`in_flight`, :attr:`waiting`,
    :attr:`shed` (refused at once: the queue was full), :attr:`timed_out` (waited in vain).
    """

    def __init__(self, limit: int, timeout: float, *, max_waiting: int | None = None) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.limit = limit
        self.timeout = max(0.0, float(timeout))
        self.max_waiting = limit if max_waiting is None else max(0, max_waiting)
        self.in_flight = 0
        self.shed = 0
        self.timed_out = 0
        self._waiters: deque[_Waiter] = deque()
        self._lock = threading.Lock()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def try_acquire(self) -> bool:
        """Take a free slot now, without waiting."""
        with self._lock:
            if self.in_flight < self.limit and not self._waiters:
                self.in_flight += 1
                return True
            return False

    async def acquire(self) -> bool:
        """Take a slot, waiting at most :attr:`timeout`; ``False``: refused (answer 503)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.in_flight < self.limit and not self._waiters:
                self.in_flight += 1
                return True
            if len(self._waiters) >= self.max_waiting or self.timeout <= 0:
                self.shed += 1
                return False
            waiter = _Waiter(loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), self.timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with self._lock:
                if waiter.granted:  # the slot was handed over as the wait ran out: keep it
                    if isinstance(exc, asyncio.CancelledError):
                        self._release_locked()
                        raise
                    return True
                self._waiters.remove(waiter)
                self.timed_out += 1
            if isinstance(exc, asyncio.CancelledError):
                raise
            return False
        return True

    def release(self) -> None:
        """Give a slot back: to the longest waiter, or free."""
        with self._lock:
            self._release_locked()

    def _release_locked(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            try:
                waiter.loop.call_soon_threadsafe(_wake, waiter.future)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                continue
            waiter.granted = True  # the slot passes on: in_flight stays
            return
        self.in_flight = max(0, self.in_flight - 1)

    def snapshot(self) -> dict[str, int]:
        """The counters, for reports."""
        with self._lock:
            return {
                "limit": self.limit,
                "in_flight": self.in_flight,
                "waiting": len(self._waiters),
                "shed": self.shed,
                "timed_out": self.timed_out,
            }


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
