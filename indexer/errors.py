"""Typed exceptions of the indexer; each carries a stable reason code for failure records."""

from __future__ import annotations


class IndexerError(Exception):
    """Base class. ``reason`` is the short code a :class:`~mathsearch.indexer.records.Failure`
    records."""

    reason = "error"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class ExtractionError(IndexerError):
    """A source document (or one of its parts) could not be read."""

    reason = "unreadable-source"


class UnknownFormat(IndexerError):  # noqa: N818 - reads better at the call site
    """A source format that is not registered (``--format``), or a source whose format cannot
    be told from its name (:mod:`mathsearch.indexer.formats`)."""

    reason = "unknown-format"


class ConversionError(IndexerError):
    """LaTeX could not be converted to MathML (unknown macro, unbalanced braces, ...)."""

    reason = "conversion-error"


class MathMLError(IndexerError):
    """MathML could not be parsed or turned into a graph."""

    reason = "invalid-mathml"


class LimitExceeded(IndexerError):  # noqa: N818 - reads as a verdict
    """An input exceeded a size, depth or time limit (see :class:`IndexerSettings`)."""

    reason = "too-large"


class VocabularyError(IndexerError):
    """A vocabulary file is missing, malformed, or does not match its content hash."""

    reason = "vocabulary"
