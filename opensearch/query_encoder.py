"""Query featurisation for search: the same math tokens and model vector as indexing.

:class:`ModelQueryEncoder` runs :class:`indexer.parse.Featuriser` and the ONNX
:class:`export.runtime.Encoder` (rule 2 of DESIGN.md: one featurisation); anything with a
``features(latex) -> QueryFeatures`` method can stand in (e.g. a cache in benchmarks).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from opensearch.errors import QueryError


class QueryFeatures(NamedTuple):
    """A query featurised: its math tokens, its vector and the field that vector belongs to."""

    tokens: list[str]
    vector: list[float] | None
    vector_field: str | None


class QueryEncoder(Protocol):
    """Turns query LaTeX into :class:`QueryFeatures` (raises :class:`QueryError` if it can't)."""

    def features(self, latex: str) -> QueryFeatures: ...


class ModelQueryEncoder:
    """Featuriser + ONNX encoder, created on first use.

    ``model`` is an ONNX path (default ``MATHSEARCH_MODEL``) or a ready
    :class:`export.runtime.Encoder`.
    """

    def __init__(self, model: Any = None) -> None:
        self._model = model
        self._featuriser: Any = None
        self._encoder: Any = None

    def features(self, latex: str) -> QueryFeatures:
        from export.runtime import Encoder
        from indexer.parse import Featuriser
        from indexer.records import Failure

        if self._featuriser is None:
            self._featuriser = Featuriser()
            if isinstance(self._model, Encoder):
                self._encoder = self._model
            else:
                self._encoder = Encoder(self._model) if self._model else Encoder()
        parsed = self._featuriser.parse_latex(latex)
        if isinstance(parsed, Failure):
            raise QueryError(f"cannot read the query ({parsed.reason}): {parsed.detail}")
        vector = self._encoder.encode([parsed.graph])[0]
        return QueryFeatures(
            tokens=list(parsed.math_tokens),
            vector=[float(x) for x in vector],
            vector_field=self._encoder.card.vector_field,
        )
