"""Query-side token selection (:func:`mathsearch.opensearch.token_stats.select_tokens`): pure
golden tests; the cluster's frequencies are used in test_searcher.py."""

from __future__ import annotations

import math

import pytest

from mathsearch.opensearch.token_stats import KIND_WEIGHTS, bm25_idf, select_tokens

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
