"""Figure search: query words featurised like indexed figures, for the six hybrid modes.

The figures index (:mod:`mathsearch.opensearch.figure_index`) is searched by the same
:class:`~mathsearch.opensearch.searcher.Searcher` and query builders as the equation index, with
:data:`~mathsearch.opensearch.search_fields.FIGURE_FIELDS` (BM25 over ``caption`` + ``mentions``,
kNN over
``vec_figure_v2``). :class:`FigureQueryEncoder` turns the query words into BM25 terms and, through
the figure encoder's text branch (the query has no image, as a figure without one), into the
figure vector - the figure-embeddings seed's tf-idf first stage re-ranked by interpolation with
the embedding score is ``--mode rescore``.

Example::

    searcher = Searcher(client, figures_alias(settings), encoder=FigureQueryEncoder(),
                        fields=FIGURE_FIELDS)
    response = searcher.search(SearchRequest("lattice gauge coupling", mode=Mode.RESCORE))
"""

from __future__ import annotations

import logging
import re
from typing import Any

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.query_encoder import QueryFeatures
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger(__name__)

__all__ = ["FigureQueryEncoder", "figures_alias"]

_WORD = re.compile(r"\w+", re.UNICODE)


def figures_alias(settings: OpenSearchSettings, name: str | None = None) -> str:
    """The figures index: ``name`` or ``<prefix>-figures``."""
    return name or f"{settings.index_prefix}-figures"


class FigureQueryEncoder:
    """Query words -> BM25 terms + the figure model's vector (loaded on first use).

    Args:
        model: a figure ``.onnx`` path, a ready figure embedder, or None for the shipped
            ``figure-v2`` (``MATHSEARCH_MODEL_FIGURE``).
    """

    def __init__(self, model: Any = None) -> None:
        self._model = model
        self._embedder: Any = None

    def _load(self) -> Any:
        if self._embedder is None:
            if self._model is not None and not isinstance(self._model, str):
                self._embedder = self._model
            else:
                from mathsearch.runtime.embedders import load_embedder

                try:
                    self._embedder = load_embedder(self._model or "figure")
                except ValueError as exc:
                    raise QueryError(f"figure encoder: {exc}") from exc
            if self._embedder.family != "figure":
                raise QueryError(f"{self._embedder.path} is a {self._embedder.family} model")
        return self._embedder

    @property
    def vector_field(self) -> str:
        """The figure model's field (``vec_figure_v2`` for the shipped model; loads it).

        Raises:
            QueryError: the model cannot be loaded or is not a figure model.
        """
        return str(self._load().vector_field)

    def features(self, text: str, encoders: Any = None, *, embed: bool = True) -> QueryFeatures:
        """The words of ``text`` and its figure vector (``refusals`` says why there is none;
        ``embed=False``: the words alone, for ``bm25``)."""
        from mathsearch.runtime.embedder_base import written_vector
        from mathsearch.runtime.embedders import EmbedRefusal

        words = _WORD.findall(text)
        if not words:
            raise QueryError("the figure query has no words")
        if not embed:
            return QueryFeatures(words, None, None, vectors={})
        embedder = self._load()
        result = embedder.embed([{"caption": text, "mentions": [], "image": None}])[0]
        field = embedder.vector_field
        if isinstance(result, EmbedRefusal):
            return QueryFeatures(words, None, field, vectors={}, refusals={field: result.reason})
        vector = written_vector(result)
        return QueryFeatures(words, vector, field, vectors={field: vector}, refusals={})
