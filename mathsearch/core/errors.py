"""Typed exceptions of the OpenSearch side (index, search, stack, evaluation), shared by every
layer above the core, and :func:`transport_reason` for a request the cluster refused."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # opensearch-py takes ~0.5 s to import: errors stay cheap
    from opensearchpy.exceptions import TransportError


class MathsearchOpenSearchError(Exception):
    """Base class of every error raised by the opensearch package."""


class ConfigurationError(MathsearchOpenSearchError):
    """A ``MATHSEARCH_*`` setting is missing or malformed."""


class ArtifactError(MathsearchOpenSearchError):
    """A Maven Central artifact could not be fetched or failed its checksum."""


class StackError(MathsearchOpenSearchError):
    """The local OpenSearch / Redis stack could not be provisioned, started or stopped."""


class ClusterUnavailableError(MathsearchOpenSearchError):
    """The cluster at ``MATHSEARCH_OPENSEARCH_URL`` does not answer."""


class QueryError(MathsearchOpenSearchError):
    """A search request that cannot be built or that the cluster refused (bad mode, weights...)."""


class UnknownEquationError(QueryError):
    """An equation id the index does not hold (a "more like this" search of an unknown id)."""


class MappingError(MathsearchOpenSearchError):
    """An index, alias or field is missing or has a mapping mathsearch cannot use."""


class WriteError(MathsearchOpenSearchError):
    """A bulk write could not be completed (the per-item failures are data, not this)."""


class EvaluationError(MathsearchOpenSearchError):
    """Evaluation input that cannot be used (a malformed file, an unknown measure, no judgments)."""


class TrecFileError(EvaluationError):
    """A topics, qrels or run file that cannot be read (with the file and line)."""


def transport_reason(exc: TransportError) -> str:
    """One line from a refused request: ``STATUS type: reason`` of the root cause.

    >>> from opensearchpy.exceptions import TransportError
    >>> transport_reason(TransportError(404, "index_not_found_exception", {"error": {
    ...     "root_cause": [{"type": "index_not_found_exception", "reason": "no such index [x]"}]}}))
    '404 index_not_found_exception: no such index [x]'
    """
    info = exc.info if isinstance(exc.info, dict) else {}
    error = info.get("error")
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        return f"{exc.status_code} {root.get('type', '')}: {root.get('reason', '')}"
    return f"{exc.status_code} {exc.error}"
