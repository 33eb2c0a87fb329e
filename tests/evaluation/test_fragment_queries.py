"""mathsearch.evaluation.fragment_queries: fragments cut from MathML trees, and their scores."""

from __future__ import annotations

import numpy as np
import pytest

from mathsearch.evaluation.fragment_queries import (
    fragment_scores,
    fragment_tree,
    summarise_fragments,
)
from mathsearch.indexer.mathml_reader import parse_mathml
from mathsearch.indexer.mathml_tree import MathNode, to_mathml
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord

ROW = (
    "<math><mrow><mi>a</mi><mo>+</mo><mi>b</mi><mo>=</mo>"
    "<mi>c</mi><mo>+</mo><mi>d</mi></mrow></math>"
)


def _leaves(node: MathNode) -> str:
    return "".join(n.text or "" for n in node.iter())


def test_fragments_are_runs_of_a_rows_children_within_bounds() -> None:
    tree = parse_mathml(ROW)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(200):
        fragment = fragment_tree(tree, rng, min_elements=2, max_fraction=0.7)
        assert fragment is not None and fragment.tag == "math"
        (row,) = fragment.children
        assert row.tag == "mrow" and 2 <= len(row.children) <= 6  # 0.7 x 9 elements
        text = _leaves(fragment)
        assert text in "a+b=c+d"  # a contiguous run, in order
        seen.add(text)
    assert {"a+", "c+d", "b=c+d"} <= seen  # starts and lengths vary


def test_no_fragment_without_a_row_or_a_small_enough_run() -> None:
    rng = np.random.default_rng(0)
    assert fragment_tree(parse_mathml("<math><mi>x</mi></math>"), rng) is None
    assert fragment_tree(parse_mathml(ROW), rng, min_elements=20) is None


def test_a_fragment_parses_like_the_same_latex_typed_alone() -> None:
    with Featuriser() as featuriser:
        whole = featuriser.parse_latex("a + b = c + d")
        typed = featuriser.parse_latex("c + d")
        assert isinstance(whole, ParsedEquation) and isinstance(typed, ParsedEquation)
        rng = np.random.default_rng(1)
        for _ in range(100):
            fragment = fragment_tree(whole.tree, rng, min_elements=3, max_fraction=0.5)
            if fragment is not None and _leaves(fragment) == "c+d":
                break
        else:
            pytest.fail("no c + d fragment drawn")
        record = EquationRecord("f", "", 0, mathml=to_mathml(fragment))
        (parsed,) = featuriser.parse_batch([record])
    assert isinstance(parsed, ParsedEquation)
    assert parsed.graph.tag_ids.tolist() == typed.graph.tag_ids.tolist()
    assert parsed.graph.char_ids.tolist() == typed.graph.char_ids.tolist()
    assert parsed.graph.parents.tolist() == typed.graph.parents.tolist()
    assert parsed.math_tokens == typed.math_tokens


def test_scores_rank_the_source_by_cosine_ties_to_the_source() -> None:
    collection = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])
    queries = np.array([[1.0, 0.1], [0.0, 3.0], [1.0, 1.0]])
    sources = np.array([3, 2, 2])  # row 3 ties with row 0; row 2 is second for query 1
    scores = fragment_scores(queries, collection, sources, depth=1)
    assert scores["rank"].tolist() == [1, 2, 1]
    assert scores["RR@1"].tolist() == [1.0, 0.0, 1.0]
    assert scores["S@1"].tolist() == [1.0, 0.0, 1.0]
    summary = summarise_fragments(scores, np.arange(3))
    assert summary["queries"] == 3
    assert summary["means"] == {"RR@1": pytest.approx(0.6667), "S@1": pytest.approx(0.6667)}
    width = np.sqrt(np.log(20) / (2 * 3))  # Hoeffding, as every retrieval table
    assert summary["confidence"]["S@1"] == pytest.approx(width, abs=1e-4)
