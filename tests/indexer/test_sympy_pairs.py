"""SymPy-generated equivalent pairs (expemb seed, section 4 / appendix B)."""

from __future__ import annotations

import random

import sympy

from mathsearch.indexer.prefix import prefix_to_expr
from mathsearch.indexer.sympy_pairs import (
    equivalent_forms,
    generate_pairs,
    operator_count,
    random_expression,
)


def test_random_expressions_are_univariate_and_small() -> None:
    rng = random.Random(1)
    for _ in range(30):
        expr = random_expression(rng, max_ops=5)
        assert expr.free_symbols == {sympy.Symbol("x")}
        assert not expr.has(sympy.nan, sympy.zoo)


def test_forms_are_equivalent_and_different() -> None:
    x = sympy.Symbol("x")
    forms = dict(equivalent_forms((x + 1) ** 2, timeout=30.0))
    assert "expand" in forms
    assert sympy.simplify(prefix_to_expr(forms["expand"]) - (x + 1) ** 2) == 0
    trig = [tokens for name, tokens in equivalent_forms(sympy.sin(x), timeout=30.0)]
    assert any("cos" in tokens or "tan" in tokens for tokens in trig)  # rewrite


def test_generated_pairs_both_directions_and_equivalent() -> None:
    pairs = generate_pairs(12, random.Random(0), timeout=1.0)
    assert pairs and len(pairs) % 2 == 0
    for (a, b), (c, d) in zip(pairs[::2], pairs[1::2], strict=True):
        assert (a, b) == (d, c) and a != b
        assert operator_count(a) <= 5 and operator_count(b) <= 5
    a, b = pairs[0]
    assert sympy.simplify(prefix_to_expr(a) - prefix_to_expr(b)) == 0
