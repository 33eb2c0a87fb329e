"""mathsearch.encoders.subformula_crop: a part of an equation's tree, cut like a parsed query."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from mathsearch.encoders.corpus import CorpusError
from mathsearch.encoders.packed_corpus import PackedCorpus
from mathsearch.encoders.subformula_crop import (
    container_tags,
    crop_tree,
    cut_children,
    packed_with_crops,
)
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary


@lru_cache(maxsize=1)
def _featuriser() -> Featuriser:
    return Featuriser()


def _graph(latex: str) -> EquationGraph:
    parsed = _featuriser().parse_latex(latex)
    assert isinstance(parsed, ParsedEquation), parsed
    return parsed.graph


@lru_cache(maxsize=1)
def _sample_graphs() -> tuple[EquationGraph, ...]:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    parsed = _featuriser().parse_batch(records[:40])
    return tuple(p.graph for p in parsed if isinstance(p, ParsedEquation))


def _columns(graph: EquationGraph, nodes: np.ndarray) -> tuple[list[int], ...]:
    return (
        graph.tag_ids[nodes].tolist(),
        graph.attr_ids[nodes].tolist(),
        graph.char_ids[nodes].tolist(),
    )


def _row(graph: EquationGraph) -> int:
    """The node whose children are the top-level symbols (the root's only mrow, or the root)."""
    kids = np.flatnonzero(graph.parents == 0)
    return int(kids[0]) if kids.size == 1 else 0


@pytest.mark.parametrize(
    ("full", "first", "length", "fragment"),
    [
        ("a + b = c + d", 4, 3, "c + d"),
        ("a + b = c + d", 0, 3, "a + b"),
        (r"S = \frac{1}{2} \int x \, dx", 2, 3, r"\frac{1}{2} \int x"),
    ],
)
def test_cut_of_a_row_is_the_parsed_fragment(
    full: str, first: int, length: int, fragment: str
) -> None:
    """Cutting a run of the top row gives the very graph the parser builds for that run."""
    whole, part = _graph(full), _graph(fragment)
    nodes, parent, pos = cut_children(whole.parents, whole.positions, _row(whole), first, length)
    assert nodes.size == part.num_nodes
    assert _columns(whole, nodes) == _columns(part, np.arange(part.num_nodes))
    assert parent.tolist() == part.parents.tolist()
    assert pos.tolist() == part.positions.tolist()


def test_cut_refuses_a_run_the_node_does_not_have() -> None:
    graph = _graph("a + b")
    with pytest.raises(CorpusError, match="children"):
        cut_children(graph.parents, graph.positions, _row(graph), 2, 5)


def test_crops_are_well_formed_trees_inside_their_bounds() -> None:
    vocab = default_vocabulary()
    containers = container_tags(vocab)
    rng = np.random.default_rng(0)
    made = 0
    for graph in _sample_graphs():
        for _ in range(5):
            crop = crop_tree(
                graph.parents, graph.tag_ids, graph.positions, containers, rng, min_nodes=6
            )
            if crop is None:
                continue
            made += 1
            nodes, parent, pos = crop
            assert 6 <= nodes.size <= 0.9 * graph.num_nodes
            assert nodes[0] == 0 and np.all(np.diff(nodes) > 0)  # root first, pre-order kept
            assert parent[0] == -1 and np.all(parent[1:] < np.arange(1, nodes.size))
            assert np.all(parent[1:] >= 0)
            # every kept node keeps its own features; children of one parent are numbered
            # 0, 1, 2, ... in order
            for node in np.unique(parent[parent >= 0]):
                assert pos[parent == node].tolist() == list(range(int((parent == node).sum())))
    assert made > 50  # most sample equations have a row to cut


def test_crop_gives_none_without_a_container() -> None:
    graph = _graph("x")
    rng = np.random.default_rng(0)
    assert crop_tree(graph.parents, graph.tag_ids, graph.positions, {10_000}, rng) is None


def test_container_tags_needs_one_known_tag() -> None:
    with pytest.raises(CorpusError, match="container"):
        container_tags(Vocabulary(["#text", "mi"], [], ["x"]))


def test_packed_with_crops_replaces_only_the_cropped_slots() -> None:
    graphs = _sample_graphs()[:6]
    packed = PackedCorpus(
        tag=np.concatenate([g.tag_ids for g in graphs]).astype(np.int32),
        attr=np.concatenate([g.attr_ids for g in graphs]).astype(np.int32),
        char=np.concatenate([g.char_ids for g in graphs]).astype(np.int32),
        pos=np.concatenate([g.positions for g in graphs]).astype(np.int32),
        parent=np.concatenate([g.parents for g in graphs]).astype(np.int32),
        offsets=np.concatenate(([0], np.cumsum([g.num_nodes for g in graphs]))),
        vocab_hash="x",
    )
    g = graphs[3]
    crop = cut_children(g.parents, g.positions, _row(g), 0, 1)
    order = np.array([3, 1, 3])
    out = packed_with_crops(packed, order, {0: crop})
    assert out.num_nodes.tolist() == [crop[0].size, graphs[1].num_nodes, g.num_nodes]
    start = int(out.offsets[0])
    assert out.tag[start : start + crop[0].size].tolist() == g.tag_ids[crop[0]].tolist()
    assert out.parent[: crop[0].size].tolist() == crop[1].tolist()
    assert out.pos[: crop[0].size].tolist() == crop[2].tolist()
    last = int(out.offsets[2])
    assert out.parent[last:].tolist() == g.parents.tolist()
    batch = out.batch(np.arange(3))
    assert batch.num_graphs == 3
