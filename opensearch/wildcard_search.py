"""Wildcard searches: a LaTeX query with query variables (``\\qvar{x}`` or ``?x``) finds the
equations whose structure matches the pattern, with each variable bound to a sub-expression.

Two stages, as the searcher's other second stages:

1. **Recall.** The request's ``wildcard_mode`` (default ``bm25``; ``same``: the request's own
   mode) ranks the ``window`` (default 100) best candidates, ids alone, with BM25 over the
   pattern's structure tokens only (:attr:`~mathsearch.indexer.query_variables.Pattern.
   structure_tokens`: the tokens that do not involve a variable) and, for a mode with vectors,
   the pattern made neutral (:attr:`~mathsearch.indexer.query_variables.Pattern.neutral_latex`:
   every variable a plain identifier) on the vector side. BM25 alone is the default because it
   measured the best recall on held-out papers (docs/research/2026-12-07-wildcards-record.md).
2. **The structural check.** One fetch brings the window's LaTeX and ``symbols``. A candidate
   whose symbols lack one of the pattern's identifiers (:func:`~mathsearch.indexer.unify.
   required_symbols`) cannot match the whole pattern and is not converted unless a partial
   match is looked for in it; the others are converted by the same featurisation and unified
   with the pattern (:func:`mathsearch.indexer.unify.match`): a variable binds one
   sub-expression, a repeated name equal ones. The window is ranked by the match: the whole
   equation (``exact``, score 1) before a sub-expression of it (``contained``, (0.5, 1), tighter
   first) before a part of the pattern only (``partial``, < 0.5, looked for among the first
   stage's best :data:`PARTIAL_WINDOW` candidates, or ``offset + k`` if more) before the rest
   (``none``); ties keep the first stage's order. Only the hits returned are then fetched whole
   and annotated; each reports its ``match`` and ``bindings`` (``{"x": "\\alpha_1"}``).

The converted trees are kept in a bounded cache (keyed by the equation's id and LaTeX).

Example::

    response = wildcard_search(searcher, SearchRequest(r"?f(?x)^2 + ?g(?x)^2"))
    [(hit.match, hit.bindings) for hit in response.hits[:3]]
"""

from __future__ import annotations

import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mathsearch.core.errors import QueryError
from mathsearch.indexer.converters import Converted
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.query_variables import Pattern, QueryVariableError, parse_pattern
from mathsearch.indexer.unify import Match, match, required_symbols
from mathsearch.opensearch.results import Hit, SearchResponse, group_hits

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.searcher import Searcher

logger = logging.getLogger(__name__)

__all__ = [
    "PARTIAL_WINDOW",
    "TreeCache",
    "pattern_featuriser",
    "rank_window",
    "wildcard_pattern",
    "wildcard_search",
]

#: Match kinds, best first (a hit's ``match``).
KINDS = ("exact", "contained", "partial", "none")
#: Partial matches are looked for among the first stage's best this many candidates (or
#: ``offset + k`` if more): a pattern rarely matches whole more than once in a window, and
#: looking for parts in all 100 was most of the check's time (docs/research, 2026-12-07).
PARTIAL_WINDOW = 10


class TreeCache:
    """Converted trees of candidates, bounded (least recently used out first)."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._trees: OrderedDict[tuple[str, str], MathNode | None] = OrderedDict()

    def trees(self, featuriser: Any, items: Sequence[tuple[str, str]]) -> list[MathNode | None]:
        """The tree of each ``(eq_id, latex)``: cached, else converted in one batch (None where
        the LaTeX does not convert)."""
        missing = [key for key in dict.fromkeys(items) if key not in self._trees]
        if missing:
            converted = featuriser.converter.convert_batch([latex for _, latex in missing])
            for key, result in zip(missing, converted, strict=True):
                self._trees[key] = result.tree if isinstance(result, Converted) else None
        found = []
        for key in items:
            self._trees.move_to_end(key)
            found.append(self._trees[key])
        while len(self._trees) > self.size:
            self._trees.popitem(last=False)
        return found


@functools.cache
def pattern_featuriser() -> Featuriser:
    """The process's featuriser of wildcard patterns and their candidates (made on first use,
    then shared: the searchers' and ``math_query``'s)."""
    return Featuriser()


def wildcard_pattern(latex: str, featuriser: Any) -> Pattern:
    """The pattern of a query with variables, or a :class:`QueryError` saying what is wrong
    (a query of variables alone, a malformed variable, LaTeX that does not convert)."""
    try:
        return parse_pattern(latex, featuriser)
    except QueryVariableError as exc:
        raise QueryError(f"wildcard query: {exc}") from exc
    except IndexerError as exc:  # LaTeX the featurisation cannot read
        raise QueryError(f"wildcard query: cannot read the pattern: {exc}") from exc


def rank_window(
    pattern: Pattern,
    trees: Sequence[MathNode | None],
    *,
    whole: Sequence[bool] | None = None,
    partial_window: int | None = None,
) -> list[tuple[int, Match]]:
    """``(candidate index, match)`` of every candidate, best match first, ties in the first
    stage's order (a pure function: golden-tested).

    ``trees[i]`` None: candidate ``i`` was not converted (or does not convert): ``none``.
    ``whole[i]`` False: candidate ``i`` cannot match the whole pattern (its symbols lack one
    of :func:`~mathsearch.indexer.unify.required_symbols`), so only a partial match is looked
    for. ``partial_window``: partial matches are looked for in the first ``partial_window``
    candidates only (None: all).
    """
    none = Match(kind="none", score=0.0, bindings={})
    matches = []
    for i, tree in enumerate(trees):
        look_whole = whole is None or whole[i]
        look_partial = partial_window is None or i < partial_window
        if tree is None or not (look_whole or look_partial):
            matches.append(none)
        else:
            matches.append(match(pattern.tree, tree, whole=look_whole, partial=look_partial))
    order = sorted(range(len(trees)), key=lambda i: (-matches[i].score, i))
    return [(i, matches[i]) for i in order]


def wildcard_search(searcher: Searcher, request: SearchRequest) -> SearchResponse:
    """Run a wildcard ``request`` (module docstring) through ``searcher``.

    Raises:
        QueryError: see :func:`wildcard_pattern`, and every error of a search.
    """
    started = time.perf_counter()
    featuriser = searcher.pattern_featuriser()
    pattern = wildcard_pattern(request.latex, featuriser)
    last = request.offset + request.k
    window = max(request.window, last)
    first_request = replace(
        request,
        latex=pattern.neutral_latex,
        mode=request.wildcard_first_mode,
        k=window,
        offset=0,
        group=False,
        mathml=False,
        rerank=(),
        window=window,
        depth=max(request.depth, window),
        fetch_sources=False,  # ids alone: the check fetches what it reads
    )
    first = searcher.search(first_request, tokens=list(pattern.structure_tokens))
    fetched = time.perf_counter()
    ids = [hit.eq_id for hit in first.hits]  # the index's _id (no stored field was read)
    stored = searcher.doc_values_of(ids, ("doc_id", "symbols"))
    checked = time.perf_counter()
    fields = tuple(dict.fromkeys((*searcher.source_fields(request), searcher.fields.display)))
    ranked, sources = _check_window(
        searcher, featuriser, pattern, ids, stored, last=last, fields=fields
    )
    ranked_hits = []
    for rank, (index, found) in enumerate(ranked, start=1):
        light = first.hits[index]
        paper = stored.get(light.eq_id, {}).get("doc_id") or [light.doc_id]
        hit = replace(light, rank=rank, score=round(found.score, 6), doc_id=str(paper[0]))
        hit.match = found.kind
        hit.bindings = found.bindings_latex()
        ranked_hits.append(hit)
    annotating = time.perf_counter()
    groups = group_hits(ranked_hits, last)[request.offset :] if request.group else None
    shown = (
        [hit for group in groups for hit in group.hits]
        if groups is not None
        else ranked_hits[request.offset : last]
    )
    full = _annotated(searcher, request, shown, first.query_tokens, sources)
    annotated = [full[id(hit)] for hit in shown]
    for group in groups or ():
        group.hits = [full[id(hit)] for hit in group.hits]
    if request.mathml:
        searcher.renderer.fill(annotated)
    hits = annotated if groups is None else []
    done = time.perf_counter()
    stages = {
        **first.stages_ms,
        "window": (checked - fetched) * 1000,
        "structural": (annotating - checked) * 1000,
        "annotate": (done - annotating) * 1000,
    }
    counts = {kind: sum(1 for _, m in ranked if m.kind == kind) for kind in KINDS}
    return replace(
        first,
        k=request.k,
        took_ms=(done - started) * 1000,
        hits=hits,
        groups=groups,
        parameters={
            **request.parameters(),
            "wildcard": {
                "variables": list(pattern.variables),
                "first_stage": first_request.mode.value,
                "window": window,
                **counts,
            },
        },
        stages_ms=stages,
    )


def _check_window(
    searcher: Searcher,
    featuriser: Any,
    pattern: Pattern,
    ids: list[str],
    stored: dict[str, dict[str, list]],
    *,
    last: int,
    fields: tuple[str, ...],
) -> tuple[list[tuple[int, Match]], dict[str, dict[str, Any]]]:
    """The structural check of the window ``ids`` (``stored``: their ``symbols`` doc values):
    fetch the stored ``fields`` (the LaTeX and what a hit shows) of what may match, convert,
    unify, rank (:func:`rank_window`). Returns the ranking and the fetched sources: every hit
    of the first ``last`` is among them (the first ``last`` candidates are all fetched)."""
    required = required_symbols(pattern.tree)
    partial_window = max(PARTIAL_WINDOW, last)
    whole = []
    for eq_id in ids:
        symbols = stored.get(eq_id, {}).get("symbols")
        # no value (an index without the field, an equation without identifiers): converted
        whole.append(symbols is None or required.issubset(symbols))
    wanted = [ids[i] for i in range(len(ids)) if whole[i] or i < partial_window]
    display = searcher.fields.display
    latex = searcher.sources_of(wanted, fields)
    converted = searcher.tree_cache.trees(
        featuriser, [(eq_id, str(latex.get(eq_id, {}).get(display) or "")) for eq_id in wanted]
    )
    trees: dict[str, MathNode | None] = dict(zip(wanted, converted, strict=True))
    window = [trees.get(eq_id) for eq_id in ids]
    return rank_window(pattern, window, whole=whole, partial_window=partial_window), latex


def _annotated(
    searcher: Searcher,
    request: SearchRequest,
    shown: list[Hit],
    tokens: list[str],
    fetched: dict[str, dict[str, Any]],
) -> dict[int, Hit]:
    """The hits shown, annotated as any search's (matched tokens, highlight) from their stored
    fields (``fetched`` by the check; the others, grouped hits further down, fetched now),
    keeping the check's rank, score, match, bindings and the first stage's explanation; keyed
    by ``id()`` of the light hit."""
    missing = [hit.eq_id for hit in shown if hit.eq_id not in fetched]
    sources = {**fetched, **searcher.sources_of(missing, searcher.source_fields(request))}
    raw = [
        {"_id": hit.eq_id, "_score": hit.score, "_source": sources.get(hit.eq_id, {})}
        for hit in shown
    ]
    full = searcher.hits_of({"hits": {"hits": raw}}, tokens, annotate=request.annotate)
    out: dict[int, Hit] = {}
    for light, hit in zip(shown, full, strict=True):
        hit.rank, hit.match, hit.bindings = light.rank, light.match, light.bindings
        hit.explanation = light.explanation
        if not hit.doc_id:
            hit.doc_id = light.doc_id
        out[id(light)] = hit
    return out
