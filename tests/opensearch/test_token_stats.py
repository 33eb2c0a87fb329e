"""Query-side token selection (:func:`mathsearch.opensearch.token_stats.select_tokens`): pure
golden tests, and when :class:`TokenStats` asks for frequencies at all (a stand-in for
``_termvectors`` counts the calls); the cluster's frequencies are used in test_searcher.py."""

from __future__ import annotations

import math

import pytest

from mathsearch.opensearch.token_stats import (
    KIND_WEIGHTS,
    TokenStats,
    bm25_idf,
    select_tokens,
)

DF = {"x": 10, "y": 400, "α": 3, "x|sup|2": 20, "math>mrow": 990, "math>mi": 900, "form:z": 0}
N = 1000


def test_bm25_idf_is_lucenes() -> None:
    assert bm25_idf(10, N) == pytest.approx(math.log(1 + (N - 10 + 0.5) / 10.5))
    assert bm25_idf(0, N) > bm25_idf(1, N) > bm25_idf(N, N) > 0


def test_max_terms_keeps_the_highest_idf_times_kind_in_query_order_with_repeats() -> None:
    tokens = ["math>mrow", "x", "y", "x|sup|2", "α", "x", "math>mi", "form:z"]
    assert select_tokens(tokens, DF, N, max_terms=3) == ["x", "x|sup|2", "α", "x", "form:z"]
    assert select_tokens(tokens, DF, N, max_terms=0) == tokens  # 0: every token
    assert select_tokens(tokens, DF, N) == tokens


def test_the_kind_weight_puts_a_readable_token_above_an_equally_rare_tag_pair() -> None:
    df = {"q": 50, "mrow>msub": 50}
    assert KIND_WEIGHTS[0] > KIND_WEIGHTS[3]
    assert select_tokens(["mrow>msub", "q"], df, N, max_terms=1) == ["q"]


def test_max_df_then_max_terms_and_the_rarest_token_survives_any_cut() -> None:
    tokens = ["math>mrow", "y", "x"]
    assert select_tokens(tokens, DF, N, max_df=0.5) == ["y", "x"]
    assert select_tokens(tokens, DF, N, max_df=0.5, max_terms=1) == ["x"]
    assert select_tokens(["math>mrow", "math>mi"], DF, N, max_df=0.01) == ["math>mi"]
    assert select_tokens(["form:z"], DF, N, max_df=0.01, max_terms=1) == ["form:z"]


class _CountingClient:
    """A stand-in for the cluster's ``_termvectors``: each token's frequency from DF."""

    def __init__(self) -> None:
        self.calls = 0

    def termvectors(self, *, index: str, body: dict) -> dict:
        self.calls += 1
        terms = {t: {"doc_freq": DF.get(t, 0)} for t in body["doc"]["math_tokens"].split()}
        stats = {"doc_count": N}
        return {"term_vectors": {"math_tokens": {"terms": terms, "field_statistics": stats}}}


def test_a_query_within_max_terms_asks_for_no_frequencies_and_keeps_every_token() -> None:
    client = _CountingClient()
    stats = TokenStats(client, "eq")
    tokens = ["math>mrow", "x", "y", "x", "form:z"]
    assert stats.select(tokens, max_terms=3) == tokens  # 3 distinct math tokens
    assert client.calls == 0
    longer = ["math>mrow", "x", "y", "α", "form:z"]
    assert stats.select(longer, max_terms=3) == select_tokens(longer, DF, N, max_terms=3)
    assert client.calls == 1
    assert stats.select(["math>mi", "β"], max_df=0.5, max_terms=3) == ["β"]  # max_df: asks
    assert client.calls == 2
