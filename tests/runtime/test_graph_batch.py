"""mathsearch.runtime.graph_batch: numpy packing equals torch-geometric's collate; bad input is
refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mathsearch.encoders.graph_data import collate
from mathsearch.runtime.errors import ModelMismatchError, RuntimeInputError
from mathsearch.runtime.graph_batch import INPUT_NAMES, pack_graphs
from tests.export.conftest import real_graphs


def _edge_set(edge_index: np.ndarray) -> set[tuple[int, int]]:
    return set(map(tuple, edge_index.T.tolist()))


def test_pack_equals_collate_on_real_equations() -> None:
    graphs = list(real_graphs()[:50])
    packed = pack_graphs(graphs)
    batch = collate(graphs)
    assert packed.num_graphs == 50
    assert packed.num_nodes == batch.num_nodes == sum(g.num_nodes for g in graphs)
    for name, attr in (("tag", "x_tag"), ("attr", "x_attr"), ("char", "x_char"), ("pos", "pos")):
        assert np.array_equal(getattr(packed, name), getattr(batch, attr).numpy()), name
    assert np.array_equal(packed.batch_index, batch.batch.numpy())
    assert np.array_equal(packed.ptr, batch.ptr.numpy())
    assert packed.edge_index.shape == tuple(batch.edge_index.shape)
    assert _edge_set(packed.edge_index) == _edge_set(batch.edge_index.numpy())
    feeds = packed.feeds()
    assert tuple(feeds) == INPUT_NAMES
    assert all(a.dtype == np.int64 for a in feeds.values())


def test_edges_point_inside_their_own_graph() -> None:
    packed = pack_graphs(list(real_graphs()[:20]))
    source, target = packed.edge_index
    assert np.array_equal(packed.batch_index[source], packed.batch_index[target])
    # a tree: every node but each graph's root receives exactly one top-down edge
    down = packed.edge_index[:, : packed.edge_index.shape[1] // 2]
    assert np.bincount(down[1], minlength=packed.num_nodes).max() == 1
    assert packed.edge_index.shape[1] == 2 * (packed.num_nodes - packed.num_graphs)


def test_single_node_graph() -> None:
    graph = real_graphs()[0]
    single = replace(
        graph,
        tag_ids=graph.tag_ids[:1],
        attr_ids=graph.attr_ids[:1],
        char_ids=graph.char_ids[:1],
        positions=graph.positions[:1],
        parents=np.array([-1], dtype=graph.parents.dtype),
    )
    packed = pack_graphs([single, graph])
    assert packed.ptr.tolist() == [0, 1, 1 + graph.num_nodes]
    assert packed.edge_index.min() >= 1  # the lone node has no edges


def test_refuses_bad_input() -> None:
    graph = real_graphs()[0]
    with pytest.raises(RuntimeInputError, match="at least one"):
        pack_graphs([])
    with pytest.raises(ModelMismatchError, match="vocabulary"):
        pack_graphs([graph], vocab_hash="0" * 64)
    with pytest.raises(ModelMismatchError, match="graph 1"):
        pack_graphs([graph, replace(graph, vocab_hash="f" * 64)])
    with pytest.raises(RuntimeInputError, match="char ids outside"):
        pack_graphs([graph], sizes=(32, 32, int(graph.char_ids.max())))
