"""mathsearch.opensearch.results: the matched tokens of a hit, readable kinds first."""

from __future__ import annotations

import pytest

from mathsearch.indexer.parse import Featuriser
from mathsearch.opensearch.results import matched_tokens, token_kind


@pytest.mark.parametrize(
    ("token", "kind"),
    [
        ("x", 0),
        ("+", 0),
        ("|", 0),
        ("||", 0),
        (">", 0),
        (":", 0),
        ("exp", 0),
        ("x|sup|2", 1),
        ("∑|under|k", 1),
        ("path:msub0:ϕ", 2),
        ("math>mrow", 3),
        ("mrow>mi", 3),
        ("shape:msub0:mi", 4),
        ("form:3f2a", 4),
    ],
)
def test_token_kind(token: str, kind: int) -> None:
    assert token_kind(token) == kind


def test_structural_tokens_come_after_the_readable_ones_whatever_the_stored_order() -> None:
    featuriser = Featuriser()
    try:
        tokens = featuriser.parse_latex(r"\sum_k \phi_k(x) \exp(iky/R)").math_tokens
    finally:
        featuriser.close()
    # e.g. an index written by another tool: structural tokens first
    stored = sorted(tokens, key=lambda t: -token_kind(t))
    assert token_kind(stored[0]) == 4
    shown = matched_tokens(tokens, stored)
    kinds = [token_kind(t) for t in shown]
    assert kinds == sorted(kinds)
    assert set(shown) == set(tokens)
    assert shown[0] in {"(", ")", "/", "R", "exp", "i", "k", "x", "y", "∑", "ϕ"}
    assert shown.index("math>mrow") > shown.index("ϕ|sub|k") > shown.index("ϕ")
    assert len(shown) == len(set(shown))


def test_each_kind_keeps_document_order() -> None:
    assert matched_tokens(["b", "a", "a|sup|2"], ["a|sup|2", "b", "z", "a"]) == [
        "b",
        "a",
        "a|sup|2",
    ]
