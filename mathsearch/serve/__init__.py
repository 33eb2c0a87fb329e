"""Serving: the HTTP API and search page of ``mathsearch serve`` (FastAPI), admission (API keys,
body size, rate limits).

Room above the pipeline (see docs/architecture.md); names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "RateLimiter": "mathsearch.serve.rate_limit",
    "create_app": "mathsearch.serve.http_api",
}

__all__ = ["RateLimiter", "create_app"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
