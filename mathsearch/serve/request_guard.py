"""The request guard of ``mathsearch serve``: the app's one HTTP middleware.

:func:`request_guard` admits a request (API key, body size, rate, in-flight slot;
:mod:`mathsearch.serve.admission`) or answers the refusal, holds an API route's slot until its
answer is ready, adds the security headers (``Content-Security-Policy``: the page loads nothing
from outside) and counts the request by route, method and status in the app's metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.responses import Response

from mathsearch.serve.admission import LIMITED_PREFIXES, admitted, refusal
from mathsearch.serve.serve_state import ServeState

logger = logging.getLogger(__name__)

__all__ = ["CSP", "Dispatch", "request_guard"]

CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"

#: What ``app.middleware("http")`` takes: the request and the rest of the app.
Dispatch = Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]


def request_guard(state: ServeState) -> Dispatch:
    """The HTTP middleware of the app that ``state`` belongs to."""
    settings, metrics, slots = state.settings, state.metrics, state.slots

    async def _guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        path = request.url.path
        limited = path.startswith(LIMITED_PREFIXES)
        refused = refusal(request, settings, state.limiter, state.keys)
        if refused is None and limited:
            refused = await admitted(slots, settings)
        response: Response
        if refused is not None:
            metrics.rejected.labels(refused[1]).inc()
            response = refused[0]
        elif limited:  # holds an in-flight slot until its answer is ready
            metrics.in_flight.inc()
            try:
                response = await call_next(request)
            finally:
                slots.release()
                metrics.in_flight.dec()
        else:
            response = await call_next(request)
        # the page loads nothing from outside; the browser enforces it too
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        route = request.scope.get("route")
        name = getattr(route, "path", None) or ("/static" if path.startswith("/static") else "?")
        metrics.requests.labels(name, request.method, str(response.status_code)).inc()
        metrics.seconds.labels(name).observe(time.perf_counter() - started)
        return response

    return _guard
