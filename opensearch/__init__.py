"""OpenSearch side of mathsearch: settings, client, local stack (mappings and queries follow)."""

from __future__ import annotations

from opensearch.errors import (
    ArtifactError,
    ClusterUnavailableError,
    ConfigurationError,
    MathsearchOpenSearchError,
    StackError,
)
from opensearch.settings import OpenSearchSettings


def __getattr__(name: str) -> object:
    # The client pulls in opensearch-py (about half a second): loaded on first use only, so
    # importing settings or errors (as the indexer does) stays cheap.
    if name == "connect":
        from opensearch.client import connect

        return connect
    raise AttributeError(f"module 'opensearch' has no attribute {name!r}")


__all__ = [
    "ArtifactError",
    "ClusterUnavailableError",
    "ConfigurationError",
    "MathsearchOpenSearchError",
    "OpenSearchSettings",
    "StackError",
    "connect",
]
