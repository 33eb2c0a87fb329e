"""The Prometheus metrics of one ``mathsearch serve`` app (``GET /metrics``).

Each app has its own :class:`~prometheus_client.CollectorRegistry`, so several apps in one
process (tests, benchmarks) count apart.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

logger = logging.getLogger(__name__)

__all__ = ["ServeMetrics"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServeMetrics:
    """The server's own registry (several apps in one process stay apart)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "mathsearch_http_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "mathsearch_http_request_seconds",
            "Seconds per request by route",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.rejected = Counter(
            "mathsearch_http_rejected",
            "Requests refused before routing, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "mathsearch_http_in_flight",
            "API requests running now (at most MATHSEARCH_SERVE_MAX_INFLIGHT)",
            registry=self.registry,
        )
        self.searches = Histogram(
            "mathsearch_search_seconds",
            "Seconds per search by mode (featurisation + cluster)",
            ["mode"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
