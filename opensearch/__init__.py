"""OpenSearch side of mathsearch: settings, client, mappings, the bulk writer, search.

Modules that need opensearch-py (about half a second to import) are loaded on first use of one
of their names, so importing settings or errors (as the indexer does) stays cheap.
"""

from __future__ import annotations

import importlib

from opensearch.errors import (
    ArtifactError,
    ClusterUnavailableError,
    ConfigurationError,
    EvaluationError,
    MappingError,
    MathsearchOpenSearchError,
    QueryError,
    StackError,
    TrecFileError,
    WriteError,
)
from opensearch.fusion import Combination, FusedHit, Normalization, fuse, rrf
from opensearch.queries import Filters, Mode
from opensearch.results import DocumentGroup, Hit, ScoreBreakdown, SearchResponse
from opensearch.settings import OpenSearchSettings

_LAZY = {
    "connect": "opensearch.client",
    "BulkWriter": "opensearch.bulk_writer",
    "WriteFailure": "opensearch.bulk_writer",
    "WriteReport": "opensearch.bulk_writer",
    "VectorSpec": "opensearch.schema",
    "ensure_equation_index": "opensearch.schema",
    "ensure_failures_index": "opensearch.schema",
    "equations_alias": "opensearch.schema",
    "equation_actions": "opensearch.documents",
    "failure_actions": "opensearch.documents",
    "failure_id": "opensearch.documents",
    "vector_update_actions": "opensearch.documents",
    "DocumentMath": "opensearch.enrichment",
    "ensure_math_mapping": "opensearch.enrichment",
    "enrichment_actions": "opensearch.enrichment",
    "group_by_document": "opensearch.enrichment",
    "add_vector_field": "opensearch.vector_fields",
    "drop_vector_field": "opensearch.vector_fields",
    "set_default_vector_field": "opensearch.vector_fields",
    "vector_fields": "opensearch.vector_fields",
    "ModelQueryEncoder": "opensearch.query_encoder",
    "QueryEncoder": "opensearch.query_encoder",
    "QueryFeatures": "opensearch.query_encoder",
    "SearchRequest": "opensearch.search_request",
    "TokenStats": "opensearch.token_stats",
    "Searcher": "opensearch.searcher",
    "SearchProfile": "opensearch.search_profile",
    "Topic": "opensearch.trec_files",
    "read_topics": "opensearch.trec_files",
    "write_topics": "opensearch.trec_files",
    "read_qrels": "opensearch.trec_files",
    "write_qrels": "opensearch.trec_files",
    "read_run": "opensearch.trec_files",
    "write_run": "opensearch.trec_files",
    "search_topics": "opensearch.topic_runs",
    "Evaluation": "opensearch.ir_metrics",
    "evaluate": "opensearch.ir_metrics",
    "parse_grid": "opensearch.tuning_grid",
    "expand": "opensearch.tuning_grid",
    "RateLimiter": "opensearch.rate_limit",
    "create_app": "opensearch.http_api",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opensearch' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ArtifactError",
    "BulkWriter",
    "ClusterUnavailableError",
    "Combination",
    "ConfigurationError",
    "DocumentGroup",
    "DocumentMath",
    "Evaluation",
    "EvaluationError",
    "Filters",
    "FusedHit",
    "Hit",
    "MappingError",
    "MathsearchOpenSearchError",
    "Mode",
    "ModelQueryEncoder",
    "Normalization",
    "OpenSearchSettings",
    "QueryEncoder",
    "QueryError",
    "QueryFeatures",
    "RateLimiter",
    "ScoreBreakdown",
    "SearchProfile",
    "SearchRequest",
    "SearchResponse",
    "Searcher",
    "StackError",
    "TokenStats",
    "Topic",
    "TrecFileError",
    "VectorSpec",
    "WriteError",
    "WriteFailure",
    "WriteReport",
    "add_vector_field",
    "connect",
    "create_app",
    "drop_vector_field",
    "enrichment_actions",
    "ensure_equation_index",
    "ensure_failures_index",
    "ensure_math_mapping",
    "equation_actions",
    "equations_alias",
    "evaluate",
    "expand",
    "failure_actions",
    "failure_id",
    "fuse",
    "group_by_document",
    "parse_grid",
    "read_qrels",
    "read_run",
    "read_topics",
    "rrf",
    "search_topics",
    "set_default_vector_field",
    "vector_fields",
    "vector_update_actions",
    "write_qrels",
    "write_run",
    "write_topics",
]
