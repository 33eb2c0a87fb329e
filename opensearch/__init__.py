"""OpenSearch side of mathsearch: settings, client, mappings, the bulk writer, search.

Modules that need opensearch-py (about half a second to import) are loaded on first use of one
of their names, so importing settings or errors (as the indexer does) stays cheap.
"""

from __future__ import annotations

import importlib

from mathsearch.core.errors import (
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
from mathsearch.opensearch.fusion import Combination, FusedHit, Normalization, fuse, rrf
from mathsearch.opensearch.queries import Filters, Mode
from mathsearch.opensearch.results import DocumentGroup, Hit, ScoreBreakdown, SearchResponse
from mathsearch.opensearch.settings import OpenSearchSettings

_LAZY = {
    "connect": "mathsearch.opensearch.client",
    "BulkWriter": "mathsearch.opensearch.bulk_writer",
    "WriteFailure": "mathsearch.opensearch.bulk_writer",
    "WriteReport": "mathsearch.opensearch.bulk_writer",
    "VectorSpec": "mathsearch.opensearch.schema",
    "ensure_equation_index": "mathsearch.opensearch.equation_index",
    "ensure_failures_index": "mathsearch.opensearch.schema",
    "equations_alias": "mathsearch.opensearch.schema",
    "equation_actions": "mathsearch.opensearch.documents",
    "failure_actions": "mathsearch.opensearch.documents",
    "failure_id": "mathsearch.opensearch.documents",
    "vector_update_actions": "mathsearch.opensearch.documents",
    "DocumentMath": "mathsearch.opensearch.enrichment",
    "ensure_math_mapping": "mathsearch.opensearch.enrichment",
    "enrichment_actions": "mathsearch.opensearch.enrichment",
    "group_by_document": "mathsearch.opensearch.enrichment",
    "add_vector_field": "mathsearch.opensearch.vector_fields",
    "drop_vector_field": "mathsearch.opensearch.vector_fields",
    "set_default_vector_field": "mathsearch.opensearch.vector_fields",
    "vector_fields": "mathsearch.opensearch.vector_fields",
    "ModelQueryEncoder": "mathsearch.opensearch.query_encoder",
    "QueryEncoder": "mathsearch.opensearch.query_encoder",
    "QueryFeatures": "mathsearch.opensearch.query_encoder",
    "SearchRequest": "mathsearch.opensearch.search_request",
    "TokenStats": "mathsearch.opensearch.token_stats",
    "Searcher": "mathsearch.opensearch.searcher",
    "SearchProfile": "mathsearch.opensearch.search_profile",
    "rescore_window": "mathsearch.opensearch.window_rescore",
    "rank_window": "mathsearch.opensearch.window_rescore",
    "WindowScore": "mathsearch.opensearch.window_rescore",
    "SearchFields": "mathsearch.opensearch.search_fields",
    "EQUATION_FIELDS": "mathsearch.opensearch.search_fields",
    "FIGURE_FIELDS": "mathsearch.opensearch.search_fields",
    "VectorQuery": "mathsearch.opensearch.queries",
    "MAX_HYBRID_SUBQUERIES": "mathsearch.opensearch.queries",
    "VectorPlan": "mathsearch.opensearch.vector_plan",
    "FieldScore": "mathsearch.opensearch.results",
    "encoder_field": "mathsearch.opensearch.query_encoder",
    "FigureQueryEncoder": "mathsearch.opensearch.figure_search",
    "figures_alias": "mathsearch.opensearch.figure_search",
    "FigureIndexReport": "mathsearch.opensearch.figure_index",
    "ensure_figure_index": "mathsearch.opensearch.figure_index",
    "figure_actions": "mathsearch.opensearch.figure_index",
    "index_figures": "mathsearch.opensearch.figure_index",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mathsearch.opensearch' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "EQUATION_FIELDS",
    "FIGURE_FIELDS",
    "MAX_HYBRID_SUBQUERIES",
    "ArtifactError",
    "BulkWriter",
    "ClusterUnavailableError",
    "Combination",
    "ConfigurationError",
    "DocumentGroup",
    "DocumentMath",
    "EvaluationError",
    "FieldScore",
    "FigureIndexReport",
    "FigureQueryEncoder",
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
    "ScoreBreakdown",
    "SearchFields",
    "SearchProfile",
    "SearchRequest",
    "SearchResponse",
    "Searcher",
    "StackError",
    "TokenStats",
    "TrecFileError",
    "VectorPlan",
    "VectorQuery",
    "VectorSpec",
    "WriteError",
    "WriteFailure",
    "WriteReport",
    "add_vector_field",
    "connect",
    "drop_vector_field",
    "encoder_field",
    "enrichment_actions",
    "ensure_equation_index",
    "ensure_failures_index",
    "ensure_figure_index",
    "ensure_math_mapping",
    "equation_actions",
    "equations_alias",
    "failure_actions",
    "failure_id",
    "figure_actions",
    "figures_alias",
    "fuse",
    "group_by_document",
    "index_figures",
    "rrf",
    "set_default_vector_field",
    "vector_fields",
    "vector_update_actions",
]
