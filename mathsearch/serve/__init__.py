"""Serving: the HTTP API and search page of ``mathsearch serve`` (FastAPI), admission (API keys,
body size, rate limits).

Room above the pipeline (see docs/architecture.md); names load on first use.
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports

_LAZY = {
    "RateLimiter": "mathsearch.serve.rate_limit",
    "app_from_env": "mathsearch.serve.http_api",
    "create_app": "mathsearch.serve.http_api",
}

__all__ = ["RateLimiter", "app_from_env", "create_app"]

__getattr__ = lazy_exports(__name__, _LAZY)
