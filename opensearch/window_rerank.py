"""A second stage at query time: the first stage's top window re-ranked with heavier encoders.

The index holds the vectors of a cheap encoder (the default graph CNN: its CPU embedding rate
sets the indexing speed). A request naming ``rerank`` encoders takes the top ``rerank_window``
hits of its first stage (any hybrid mode), embeds those candidates and the query with the
``rerank`` encoders in this process - encoders whose vectors the index need not hold, such as the
seed-size towers that embed at 0.07-0.15x the default's CPU rate - and ranks the window by the
window-normalised interpolation of the ``rescore`` mode (the figure-embeddings seed's tf-idf +
embedding scheme, :mod:`mathsearch.opensearch.window_rescore`)::

    score(d) = (1 - a) * N(bm25)(d) + a / n * sum_e N((1 + cos(q_e, v_e(d))) / 2)  + offset
    N        = min_max over the window W; a = rerank_alpha; e = each of the n rerank encoders
    offset   = the largest first-stage score after the window (0 if none is positive), so the
               window stays above the hits past it (they keep their order and scores)

BM25 is the exact score of each candidate (one filtered search,
:meth:`~mathsearch.opensearch.searcher.Searcher.bm25_scores`), not the first stage's fused
score. A candidate an encoder cannot embed (no LaTeX stored, or the encoder refuses it) gets no
term for that encoder, as in ``rescore``. The cost moves from every indexed equation to
``rerank_window`` candidates per query; :class:`RerankVectors` keeps each (encoder, equation)
vector in an LRU cache (``MATHSEARCH_RERANK_CACHE`` entries, default 50,000), so an equation
that comes back in later windows is embedded once per process.

The shipped default profile re-ranks the fusion's top 50 with gcn-v8 + gcn-v9 + gcn-v10 at
alpha 0.4, chosen on the tuning halves of the validation papers and of the equivalence task
(docs/tuning.md, "A second stage").

Example::

    request = SearchRequest(r"\\frac{1}{2} m^2 \\phi^2", mode=Mode.FUSION,
                            rerank=("export/models/gcn-v8.onnx",), rerank_window=50)
    hits = searcher.search(request).hits      # the window re-ranked by gcn-v8 and BM25
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import Normalization
from mathsearch.opensearch.window_rescore import WindowScore, cosine01, rank_window, rescore_window

if TYPE_CHECKING:
    from mathsearch.opensearch.results import Hit
    from mathsearch.opensearch.search_request import SearchRequest

logger = logging.getLogger(__name__)

__all__ = [
    "CACHE_ENV",
    "RerankVectors",
    "rerank_hits",
    "rerank_order",
    "rerank_weights",
    "shipped_or_path",
]

#: Environment variable (``OpenSearchSettings.rerank_cache``): how many (encoder, equation)
#: vectors :class:`RerankVectors` keeps by default.
CACHE_ENV = "MATHSEARCH_RERANK_CACHE"

Vector = np.ndarray


def shipped_or_path(name: str) -> str:
    """A family as it is; an ``.onnx`` path as given when it exists, else the shipped model of
    that file name (``gcn-v8.onnx`` in ``mathsearch/export/models``), so that a profile can
    name shipped models whatever the working directory.

    >>> shipped_or_path("gcn"), Path(shipped_or_path("gcn-v8.onnx")).parent.name
    ('gcn', 'models')
    """
    if not name.endswith(".onnx") or Path(name).is_file():
        return name
    from mathsearch.export.embedders import MODELS_DIR

    shipped = MODELS_DIR / Path(name).name
    return str(shipped) if shipped.is_file() else name


def rerank_weights(alpha: float, encoders: int) -> list[float]:
    """``[1 - alpha, alpha / n, ...]``: BM25's share, then each of the ``n`` encoders' (the
    split of :func:`mathsearch.opensearch.explain.split_alpha`, as the fusion's fields).

    >>> rerank_weights(0.6, 3)
    [0.4, 0.2, 0.2, 0.2]
    """
    if encoders < 1:
        raise QueryError("rerank needs at least one encoder")
    from mathsearch.opensearch.explain import split_alpha

    return [round(w, 12) for w in split_alpha(alpha, encoders)]


def rerank_order(
    bm25: Sequence[float],
    columns: Sequence[Sequence[float | None]],
    alpha: float,
) -> tuple[list[int], list[WindowScore]]:
    """The window's positions best first, and every position's :class:`WindowScore`.

    Args:
        bm25: each candidate's BM25 score, in first-stage order.
        columns: per rerank encoder, each candidate's ``(1 + cos) / 2`` (None: no vector).
        alpha: the encoders' share (split evenly over them).

    Ties keep the first stage's order.

    >>> order, scores = rerank_order([3.0, 2.0, 1.0], [[0.5, 0.9, 0.7]], 0.6)
    >>> order, [round(s.score, 3) for s in scores]
    ([1, 0, 2], [0.401, 0.8, 0.3])
    """
    weights = rerank_weights(alpha, len(columns))
    scores = rescore_window(bm25, columns, weights, Normalization.MIN_MAX)
    return rank_window(scores), scores


class RerankVectors:
    """The rerank encoders' vectors of LaTeX strings: each encoder loaded once, each
    (encoder, LaTeX) pair embedded once while it stays among the ``capacity`` most recent."""

    def __init__(self, capacity: int | None = None) -> None:
        if capacity is None:
            from mathsearch.opensearch.settings import OpenSearchSettings

            capacity = OpenSearchSettings.from_env().rerank_cache
        if capacity < 0:
            raise QueryError(f"{CACHE_ENV} must be >= 0, not {capacity}")
        self.capacity = capacity
        self._cache: OrderedDict[tuple[str, str], Vector | None] = OrderedDict()
        self._embedders: dict[str, Any] = {}
        self._featurisers: dict[bool, Any] = {}
        #: how many equations were embedded (cache misses), for benchmarks and tests
        self.embedded = 0
        # one caller at a time (serve's request threads share a searcher): the cache and the
        # featuriser are not thread-safe, and the sessions use every core anyway
        self._lock = threading.Lock()

    def embedder(self, name: str) -> Any:
        """The embedder of a family or an ``.onnx`` path (loaded on first use).

        Raises:
            QueryError: no such model or card, or one that does not fit this featurisation.
        """
        if name not in self._embedders:
            from mathsearch.export.embedders import as_embedder
            from mathsearch.export.errors import ExportError

            try:
                self._embedders[name] = as_embedder(shipped_or_path(name))
            except (ValueError, ExportError) as exc:
                raise QueryError(f"rerank encoder {name!r}: {exc}") from exc
            logger.info("rerank encoder %s ready", self._embedders[name].vector_field)
        return self._embedders[name]

    def vectors(
        self, encoders: Sequence[str], equations: Sequence[tuple[str, str]]
    ) -> list[list[Vector | None]]:
        """Per encoder, each equation's vector (None: it could not be embedded).

        ``equations`` are ``(latex, mathml)`` pairs (the MathML is used when there is no LaTeX);
        a pair with neither gets None.
        """
        with self._lock:
            return self._vectors(encoders, equations)

    def _vectors(
        self, encoders: Sequence[str], equations: Sequence[tuple[str, str]]
    ) -> list[list[Vector | None]]:
        from mathsearch.export.families import needs_prefix

        embedders = {name: self.embedder(name) for name in encoders}
        flavours = {name: needs_prefix([e.family]) for name, e in embedders.items()}
        texts = [latex or mathml for latex, mathml in equations]
        source = dict(zip(texts, equations, strict=True))
        todo = {
            name: [t for t in dict.fromkeys(texts) if t and (name, t) not in self._cache]
            for name in encoders
        }
        parsed = self._parse(flavours, todo, source)  # once per equation, for every encoder
        fresh: dict[tuple[str, str], Vector | None] = {}
        for name, embedder in embedders.items():
            fresh.update(self._embed(name, embedder, todo[name], parsed, flavours[name]))
        out = []
        for name in encoders:
            column: list[Vector | None] = []
            for text in texts:
                key = (name, text)
                if key in fresh:
                    column.append(fresh[key])
                elif key in self._cache:
                    self._cache.move_to_end(key)
                    column.append(self._cache[key])
                else:
                    column.append(None)  # neither LaTeX nor MathML
            out.append(column)
        if self.capacity:
            self._cache.update(fresh)
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return out

    def _parse(
        self,
        flavours: dict[str, bool],
        todo: dict[str, list[str]],
        source: dict[str, tuple[str, str]],
    ) -> dict[tuple[bool, str], Any]:
        """``(with_prefix, text) -> ParsedEquation | Failure`` of every equation some encoder
        still needs: one featurisation per equation and prefix flavour (rule 2 of DESIGN.md)."""
        from mathsearch.indexer.parse import Featuriser
        from mathsearch.indexer.records import EquationRecord

        wanted: dict[bool, dict[str, None]] = {}
        for name, flavour in flavours.items():
            wanted.setdefault(flavour, {}).update(dict.fromkeys(todo[name]))
        out: dict[tuple[bool, str], Any] = {}
        for flavour, needed in wanted.items():
            if not needed:
                continue
            if flavour not in self._featurisers:
                self._featurisers[flavour] = Featuriser(with_prefix=flavour)
            texts = list(needed)
            records = [
                EquationRecord(
                    eq_id=f"rerank-{n}", doc_id="", position=n, latex=source[t][0] or None,
                    mathml=source[t][1] or None,
                )
                for n, t in enumerate(texts)
            ]  # fmt: skip
            results = self._featurisers[flavour].parse_batch(records)
            out.update({(flavour, t): r for t, r in zip(texts, results, strict=True)})
        return out

    def _embed(
        self,
        name: str,
        embedder: Any,
        texts: list[str],
        parsed: dict[tuple[bool, str], Any],
        flavour: bool,
    ) -> dict[tuple[str, str], Vector | None]:
        """``name``'s vectors of ``texts`` (None: unreadable, or refused by the encoder)."""
        if not texts:
            return {}
        from mathsearch.export.embedder_base import EmbedRefusal, embed_safely
        from mathsearch.indexer.records import Failure

        good = [(t, parsed[(flavour, t)]) for t in texts]
        good = [(t, p) for t, p in good if not isinstance(p, Failure)]
        results = embed_safely(embedder, [p.embed_item() for _, p in good]) if good else []
        fresh: dict[tuple[str, str], Vector | None] = {(name, t): None for t in texts}
        for (text, _), result in zip(good, results, strict=True):
            if not isinstance(result, EmbedRefusal):
                fresh[(name, text)] = np.asarray(result, dtype=np.float32)
        self.embedded += len(texts)
        return fresh


def rerank_hits(
    ctx: Any,
    request: SearchRequest,
    tokens: list[str],
    hits: list[Hit],
    vectors: RerankVectors,
) -> list[Hit]:
    """``hits`` (the first stage, best first) with the top ``request.rerank_window`` re-ranked
    (see the module docstring); the rest follow unchanged.

    ``ctx`` is the searcher (:meth:`bm25_scores`, :meth:`sources_of`, ``fields``).

    Raises:
        QueryError: a rerank encoder that cannot be loaded, or one that refuses the query.
    """
    size = min(request.rerank_window, len(hits))
    if size < 1:
        return hits
    window, rest = hits[:size], hits[size:]
    ids = [hit.eq_id for hit in window]
    bm25 = ctx.bm25_scores(ids, tokens, request.text)
    display = ctx.fields.display
    missing = [hit.eq_id for hit in window if not (hit.latex or hit.mathml)]
    stored = ctx.sources_of(missing, (display, "mathml")) if missing else {}
    equations = []
    for hit in window:
        found = stored.get(hit.eq_id, {})
        latex = hit.latex or str(found.get(display) or "")
        mathml = hit.mathml or str(found.get("mathml") or "")
        equations.append((latex, mathml))
    encoders = list(request.rerank)
    query = vectors.vectors(encoders, [(request.latex, "")])
    refused = [name for name, (vector,) in zip(encoders, query, strict=True) if vector is None]
    if refused:
        raise QueryError(f"rerank encoder {refused[0]!r} cannot embed the query")
    candidates = vectors.vectors(encoders, equations)
    columns = [
        [cosine01(q, v) if v is not None else None for v in column]
        for (q,), column in zip(query, candidates, strict=True)
    ]
    order, scores = rerank_order([bm25.get(i, 0.0) for i in ids], columns, request.rerank_alpha)
    offset = max([0.0, *(hit.score for hit in rest)])
    out = []
    for rank, i in enumerate(order, start=1):
        hit = replace(window[i], rank=rank, score=scores[i].score + offset)
        if request.explain:
            hit.explanation = _breakdown(request, bm25.get(ids[i], 0.0), scores[i], columns, i)
        out.append(hit)
    for rank, hit in enumerate(rest, start=size + 1):
        out.append(replace(hit, rank=rank))
    return out


def _breakdown(
    request: SearchRequest,
    bm25: float,
    scored: WindowScore,
    columns: Sequence[Sequence[float | None]],
    i: int,
) -> Any:
    from mathsearch.opensearch.modes.rescore import window_breakdown

    breakdown = window_breakdown(
        bm25,
        scored,
        [column[i] for column in columns],
        fields=list(request.rerank),
        weights=rerank_weights(request.rerank_alpha, len(request.rerank)),
        normalization=Normalization.MIN_MAX.value,
    )
    return replace(
        breakdown,
        formula=f"rerank of the {request.mode.value} top {request.rerank_window}: "
        f"{breakdown.formula}",
    )
