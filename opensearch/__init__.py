"""OpenSearch side of mathsearch: settings, client, local stack (mappings and queries follow)."""

from __future__ import annotations

from opensearch.client import connect
from opensearch.errors import (
    ArtifactError,
    ClusterUnavailableError,
    ConfigurationError,
    MathsearchOpenSearchError,
    StackError,
)
from opensearch.settings import OpenSearchSettings

__all__ = [
    "ArtifactError",
    "ClusterUnavailableError",
    "ConfigurationError",
    "MathsearchOpenSearchError",
    "OpenSearchSettings",
    "StackError",
    "connect",
]
