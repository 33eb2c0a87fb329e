"""What the routers and the middleware of one ``mathsearch serve`` app share.

:func:`~mathsearch.serve.http_api.create_app` builds one :class:`ServeState` and hands it to
each router factory and to the request guard (no module-level state: several apps in one
process stay apart).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from mathsearch.opensearch.library_search import LibraryIndex
    from mathsearch.opensearch.load_shedding import InflightLimiter
    from mathsearch.opensearch.search_profile import SearchProfile
    from mathsearch.opensearch.searcher import Searcher
    from mathsearch.opensearch.settings import OpenSearchSettings
    from mathsearch.serve.api_keys import ApiKeys
    from mathsearch.serve.rate_limit import RateLimiter
    from mathsearch.serve.serve_metrics import ServeMetrics

logger = logging.getLogger(__name__)

__all__ = ["ServeState"]


@dataclass(frozen=True)
class ServeState:
    """One app's settings, cluster access, admission limits and metrics.

    Attributes:
        settings: the ``MATHSEARCH_*`` settings (limits, served libraries).
        index: the equation alias the app serves.
        profile: the search profile that fills unset ranking fields.
        client: the OpenSearch client.
        searcher: the equation searcher over ``index`` (its encoder is locked).
        keys: the API keys (none: no auth).
        limiter: the per-client rate limiter.
        slots: the in-flight limiter of the API routes.
        metrics: the app's Prometheus metrics.
        libraries: library index name -> its description, filled on first use.
    """

    settings: OpenSearchSettings
    index: str
    profile: SearchProfile
    client: OpenSearch
    searcher: Searcher
    keys: ApiKeys
    limiter: RateLimiter
    slots: InflightLimiter
    metrics: ServeMetrics
    libraries: dict[str, LibraryIndex] = field(default_factory=dict)
