"""Document frequencies of math tokens, for sending BM25 the informative part of a long query.

Structural tokens such as ``math>mrow`` occur in nearly every equation: their BM25 weight is
close to nothing, but their postings lists are the longest in the index, and a query of
equation-sized length (70-200 tokens) spends most of its time on them. Two cuts, both on the
query side (:func:`select_tokens`):

* ``max_df`` drops the query tokens that occur in more than that fraction of the indexed
  equations (the rarest one is always kept);
* ``max_terms`` keeps the ``N`` distinct tokens with the highest weight ``idf(t) *
  KIND_WEIGHTS[kind(t)]`` - BM25's own ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, the
  readable kinds (symbols, symbol pairs, paths) over the structural ones (tag pairs, shapes;
  :func:`~mathsearch.opensearch.results.token_kind`) - so a query sends tens of terms, not
  hundreds.

A kept token keeps its multiplicity and place; canonical-form tokens (``form:...``) are always
kept (they carry the equivalence boost). Frequencies come from the ``_termvectors`` API (an
artificial document with ``term_statistics``) and are cached for ``ttl`` seconds; they change
slowly, and a slightly stale frequency only moves the cut-off by a hair.

Example::

    stats = TokenStats(client, "mathsearch-equations")
    stats.prune(["math>mrow", "x|sup|2", "α"], max_df=0.05)     # -> ["x|sup|2", "α"]
    stats.select(query_tokens, max_terms=32)                     # the 32 most informative
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from mathsearch.opensearch.results import token_kind

logger = logging.getLogger(__name__)

FIELD = "math_tokens"

#: Weight of each token kind (:func:`~mathsearch.opensearch.results.token_kind`: symbols,
#: symbol pairs, paths, tag pairs, shapes / other prefixed tokens) in :func:`select_tokens`.
KIND_WEIGHTS = (1.0, 1.0, 0.9, 0.6, 0.6)


def bm25_idf(df: int, documents: int) -> float:
    """BM25's (Lucene's) inverse document frequency ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

    >>> round(bm25_idf(1, 1000), 3), round(bm25_idf(999, 1000), 4)
    (6.503, 0.0015)
    """
    return math.log(1.0 + (documents - df + 0.5) / (df + 0.5))


def select_tokens(
    tokens: Sequence[str],
    df: Mapping[str, int],
    documents: int,
    *,
    max_df: float | None = None,
    max_terms: int | None = None,
) -> list[str]:
    """The query tokens BM25 gets (see the module docstring); order and repeats kept.

    Args:
        tokens: the query's math tokens, in order, repeats included.
        df: each token's document frequency; ``documents`` how many documents have the field.
        max_df: drop tokens in more than this fraction of the documents (None: keep all).
        max_terms: keep at most this many distinct tokens, the highest ``idf * kind weight``
            first (None or 0: no limit).

    >>> df = {"x": 10, "y": 500, "math>mrow": 990, "form:q": 1}
    >>> select_tokens(["x", "math>mrow", "y", "x", "form:q"], df, 1000, max_terms=1)
    ['x', 'x', 'form:q']
    >>> select_tokens(["x", "math>mrow", "y"], df, 1000, max_df=0.9)
    ['x', 'y']
    """
    distinct = [t for t in dict.fromkeys(tokens) if not t.startswith("form:")]
    kept = distinct
    if max_df is not None and distinct:
        limit = max_df * documents
        kept = [t for t in distinct if df.get(t, 0) <= limit]
        if not kept:
            kept = [min(distinct, key=lambda t: df.get(t, 0))]
    if max_terms and len(kept) > max_terms:
        order = {t: n for n, t in enumerate(kept)}

        def weight(token: str) -> tuple[float, int]:
            kind = min(token_kind(token), len(KIND_WEIGHTS) - 1)
            return (-bm25_idf(df.get(token, 0), documents) * KIND_WEIGHTS[kind], order[token])

        kept = sorted(kept, key=weight)[:max_terms]
    chosen = set(kept)
    return [t for t in tokens if t in chosen or t.startswith("form:")]


class TokenStats:
    """Cached document frequencies of ``math_tokens`` in one index (or alias)."""

    def __init__(
        self, client: Any, index: str, *, ttl: float = 300.0, max_cached: int = 200_000
    ) -> None:
        self.client = client
        self.index = index
        self.ttl = ttl
        self.max_cached = max_cached
        self._df: dict[str, int] = {}
        self._doc_count = 0
        self._fetched_at = 0.0

    def frequencies(self, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """``({token: document frequency}, documents with the field)`` for ``tokens``."""
        now = time.monotonic()
        if now - self._fetched_at > self.ttl or len(self._df) > self.max_cached:
            self._df.clear()
            self._fetched_at = now
        missing = sorted({t for t in tokens if t not in self._df})
        if missing or not self._doc_count:
            found = self.client.termvectors(
                index=self.index,
                body={
                    "doc": {FIELD: " ".join(missing)},
                    "fields": [FIELD],
                    "term_statistics": True,
                    "field_statistics": True,
                    "positions": False,
                    "offsets": False,
                },
            )
            vector = found.get("term_vectors", {}).get(FIELD, {})
            terms = vector.get("terms", {})
            for token in missing:
                self._df[token] = int(terms.get(token, {}).get("doc_freq", 0))
            self._doc_count = int(vector.get("field_statistics", {}).get("doc_count", 0))
        return {t: self._df[t] for t in tokens}, self._doc_count

    def prune(self, tokens: Sequence[str], max_df: float) -> list[str]:
        """``tokens`` without those in more than ``max_df`` of the documents (order kept)."""
        return self.select(tokens, max_df=max_df)

    def select(
        self, tokens: Sequence[str], *, max_df: float | None = None, max_terms: int | None = None
    ) -> list[str]:
        """:func:`select_tokens` with this index's frequencies (one ``_termvectors`` call for
        the tokens not cached; none when ``max_terms`` alone is asked for and the query has no
        more distinct tokens than that, which :func:`select_tokens` would keep whole)."""
        math = [t for t in tokens if not t.startswith("form:")]
        if not math or (max_df is None and not max_terms):
            return list(tokens)
        if max_df is None and len(set(math)) <= (max_terms or 0):
            return list(tokens)  # nothing to cut: no frequencies asked for, no round trip
        df, documents = self.frequencies(math)
        kept = select_tokens(tokens, df, documents, max_df=max_df, max_terms=max_terms)
        logger.debug(
            "max_df %s max_terms %s kept %d of %d query tokens",
            max_df, max_terms, len(kept), len(tokens),
        )  # fmt: skip
        return kept
