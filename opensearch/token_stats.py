"""Document frequencies of math tokens, for leaving the most common ones out of a BM25 query.

Structural tokens such as ``math>mrow`` occur in nearly every equation: their BM25 weight is
close to nothing, but their postings lists are the longest in the index, and a query of
equation-sized length (70-160 tokens) spends most of its time on them. ``max_df`` drops the
query tokens that occur in more than that fraction of the indexed equations (the rarest one is
always kept). Frequencies come from the ``_termvectors`` API (an artificial document with
``term_statistics``) and are cached for ``ttl`` seconds; they change slowly, and a slightly stale
frequency only moves the cut-off by a hair.

Example::

    stats = TokenStats(client, "mathsearch-equations")
    stats.prune(["math>mrow", "x|sup|2", "α"], max_df=0.05)     # -> ["x|sup|2", "α"]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from opensearchpy import OpenSearch

logger = logging.getLogger(__name__)

FIELD = "math_tokens"


class TokenStats:
    """Cached document frequencies of ``math_tokens`` in one index (or alias)."""

    def __init__(
        self, client: OpenSearch, index: str, *, ttl: float = 300.0, max_cached: int = 200_000
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
        if not tokens:
            return []
        df, documents = self.frequencies(tokens)
        limit = max_df * documents
        kept = [t for t in tokens if df[t] <= limit]
        if not kept:
            kept = [min(tokens, key=lambda t: df[t])]
        logger.debug("max_df %.3f kept %d of %d query tokens", max_df, len(kept), len(tokens))
        return kept
