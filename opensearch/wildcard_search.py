"""Wildcard searches: a LaTeX query with query variables (``\\qvar{x}`` or ``?x``) finds the
equations whose structure matches the pattern, with each variable bound to a sub-expression.

Two stages, as the searcher's other second stages:

1. **Recall.** The request's mode runs on the pattern made neutral
   (:attr:`~mathsearch.indexer.query_variables.Pattern.neutral_latex`: every variable a plain
   identifier, so the kNN side embeds a formula of the pattern's shape) with BM25 over the
   pattern's structure tokens only (:attr:`~mathsearch.indexer.query_variables.Pattern.
   structure_tokens`: the tokens that do not involve a variable), for the request's ``window``
   (default 100) candidates.
2. **The structural check.** Each candidate's LaTeX is converted by the same featurisation and
   unified with the pattern (:func:`mathsearch.indexer.unify.match`): a variable binds one
   sub-expression, a repeated name equal ones. The window is ranked by the match: the whole
   equation (``exact``, score 1) before a sub-expression of it (``contained``, (0.5, 1), tighter
   first) before a part of the pattern only (``partial``, < 0.5) before no match; ties keep the
   first stage's order. Each hit reports its ``match`` and ``bindings`` (``{"x": "\\alpha_1"}``).

The check costs one conversion per candidate (the converted trees are kept in a bounded cache,
keyed by the equation's id and LaTeX) and one unification; it runs on the window only.

Example::

    response = wildcard_search(searcher, SearchRequest(r"?f(?x)^2 + ?g(?x)^2", mode=Mode.RRF))
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
from mathsearch.indexer.unify import Match, match
from mathsearch.opensearch.results import SearchResponse, group_hits

if TYPE_CHECKING:
    from mathsearch.opensearch.search_request import SearchRequest
    from mathsearch.opensearch.searcher import Searcher

logger = logging.getLogger(__name__)

__all__ = [
    "TreeCache",
    "pattern_featuriser",
    "rank_window",
    "wildcard_pattern",
    "wildcard_search",
]

#: Match kinds, best first (a hit's ``match``).
KINDS = ("exact", "contained", "partial", "none")


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


def rank_window(pattern: Pattern, trees: Sequence[MathNode | None]) -> list[tuple[int, Match]]:
    """``(candidate index, match)`` of every candidate, best match first, ties in the first
    stage's order (a pure function: golden-tested)."""
    none = Match(kind="none", score=0.0, bindings={})
    matches = [match(pattern.tree, tree) if tree is not None else none for tree in trees]
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
        k=window,
        offset=0,
        group=False,
        mathml=False,
        rerank=(),
        window=window,
        depth=max(request.depth, window),
    )
    first = searcher.search(first_request, tokens=list(pattern.structure_tokens))
    checked = time.perf_counter()
    trees = searcher.tree_cache.trees(featuriser, [(h.eq_id, h.latex) for h in first.hits])
    ranked = rank_window(pattern, trees)
    hits = []
    for rank, (index, found) in enumerate(ranked, start=1):
        hit = replace(first.hits[index], rank=rank, score=round(found.score, 6))
        hit.match = found.kind
        hit.bindings = found.bindings_latex()
        hits.append(hit)
    groups = group_hits(hits, last)[request.offset :] if request.group else None
    hits = hits if request.group else hits[request.offset : last]
    if request.mathml:
        searcher.renderer.fill(hits)
    done = time.perf_counter()
    stages = {**first.stages_ms, "structural": (done - checked) * 1000}
    counts = {kind: sum(1 for _, m in ranked if m.kind == kind) for kind in KINDS}
    return replace(
        first,
        k=request.k,
        took_ms=(done - started) * 1000,
        hits=hits,
        groups=groups,
        parameters={
            **request.parameters(),
            "wildcard": {"variables": list(pattern.variables), "window": window, **counts},
        },
        stages_ms=stages,
    )
