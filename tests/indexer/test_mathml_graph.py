"""build_graph / EquationGraph: hand-computed nodes, positions, edges, one-hot rows, properties."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.errors import LimitExceeded, MathMLError
from mathsearch.indexer.mathml_graph import EquationGraph, build_graph
from mathsearch.indexer.mathml_reader import parse_mathml
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.vocabulary import TEXT_TAG, Vocabulary, attribute_symbols, leaf_text

# tags: #text 0, mi 1, mn 2, msup 3, math 4 (unknown 31); attributes: bold 0 (unknown 31);
# characters: x 0, 1 1 (unknown 191)
VOCAB = Vocabulary([TEXT_TAG, "mi", "mn", "msup", "math"], ["mathvariant=bold"], ["x", "1"])


def _x_squared() -> MathNode:
    """x^{12}: math > msup > (mi > "x", mn > "1" "2")."""
    return parse_mathml("<math><msup><mi>x</mi><mn>12</mn></msup></math>")


def test_small_tree_by_hand() -> None:
    graph = build_graph(_x_squared(), VOCAB)
    # 0 math, 1 msup, 2 mi, 3 "x", 4 mn, 5 "1", 6 "2"
    assert graph.num_nodes == 7
    assert graph.tag_ids.tolist() == [4, 3, 1, 0, 2, 0, 0]
    assert graph.attr_ids.tolist() == [-1] * 7
    assert graph.char_ids.tolist() == [-1, -1, -1, 0, -1, 1, 191]
    assert graph.positions.tolist() == [0, 0, 0, 0, 1, 0, 1]
    assert graph.parents.tolist() == [-1, 0, 1, 2, 1, 4, 4]
    assert graph.parents.dtype == np.int32
    assert graph.edge_index().tolist() == [
        [0, 1, 2, 1, 4, 4, 1, 2, 3, 4, 5, 6],
        [1, 2, 3, 4, 5, 6, 0, 1, 2, 1, 4, 4],
    ]
    assert graph.edge_index().dtype == np.int64
    assert graph.edge_type().tolist() == [1] * 6 + [0] * 6
    assert graph.vocab_hash == VOCAB.content_hash


def test_one_hot_rows() -> None:
    tree = MathNode(
        "math",
        children=[
            MathNode("mi", {"mathvariant": "bold"}, text="x"),
            MathNode("mo", {"stretchy": "false"}, text="∑"),
        ],
    )
    features = build_graph(tree, VOCAB).features()
    assert features.shape == (5, 256)
    assert features.dtype == np.float32
    assert set(np.unique(features)) <= {0.0, 1.0}
    assert np.flatnonzero(features[0]).tolist() == [4]  # math: tag only
    assert np.flatnonzero(features[1]).tolist() == [1, 32 + 0]  # mi + mathvariant=bold
    assert np.flatnonzero(features[2]).tolist() == [0, 64 + 0]  # leaf "x"
    assert np.flatnonzero(features[3]).tolist() == [31, 32 + 31]  # unknown tag, unknown attr
    assert np.flatnonzero(features[4]).tolist() == [0, 64 + 191]  # leaf, unknown character


def test_text_leaves_per_character_before_element_children() -> None:
    tree = MathNode("math", children=[MathNode("mtext", text="ab", children=[MathNode("mglyph")])])
    graph = build_graph(tree, VOCAB)
    # 0 math, 1 mtext, 2 "a", 3 "b", 4 mglyph
    assert graph.parents.tolist() == [-1, 0, 1, 1, 1]
    assert graph.positions.tolist() == [0, 0, 0, 1, 2]
    sin = build_graph(MathNode("mi", text="sin"), VOCAB)
    assert sin.num_nodes == 4
    assert sin.positions.tolist() == [0, 0, 1, 2]


def test_text_normalisation() -> None:
    tree = MathNode(
        "math", children=[MathNode("mi", text=" e\u0301 "), MathNode("mtext", text=" \n")]
    )
    graph = build_graph(tree, Vocabulary([], [], ["\u00e9"]))
    assert graph.num_nodes == 4  # math, mi, "é", mtext
    assert graph.char_ids.tolist() == [-1, -1, 0, -1]


def test_positions_capped_at_255() -> None:
    row = MathNode("mrow", children=[MathNode("mi") for _ in range(300)])
    graph = build_graph(row, VOCAB)
    assert graph.positions.tolist() == [0, *range(255), *[255] * 45]
    text = build_graph(MathNode("mtext", text="a" * 300), VOCAB)
    assert text.positions.tolist() == [0, *range(255), *[255] * 45]


def test_single_node_graph() -> None:
    graph = build_graph(MathNode("math"), VOCAB)
    assert graph.num_nodes == 1
    assert graph.edge_index().shape == (2, 0)
    assert graph.edge_type().shape == (0,)
    assert graph.features().shape == (1, 256)


def test_node_limit_and_deep_trees() -> None:
    with pytest.raises(LimitExceeded) as caught:
        build_graph(_x_squared(), VOCAB, IndexerSettings(max_nodes=6))
    assert caught.value.reason == "too-many-nodes"
    assert build_graph(_x_squared(), VOCAB, IndexerSettings(max_nodes=7)).num_nodes == 7
    with pytest.raises(LimitExceeded):
        build_graph(MathNode("mtext", text="a" * 10_000_000), VOCAB)  # refused before the loop
    deep = node = MathNode("math")
    for _ in range(10_000):  # far beyond the recursion limit
        child = MathNode("mrow")
        node.children.append(child)
        node = child
    graph = build_graph(deep, VOCAB, IndexerSettings(max_nodes=20_000))
    assert graph.num_nodes == 10_001
    assert graph.parents[-1] == 9_999


def test_dict_round_trip_through_json() -> None:
    graph = build_graph(_x_squared(), VOCAB)
    data = json.loads(json.dumps(graph.to_dict()))
    assert data["parents"] == [-1, 0, 1, 2, 1, 4, 4]
    again = EquationGraph.from_dict(data)
    assert again == graph
    assert again.tag_ids.dtype == np.int32


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tags": [4, 3]}, "malformed"),
        ({"parents": [0, 0, 1, 2, 1, 4, 4]}, "root"),
        ({"parents": [-1, 0, 1, 2, 1, 4, 6]}, "pre-order"),
        ({"tags": [4, 3, 1, 0, 2, 0, 32]}, "tag id"),
        ({"chars": [-2, -1, -1, 0, -1, 1, 191]}, "character id"),
        ({"pos": [0, 0, 0, 0, 1, 0, 256]}, "position"),
        ({"vocab": None, "tags": None}, "malformed"),
    ],
)
def test_from_dict_refuses_invalid_records(change: dict, message: str) -> None:
    data = {**build_graph(_x_squared(), VOCAB).to_dict(), **change}
    with pytest.raises(MathMLError, match=message) as caught:
        EquationGraph.from_dict(data)
    assert caught.value.reason == "invalid-graph"


# -- properties over random trees ---------------------------------------------------------------

_TAGS = ["math", "mrow", "mi", "mo", "mn", "msup", "mfrac", "mtext", "zz"]
_TEXT = st.one_of(st.none(), st.text(alphabet="xy+1 \u00e9e\u0301α\n", max_size=6))
_ATTRS = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["mathvariant", "width", "class", "stretchy"]),
        st.sampled_from(["bold", "0.2778em", "false", "x"]),
        max_size=3,
    ),
)


TREES = st.recursive(
    st.builds(MathNode, st.sampled_from(_TAGS), _ATTRS, st.none(), _TEXT),
    lambda kids: st.builds(
        MathNode, st.sampled_from(_TAGS), _ATTRS, st.lists(kids, max_size=5), _TEXT
    ),
    max_leaves=40,
)
PROPERTY_VOCAB = Vocabulary(
    [TEXT_TAG, "mi", "mrow", "math"], ["mathvariant=bold", "width=0.3em"], ["x", "+", "é"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES)
def test_graph_properties(tree: MathNode) -> None:
    graph = build_graph(tree, PROPERTY_VOCAB, IndexerSettings(max_nodes=100_000))
    elements = list(tree.iter())
    leaves = sum(len(leaf_text(node.text) or "") for node in elements)
    n = graph.num_nodes
    assert n == len(elements) + leaves
    parents = graph.parents
    assert parents[0] == -1
    assert all(0 <= parents[i] < i for i in range(1, n))
    # positions of each parent's children are 0, 1, 2, ... in node order
    seen: dict[int, int] = {}
    for i in range(1, n):
        expected = seen.get(int(parents[i]), 0)
        assert graph.positions[i] == min(expected, 255)
        seen[int(parents[i])] = expected + 1
    assert graph.edge_index().shape == (2, 2 * (n - 1))
    assert graph.edge_type().sum() == n - 1
    features = graph.features()
    assert features[:, :32].sum() == n
    with_attr = sum(1 for node in elements if attribute_symbols(node.attrs))
    assert features[:, 32:64].sum() == with_attr
    assert features[:, 64:].sum() == leaves
    assert (graph.char_ids >= 0).sum() == leaves
    assert EquationGraph.from_dict(json.loads(json.dumps(graph.to_dict()))) == graph
