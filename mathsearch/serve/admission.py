"""Admission of ``mathsearch serve`` requests before routing: API key, body size, rate, slot.

:func:`refusal` checks, in this order, the API key (401; :mod:`mathsearch.serve.api_keys`), a
POST's
``Content-Length`` (411 / 413) and the client's rate (429 + ``Retry-After``;
:mod:`mathsearch.serve.rate_limit`); :func:`admitted` then takes an in-flight slot or sheds the
request
(503 + ``Retry-After``; :mod:`mathsearch.opensearch.load_shedding`). Each returns ``None``
(admitted) or the
answer with the reason label counted in ``mathsearch_http_rejected_total``. :func:`error` is the
API's error answer, ``{"error": {"status", "reason", "details"?}}``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from mathsearch.opensearch.load_shedding import RETRY_AFTER_S, InflightLimiter
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.serve.api_keys import ApiKeys
from mathsearch.serve.rate_limit import RateLimiter

logger = logging.getLogger(__name__)

__all__ = ["LIMITED_PREFIXES", "OPEN_PATHS", "admitted", "error", "refusal"]

#: The API routes: rate limited and bounded in flight.
LIMITED_PREFIXES = ("/search", "/render", "/equations")
#: Routes that need no API key when keys are on (no data; the health probe).
OPEN_PATHS = frozenset({"/health", "/", "/openapi.json"})


def error(status: int, reason: str, details: list[dict[str, Any]] | None = None) -> JSONResponse:
    """The API's error answer."""
    body: dict[str, Any] = {"status": status, "reason": reason}
    if details:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status)


def refusal(
    request: Request, settings: OpenSearchSettings, limiter: RateLimiter, keys: ApiKeys
) -> tuple[JSONResponse, str] | None:
    """The answer to a request refused before routing (key, length, size, rate), with its
    reason."""
    path = request.url.path
    client = request.client.host if request.client else "?"
    if keys.enabled and path not in OPEN_PATHS and not path.startswith("/static/"):
        key = keys.identify(request.headers)
        if key is None:
            reason = "an API key is required: Authorization: Bearer KEY or X-API-Key: KEY"
            if "authorization" in request.headers or "x-api-key" in request.headers:
                reason = "unknown API key"
            response = error(401, reason)
            response.headers["WWW-Authenticate"] = 'Bearer realm="mathsearch"'
            return response, "auth"
        client = key  # rate-limit by key: every client of one key shares its bucket
    if request.method == "POST":
        length = request.headers.get("content-length")
        if length is None:
            return error(411, "a POST needs a Content-Length header"), "no-length"
        if not length.isdigit() or int(length) > settings.serve_max_body:
            reason = f"the body is {length} bytes, the limit is {settings.serve_max_body}"
            return error(413, reason), "too-large"
    if path.startswith(LIMITED_PREFIXES):
        wait = limiter.acquire(client)
        if wait > 0:
            response = error(429, f"rate limited: at most {settings.serve_rate:g} requests/s")
            response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
            return response, "rate"
    return None


async def admitted(
    slots: InflightLimiter, settings: OpenSearchSettings
) -> tuple[JSONResponse, str] | None:
    """``None`` once the request holds an in-flight slot, else the 503 that sheds it."""
    if await slots.acquire():
        return None
    response = error(
        503,
        f"busy: {settings.serve_max_inflight} requests in flight and as many waiting "
        f"(waited up to {settings.serve_queue_timeout:g} s); retry later",
    )
    response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response, "busy"
