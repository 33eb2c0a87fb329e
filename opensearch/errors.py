"""Typed exceptions of the opensearch package."""

from __future__ import annotations


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


class MappingError(MathsearchOpenSearchError):
    """An index, alias or field is missing or has a mapping mathsearch cannot use."""


class WriteError(MathsearchOpenSearchError):
    """A bulk write could not be completed (the per-item failures are data, not this)."""


class EvaluationError(MathsearchOpenSearchError):
    """Evaluation input that cannot be used (a malformed file, an unknown measure, no judgments)."""


class TrecFileError(EvaluationError):
    """A topics, qrels or run file that cannot be read (with the file and line)."""
