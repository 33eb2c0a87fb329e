"""Unification of patterns with variables against real equation trees: golden cases, scores,
bindings and the MathML -> LaTeX round trip."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from mathsearch.core.paths import TEST_RESOURCES
from mathsearch.indexer.hepth import iter_hepth
from mathsearch.indexer.lexical import symbols
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.query_variables import QVAR_TAG, parse_pattern
from mathsearch.indexer.records import EquationRecord
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.unify import (
    MAX_STEPS,
    Match,
    equal_trees,
    match,
    required_symbols,
    subtree_latex,
    unify,
)

HEPTH = TEST_RESOURCES / "export" / "hepth2003-every12th.txt"


@pytest.fixture(scope="module")
def featuriser() -> Featuriser:
    settings = dataclasses.replace(IndexerSettings.from_env(), canonical_form="off")
    return Featuriser(converter="python", settings=settings)


def _tree(featuriser: Featuriser, latex: str) -> MathNode:
    parsed = featuriser.parse_latex(latex)
    assert isinstance(parsed, ParsedEquation), parsed
    return parsed.tree


def _match(featuriser: Featuriser, query: str, equation: str) -> Match:
    return match(parse_pattern(query, featuriser).tree, _tree(featuriser, equation))


def _unify(featuriser: Featuriser, query: str, equation: str) -> dict[str, str] | None:
    bindings = unify(parse_pattern(query, featuriser).tree, _tree(featuriser, equation))
    return None if bindings is None else {k: subtree_latex(v) for k, v in bindings.items()}


# -- golden cases ------------------------------------------------------------------------------

GOLDEN = [
    # repeated variables bind equal sub-expressions
    ("?x + ?x", "a + a", {"x": "a"}),
    ("?x + ?x", "a + b", None),
    (r"?x^2 - ?x", r"\alpha_1^2 - \alpha_1", {"x": r"\alpha_{1}"}),
    (r"?x^2 - ?x", r"\alpha_1^2 - \alpha_2", None),
    # different names may bind equal or different sub-expressions
    ("?x + ?y", "a + a", {"x": "a", "y": "a"}),
    ("?x + ?y", "a + b", {"x": "a", "y": "b"}),
    # no commutativity
    ("a + ?y", "b + a", None),
    ("?x + b", "b + a", None),
    (r"?x \cdot ?y = ?y \cdot ?x", r"a \cdot b = b \cdot a", {"x": "a", "y": "b"}),
    (r"?x \cdot ?y = ?y \cdot ?x", r"a \cdot b = a \cdot b", None),
    # under sub/superscripts, fractions, roots
    (r"x^{?y}", r"x^{\alpha_1}", {"y": r"\alpha_{1}"}),
    (r"?x_{?i}^{2}", r"A_{\mu\nu}^{2}", {"x": "A", "i": r"\mu\nu"}),
    (r"e^{i ?k x}", r"e^{i (p+q) x}", {"k": "(p+q)"}),
    (r"\frac{?a}{2m}", r"\frac{p^2}{2m}", {"a": "p^{2}"}),
    (r"\frac{?a}{?a+1}", r"\frac{n^2}{n^2+1}", {"a": "n^{2}"}),
    (r"\frac{?a}{?a+1}", r"\frac{n^2}{m^2+1}", None),
    (r"\sqrt{?x^2+?y^2}", r"\sqrt{p_x^2+p_y^2}", {"x": "p_{x}", "y": "p_{y}"}),
    (r"\sqrt[?n]{?x}", r"\sqrt[3]{\Lambda}", {"n": "3", "x": r"\Lambda"}),
    # row runs: leftmost-shortest
    ("?a + ?b", "x + y + z", {"a": "x", "b": "y+z"}),
    ("?a + ?b + ?c", "w + x + y + z", {"a": "w", "b": "x", "c": "y+z"}),
    ("?a = 2 ?b", "E = 2 m c^2", {"a": "E", "b": "mc^{2}"}),
    # ... but a run never crosses a relation or a comma of its row
    ("?a = ?b", "x = y = z", None),
    ("f(?a)", "f(x, y)", None),
    ("f(?a, ?b)", "f(x, y+z)", {"a": "x", "b": "y+z"}),
    # function application: the invisible operator is no item
    ("?f(?x)", r"\sin(\theta)", {"f": r"\sin", "x": r"\theta"}),
    # a single-child row is its child: {x} is x
    ("{?a}^{2}", "{x}^2", {"a": "x"}),
    ("{x}+?a", "x+{y}", {"a": "y"}),
    # mathvariant matters, other attributes do not
    (r"\mathbf{x} + ?a", r"\mathbf{x} + 1", {"a": "1"}),
    (r"\mathbf{x} + ?a", r"x + 1", None),
    (r"\left( ?a \right)", r"\left( b \right)", {"a": "b"}),
]


@pytest.mark.parametrize(("query", "equation", "expected"), GOLDEN)
def test_unification_golden_cases(
    query: str, equation: str, expected: dict[str, str] | None, featuriser: Featuriser
) -> None:
    assert _unify(featuriser, query, equation) == expected
    found = _match(featuriser, query, equation)
    if expected is None:
        assert found.kind != "exact"
    else:
        assert (found.kind, found.score, found.bindings_latex()) == ("exact", 1.0, expected)


def test_commutativity_is_not_assumed_but_the_swapped_pattern_matches(
    featuriser: Featuriser,
) -> None:
    assert _match(featuriser, "a + b", "b + a").kind == "partial"
    assert _match(featuriser, "b + a", "b + a").kind == "exact"


def test_bindings_round_trip_through_latex(featuriser: Featuriser) -> None:
    bound = unify(parse_pattern("x^{?y}", featuriser).tree, _tree(featuriser, r"x^{\alpha_1}"))
    assert bound is not None
    latex = Match("exact", 1.0, bound).bindings_latex()["y"]
    assert equal_trees(_tree(featuriser, latex), _tree(featuriser, r"\alpha_1"))
    assert equal_trees(_tree(featuriser, latex), bound["y"])


def test_a_run_binding_is_a_row_over_the_original_nodes(featuriser: Featuriser) -> None:
    tree = _tree(featuriser, "x + y + z")
    bound = unify(parse_pattern("?a + ?b", featuriser).tree, tree)
    assert bound is not None
    row = tree.children[0].children
    assert bound["a"] is row[0]
    assert bound["b"].tag == "mrow" and bound["b"].children == row[2:]
    assert all(a is b for a, b in zip(bound["b"].children, row[2:], strict=True))


def test_a_run_binding_keeps_its_brackets_balanced(featuriser: Featuriser) -> None:
    """A run never holds half a bracket pair: ``f(?a) g(?b)`` splits at the brackets."""
    bound = _unify(featuriser, "?a + ?b", "(x + y) + z")
    assert bound is not None and bound["a"].replace(" ", "") in ("(x+y)", "\\left(x+y\\right)")
    assert _unify(featuriser, "?a ) ?b", "f(x) g(y)") is None  # ?a would be 'f(x' : unbalanced


# -- contained, partial, none ----------------------------------------------------------------------


def test_contained_matches_score_between_one_half_and_one_tighter_higher(
    featuriser: Featuriser,
) -> None:
    small = _match(featuriser, r"\frac{?a}{2m}", r"E = \frac{p^2}{2m}")
    large = _match(featuriser, r"\frac{?a}{2m}", r"H = \sum_i \frac{p_i^2}{2m} + V(x_1, x_2)")
    for found in (small, large):
        assert found.kind == "contained"
        assert 0.5 < found.score < 1.0
    assert small.bindings_latex() == {"a": "p^{2}"}
    assert large.bindings_latex() == {"a": "p_{i}^{2}"}
    assert small.score > large.score
    # a run of a row is a sub-expression too; the first occurrence is reported
    run = _match(featuriser, "?a + ?b", r"E = x + y, \quad F = u + v")
    assert (run.kind, run.bindings_latex()) == ("contained", {"a": "x", "b": "y"})
    assert 0.5 < run.score < 1.0
    nested = _match(featuriser, "?x^2", r"\sqrt{1 + k^2}")
    assert (nested.kind, nested.bindings_latex()) == ("contained", {"x": "k"})


def test_partial_matches_score_below_any_contained_match(featuriser: Featuriser) -> None:
    partial = _match(featuriser, "a^2+b^2=c^2", "a^2+b^2=d^2")
    assert partial.kind == "partial"
    assert 0 < partial.score < 0.5
    assert partial.score == pytest.approx(0.5 * 8 / 12)  # the run a^2 + b^2 = of 12 nodes
    weaker = _match(featuriser, "a^2+b^2=c^2", "a^2 - q")
    assert weaker.kind == "partial" and weaker.score < partial.score
    contained = _match(featuriser, "?x + ?x", r"\Phi = \sum_{k} \int d^4 x\, (f + f)")
    assert contained.kind == "contained" and contained.score > partial.score
    bindings = _match(featuriser, r"\frac{?a}{?b} + x^{?c} = 0", r"y = x^{n}")
    assert (bindings.kind, bindings.bindings_latex()) == ("partial", {"c": "n"})
    none = _match(featuriser, r"\frac{?a}{2m}", "y")
    assert (none.kind, none.score, none.bindings) == ("none", 0.0, {})


def test_match_and_unify_accept_mathml_read_trees_and_bare_nodes() -> None:
    x = MathNode(QVAR_TAG, text="x")
    pattern = MathNode("msup", children=[x, MathNode("mn", text="2")])
    tree = MathNode("msup", children=[MathNode("mi", text="t"), MathNode("mn", text="2")])
    assert unify(pattern, tree) == {"x": tree.children[0]}
    assert match(pattern, MathNode("mrow", children=[tree])).kind == "exact"


def test_a_pathological_pattern_gives_up_after_the_step_budget(
    featuriser: Featuriser, caplog: pytest.LogCaptureFixture
) -> None:
    pattern = parse_pattern("?a ?b ?c ?d ?e ?f ?g ?a ?b ?c ?d ?e ?f ?h + 1", featuriser).tree
    tree = _tree(featuriser, " ".join("abcdefghijklmnopqrstuvwxyz" * 2) + " + 2")
    with caplog.at_level(logging.DEBUG, logger="mathsearch.indexer.unify"):
        assert unify(pattern, tree) is None
        assert match(pattern, tree).kind != "exact"
    assert f"unify gave up after {MAX_STEPS} steps" in caplog.text  # bounded, not exhaustive


# -- equality and LaTeX --------------------------------------------------------------------------


def test_equal_trees_normalises_rows_spaces_and_attributes(featuriser: Featuriser) -> None:
    assert equal_trees(_tree(featuriser, "{x}^{2}"), _tree(featuriser, r"x^2\,"))
    assert equal_trees(_tree(featuriser, r"\left(a\right)"), _tree(featuriser, r"\left(a\right)"))
    assert equal_trees(_tree(featuriser, r"\displaystyle a+b"), _tree(featuriser, "a+b"))
    assert not equal_trees(_tree(featuriser, "a+b"), _tree(featuriser, "b+a"))
    assert not equal_trees(_tree(featuriser, r"\mathrm{d}x"), _tree(featuriser, "dx"))
    assert not equal_trees(_tree(featuriser, "x^2"), _tree(featuriser, "x_2"))


def test_subtree_latex_writes_variables_in_either_syntax(featuriser: Featuriser) -> None:
    pattern = parse_pattern(r"\frac{?a}{\qvar{*1*}} + x^{?a}", featuriser)
    assert subtree_latex(pattern.tree) == r"\frac{\qvar{a}}{\qvar{*1*}}+x^{\qvar{a}}"
    question = subtree_latex(pattern.tree, variables="question")
    assert question == r"\frac{?a}{\qvar{*1*}}+x^{?a}"
    assert parse_pattern(question, featuriser).tree == pattern.tree


def test_subtree_latex_round_trips_most_real_equations(featuriser: Featuriser) -> None:
    records = [r for r in iter_hepth(HEPTH) if isinstance(r, EquationRecord)][::20][:50]
    parsed = [p for p in featuriser.parse_batch(records) if isinstance(p, ParsedEquation)]
    assert len(parsed) >= 45
    same = []
    for item in parsed:
        back = featuriser.parse_latex(subtree_latex(item.tree))
        same.append(isinstance(back, ParsedEquation) and equal_trees(item.tree, back.tree))
    share = sum(same) / len(same)
    assert share >= 0.8, f"{share:.0%} of {len(same)} real equations round-trip"


# -- the symbols necessary for a whole match -------------------------------------------------


def _stored_symbols(tree: MathNode) -> set[str]:
    """The index's ``symbols`` field of an equation (``documents.flat_symbols``)."""
    return {name for group in symbols(tree).values() for name in group}


@pytest.mark.parametrize(("query", "equation", "expected"), GOLDEN)
def test_every_whole_match_has_the_patterns_required_symbols(
    query: str, equation: str, expected: dict[str, str] | None, featuriser: Featuriser
) -> None:
    pattern = parse_pattern(query, featuriser).tree
    tree = _tree(featuriser, equation)
    if match(pattern, tree).kind in ("exact", "contained"):
        assert required_symbols(pattern) <= _stored_symbols(tree)


def test_required_symbols_are_the_identifiers_without_variables(featuriser: Featuriser) -> None:
    pattern = parse_pattern(r"\sin ?x + \alpha_{?i} = \frac{?x}{2m} + \text{for ?y}", featuriser)
    assert required_symbols(pattern.tree) == {"sin", "α", "m"}  # no variable, no operator
    # a real equation without one of them cannot match whole: it is skipped, not lost
    assert not required_symbols(pattern.tree) <= _stored_symbols(
        _tree(featuriser, r"\cos x + \alpha_1 = \frac{x}{2m}")
    )


def test_match_can_skip_the_whole_or_the_partial_attempt(featuriser: Featuriser) -> None:
    pattern = parse_pattern(r"?a^{2} + ?b^{2} = ?c^{2}", featuriser).tree
    exact = _tree(featuriser, r"x^{2} + y^{2} = z^{2}")
    part = _tree(featuriser, r"x^{2} + y^{2} - z")
    assert match(pattern, exact).kind == "exact"
    assert match(pattern, exact, whole=False).kind == "partial"  # the whole attempt skipped
    assert match(pattern, part).kind == "partial"
    assert match(pattern, part, partial=False).kind == "none"
    assert match(pattern, exact, partial=False).kind == "exact"
