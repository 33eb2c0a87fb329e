"""mathsearch.encoders.graph_data: EquationGraph -> Data / Batch, and the one-hot features of
section 3.2."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch

from mathsearch.encoders.graph_data import EncoderInputError, collate, one_hot, one_hot_ids, to_data
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord


@lru_cache(maxsize=1)
def _sample_graphs() -> tuple[EquationGraph, ...]:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    parsed = Featuriser().parse_batch(records[:24])
    return tuple(p.graph for p in parsed if isinstance(p, ParsedEquation))


def test_to_data_fields_and_dtypes() -> None:
    graph = _sample_graphs()[0]
    data = to_data(graph)
    n = graph.num_nodes
    for name in ("x_tag", "x_attr", "x_char", "pos"):
        assert getattr(data, name).dtype == torch.long
        assert getattr(data, name).shape == (n,)
    assert data.x_tag.tolist() == graph.tag_ids.tolist()
    assert data.x_attr.tolist() == graph.attr_ids.tolist()  # -1 kept
    assert data.x_char.tolist() == graph.char_ids.tolist()
    assert data.pos.tolist() == graph.positions.tolist()
    assert data.edge_index.dtype == torch.long
    assert data.edge_index.shape == (2, 2 * (n - 1))
    assert data.edge_index.tolist() == graph.edge_index().tolist()
    assert data.edge_type.tolist() == graph.edge_type().tolist()
    assert data.num_nodes == n
    assert data.vocab_hash == graph.vocab_hash


def test_one_hot_equals_indexer_features() -> None:
    for graph in _sample_graphs()[:8]:
        dense = one_hot(to_data(graph))
        assert dense.dtype == torch.float32
        assert np.array_equal(dense.numpy(), graph.features())


def test_one_hot_none_is_a_zero_segment() -> None:
    rows = one_hot_ids(
        torch.tensor([2, -1]), torch.tensor([-1, -1]), torch.tensor([5, -1]), sizes=(4, 3, 6)
    )
    assert rows.tolist() == [
        [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],  # tag 2 | none | char 5
        [0] * 13,
    ]


def test_one_hot_rejects_ids_outside_the_segment() -> None:
    data = to_data(_sample_graphs()[0])
    data.x_char = data.x_char.clone()
    data.x_char[0] = 192
    with pytest.raises(EncoderInputError):
        one_hot(data)


def test_collate_offsets_edges_and_builds_batch_vector() -> None:
    graphs = _sample_graphs()[:5]
    batch = collate(graphs)
    sizes = [g.num_nodes for g in graphs]
    assert batch.num_graphs == 5
    assert batch.ptr.tolist() == np.concatenate(([0], np.cumsum(sizes))).tolist()
    assert batch.batch.tolist() == np.repeat(np.arange(5), sizes).tolist()
    offset = sizes[0]
    second = batch.edge_index[:, 2 * (sizes[0] - 1) : 2 * (sizes[0] - 1) + 2 * (sizes[1] - 1)]
    assert (second - offset).tolist() == graphs[1].edge_index().tolist()
    assert np.array_equal(one_hot(batch).numpy(), np.concatenate([g.features() for g in graphs]))
    assert batch.vocab_hash == [g.vocab_hash for g in graphs]


def test_collate_rejects_empty_and_mixed_vocabularies() -> None:
    with pytest.raises(EncoderInputError):
        collate([])
    graph = _sample_graphs()[0]
    other = EquationGraph(
        graph.tag_ids, graph.attr_ids, graph.char_ids, graph.positions, graph.parents, "other"
    )
    with pytest.raises(EncoderInputError, match="different vocabularies"):
        collate([graph, other])
