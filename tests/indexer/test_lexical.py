"""BoW vector, math tokens for BM25 and symbol keywords, on hand-written MathML."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.lexical import MAX_TOKENS, bow_vector, math_tokens, symbol_keywords, symbols
from mathsearch.indexer.mathml_graph import build_graph
from mathsearch.indexer.mathml_reader import parse_mathml
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.vocabulary import Vocabulary

RESOURCES = Path(__file__).parent.parent / "resources" / "indexer"
EXAMPLE = (
    "<math><mrow><msup><mi>x</mi><mn>2</mn></msup><mo>+</mo>"
    "<mfrac><mi>a</mi><mi>b</mi></mfrac></mrow></math>"
)


def _katex_sum() -> MathNode:
    return parse_mathml((RESOURCES / "katex_sum.xml").read_text(encoding="utf-8"))


# -- BoW ----------------------------------------------------------------------------------------


def test_bow_equals_the_sum_of_the_features() -> None:
    tree = _katex_sum()
    vocab = Vocabulary.fit([tree], sizes=(32, 32, 192))
    graph = build_graph(tree, vocab)
    bow = bow_vector(graph)
    assert bow.shape == (256,)
    assert bow.dtype == np.float32
    np.testing.assert_array_equal(bow, graph.features().sum(0))
    assert bow[:32].sum() == graph.num_nodes
    assert bow[32:64].sum() == (graph.attr_ids >= 0).sum() == 4  # stretchy x2, width, variant
    assert bow[64:].sum() == (graph.char_ids >= 0).sum()


def test_bow_counts_unknown_slots() -> None:
    tree = MathNode(
        "math", children=[MathNode("mi", {"k": "v"}, text="xx"), MathNode("mo", text="+")]
    )
    bow = bow_vector(build_graph(tree, Vocabulary(["#text"], [], ["x"])))
    expected = np.zeros(256, np.float32)
    expected[0] = 3  # three leaves
    expected[31] = 3  # math, mi, mo are unknown tags
    expected[63] = 1  # k=v unknown attribute
    expected[64] = 2  # x x
    expected[255] = 1  # + unknown character
    np.testing.assert_array_equal(bow, expected)


# -- math tokens --------------------------------------------------------------------------------


def test_worked_example_of_the_docstring() -> None:
    tokens = math_tokens(parse_mathml(EXAMPLE))
    assert tokens == [
        "x",
        "2",
        "+",
        "a",
        "b",
        "+|next|#frac",
        "x|next|+",
        "x|sup|2",
        "#frac|den|b",
        "#frac|num|a",
        "a|frac|b",
        "path:msup0:x",
        "path:msup1:2",
        "path:mfrac0:a",
        "path:mfrac1:b",
        "math>mrow",
        "mrow>msup",
        "msup>mi",
        "msup>mn",
        "mrow>mo",
        "mrow>mfrac",
        "mfrac>mi",
        "mfrac>mi",
        "shape:msup0:mi",
        "shape:msup1:mn",
        "shape:mfrac0:mi",
        "shape:mfrac1:mi",
    ]


def test_katex_equation_tokens() -> None:
    tokens = math_tokens(_katex_sum())
    assert tokens[:8] == ["E", "=", "1", "2", "m", "v", "2", "+"]
    assert "sin" in tokens and "α" in tokens and "Δ" in tokens
    assert "\u2061" not in "".join(tokens)  # the invisible function application is no symbol
    for pair in [
        "E|next|=",
        "=|next|#frac",
        "#frac|next|m",
        "v|sup|2",
        "v|next|+",
        "∑|under|i",
        "∑|over|n",
        "∑|next|sin",
        "sin|next|(",
        "α|sub|i",
        "α|next|x",
        "i|next|=",
        ")|next|Δ",
        "1|frac|2",
    ]:
        assert pair in tokens, pair
    assert "path:munderover1:i" in tokens
    assert "path:msub1:i" in tokens
    assert "shape:msub1:mi" in tokens
    assert "mrow>munderover" in tokens


def test_scripts_roots_and_multiscripts() -> None:
    tree = parse_mathml(
        "<math><msubsup><mi>x</mi><mi>i</mi><mn>2</mn></msubsup>"
        "<msqrt><mi>y</mi><mo>+</mo><mn>1</mn></msqrt>"
        "<mroot><mi>z</mi><mn>3</mn></mroot>"
        "<mover><mi>u</mi><mo>^</mo></mover>"
        "<mmultiscripts><mi>R</mi><mi>a</mi><none/><mprescripts/><mn>1</mn><mn>2</mn>"
        "</mmultiscripts></math>"
    )
    tokens = math_tokens(tree)
    for token in [
        "x|sub|i",
        "x|sup|2",
        "x|next|#sqrt",
        "#sqrt|in|y",
        "y|next|+",
        "path:msqrt:y",
        "#sqrt|next|#root",
        "#root|in|z",
        "#root|idx|3",
        "path:mroot1:3",
        "#root|next|u",
        "u|over|^",
        "u|next|R",
        "R|sub|a",
        "R|presub|1",
        "R|presup|2",
        "path:mmultiscripts5:2",
    ]:
        assert token in tokens, token
    assert not any("|sup|" in t and t.startswith("R") for t in tokens)  # <none/> is skipped


def test_structural_overlap_and_paths() -> None:
    x2 = set(math_tokens(parse_mathml("<msup><mi>x</mi><mn>2</mn></msup>")))
    y2 = set(math_tokens(parse_mathml("<msup><mi>y</mi><mn>2</mn></msup>")))
    two_x = set(math_tokens(parse_mathml("<msup><mn>2</mn><mi>x</mi></msup>")))
    assert {"shape:msup0:mi", "shape:msup1:mn", "path:msup1:2", "msup>mi"} <= x2 & y2
    assert "x|sup|2" in x2 and "2|sup|x" in two_x
    assert not {t for t in x2 if t.startswith("path:")} & two_x
    nested = math_tokens(
        parse_mathml(
            "<msqrt><mfrac><msup><mi>e</mi><msub><mi>x</mi><msup><mi>k</mi><mn>5</mn></msup>"
            "</msub></msup><mn>1</mn></mfrac></msqrt>"
        )
    )
    assert "path:msup0.mfrac0.msqrt:e" in nested
    assert "path:msub0.msup1.mfrac0.msqrt:x" in nested
    # at most four steps, nearest first: the outer msqrt is cut from the deepest paths
    assert "path:msup1.msub1.msup1.mfrac0:5" in nested
    assert "shape:msup0.msub1.msup1.mfrac0:mi" in nested
    assert not any(t.count(".") > 3 for t in nested if t.startswith(("path:", "shape:")))


def test_tokens_never_contain_whitespace() -> None:
    tree = parse_mathml(
        "<math><mtext>if and only if</mtext><mtext>\u00a0</mtext><mi>x</mi>"
        "<mtext>a\u2003b</mtext></math>"
    )
    tokens = math_tokens(tree)
    assert tokens[:3] == ["if_and_only_if", "x", "a_b"]
    assert "if_and_only_if|next|x" in tokens  # the no-break space is no symbol
    assert all(token and not any(ch.isspace() for ch in token) for token in tokens)


def test_token_cap() -> None:
    tree = MathNode("math", children=[MathNode("mi", text="x") for _ in range(400)])
    tokens = math_tokens(tree)
    assert len(tokens) == MAX_TOKENS == 512
    assert tokens[:400] == ["x"] * 400  # symbols are kept first
    assert len(math_tokens(tree, limit=10)) == 10


def test_deep_tree_is_not_recursive() -> None:
    deep = node = MathNode("math")
    for _ in range(5_000):
        child = MathNode("msqrt")
        node.children.append(child)
        node = child
    node.children.append(MathNode("mi", text="x"))
    tokens = math_tokens(deep, limit=100_000)
    assert "path:msqrt.msqrt.msqrt.msqrt:x" in tokens
    assert symbols(deep)["identifiers"] == ["x"]


# -- symbols ------------------------------------------------------------------------------------


def test_symbols_of_a_katex_equation() -> None:
    found = symbols(_katex_sum())
    assert found == {
        "identifiers": ["E", "m", "v", "i", "n", "α", "x", "Δ"],
        "operators": ["=", "+", "∑"],
        "functions": ["sin"],
    }
    assert symbol_keywords(_katex_sum()) == [
        "E", "m", "v", "i", "n", "α", "x", "Δ", "=", "+", "∑", "sin",
    ]  # fmt: skip


def test_symbols_fences_functions_and_dedup() -> None:
    tree = parse_mathml(
        "<math><munder><mo>lim</mo><mi>n</mi></munder><mi>log</mi><mo fence='true'>⟨</mo>"
        "<mi>x</mi><mo separator='true'>;</mo><mi>x</mi><mo>,</mo><mo>|</mo><mo>≤</mo>"
        "<mi mathvariant='normal'>tr</mi><mo>&InvisibleTimes;</mo><mi>12</mi><mo>!</mo>"
        "<mo fence='true'>⟩</mo></math>"
    )
    assert symbols(tree) == {
        "identifiers": ["n", "x", "12"],
        "operators": ["≤", "!"],
        "functions": ["lim", "log", "tr"],
    }


# -- properties ---------------------------------------------------------------------------------

_TAGS = ["math", "mrow", "mi", "mo", "mn", "msup", "msubsup", "mfrac", "msqrt", "mroot", "mtext"]
TREES = st.recursive(
    st.builds(
        MathNode,
        st.sampled_from(_TAGS),
        st.none(),
        st.none(),
        st.one_of(st.none(), st.text(max_size=6)),
    ),
    lambda kids: st.builds(
        MathNode, st.sampled_from(_TAGS), st.none(), st.lists(kids, max_size=4), st.none()
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES)
def test_token_properties(tree: MathNode) -> None:
    tokens = math_tokens(tree)
    assert len(tokens) <= MAX_TOKENS
    assert all(token and not any(ch.isspace() for ch in token) for token in tokens)
    assert tokens == math_tokens(tree)
    found = symbols(tree)
    for values in found.values():
        assert len(values) == len(set(values))
    assert len(symbol_keywords(tree)) <= sum(len(v) for v in found.values())
    graph = build_graph(tree, Vocabulary([], [], []), IndexerSettings(max_nodes=100_000))
    np.testing.assert_array_equal(bow_vector(graph), graph.features().sum(0))
