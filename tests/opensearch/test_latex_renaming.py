"""Identifier renaming of the bench query replicas: letter permutations, LaTeX and tokens."""

from __future__ import annotations

import string

import numpy as np
import pytest

from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import Failure
from mathsearch.opensearch.latex_renaming import letter_permutation, rename_latex, rename_tokens


@pytest.fixture(scope="module")
def featuriser() -> Featuriser:
    return Featuriser()


def test_letter_permutation_is_a_fixed_derangement() -> None:
    first = letter_permutation(1)
    assert sorted(first) == sorted(string.ascii_letters)
    assert sorted(first.values()) == sorted(string.ascii_letters)  # a permutation
    assert all(a != b for a, b in first.items())  # no letter keeps its name
    assert all(a.islower() == b.islower() for a, b in first.items())  # case kept
    assert letter_permutation(1) == first  # fixed per replica
    assert letter_permutation(2) != first
    with pytest.raises(ValueError):
        letter_permutation(0)


def test_rename_latex_renames_identifiers_only() -> None:
    mapping = {"x": "q", "a": "z", "b": "y", "c": "w", "d": "v", "T": "U", "r": "s", "l": "k"}
    latex = (
        r"\begin{array}{cc} x & \alpha \\[2pt] a \end{array}"
        r" + \frac{a}{b}\,\mathrm{Tr}\,\sin x \hspace{1cm} \label{eq:x} {\rm d}x \kern 2pt c"
    )
    renamed = rename_latex(latex, mapping)
    assert renamed == (
        r"\begin{array}{cc} q & \alpha \\[2pt] z \end{array}"
        r" + \frac{z}{y}\,\mathrm{Tr}\,\sin q \hspace{1cm} \label{eq:x} {\rm d}q \kern 2pt w"
    )
    assert rename_latex(r"\left( x_{ab} \right) % x comment", mapping) == (
        r"\left( q_{zy} \right) % x comment"
    )


EQUATIONS = [
    r"x^2 + \frac{a}{b} = c",
    r"\sum_{n=0}^{N} a_n x^n",
    r"\int_0^1 f(t)\,dt = F(1) - F(0)",
    r"\sqrt{p^2 + m^2} \leq E",
    r"\left( \begin{array}{cc} a & b \\ c & d \end{array} \right)",
    r"\partial_\mu A^\mu = 0",
]


@pytest.mark.parametrize("latex", EQUATIONS)
def test_renamed_latex_parses_with_renamed_tokens(featuriser: Featuriser, latex: str) -> None:
    mapping = letter_permutation(3)
    original = featuriser.parse_latex(latex)
    renamed = featuriser.parse_latex(rename_latex(latex, mapping))
    assert not isinstance(original, Failure)
    assert not isinstance(renamed, Failure), renamed
    assert renamed.math_tokens != original.math_tokens  # something was renamed
    assert renamed.math_tokens == rename_tokens(original.math_tokens, mapping)
    # the structure is the same: same graph shape, only character slots differ
    assert np.array_equal(renamed.graph.tag_ids, original.graph.tag_ids)
    assert np.array_equal(renamed.graph.parents, original.graph.parents)


def test_rename_tokens_kinds() -> None:
    mapping = {"x": "q", "a": "z", "b": "y"}
    tokens = [
        "x", "2", "sin", "x|sup|2", "#frac|num|a", "a|frac|b", "path:msup0:x",
        "path:mfrac1.msup0:b", "mrow>mi", "shape:msup0:mi", "path:msub1::",
    ]  # fmt: skip
    assert rename_tokens(tokens, mapping) == [
        "q", "2", "sin", "q|sup|2", "#frac|num|z", "z|frac|y", "path:msup0:q",
        "path:mfrac1.msup0:y", "mrow>mi", "shape:msup0:mi", "path:msub1::",
    ]  # fmt: skip
