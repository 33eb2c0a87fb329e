"""Many equation graphs packed into one disjoint union of numpy arrays (no torch).

The ONNX graph CNN takes the node ids, not the dense one-hot features (the model builds those
itself), so a packed batch of ``B`` graphs with ``N`` nodes in all is:

===============  ===========  ================================================================
name             shape        meaning
===============  ===========  ================================================================
``tag``          (N,) int64   tag slot, ``[0, 32)``
``attr``         (N,) int64   attribute slot, -1 = none
``char``         (N,) int64   character slot, -1 = none
``pos``          (N,) int64   position among the parent's children
``edge_index``   (2, E) int64 parent -> child then child -> parent, offset per graph
``batch_index``  (N,) int64   graph of each node (sorted)
``ptr``          (B+1,) int64 node offsets: graph g owns nodes ``ptr[g]:ptr[g+1]``
===============  ===========  ================================================================

This is what :func:`mathsearch.encoders.graph_data.collate` builds with torch-geometric, computed
with a few
vectorised numpy operations instead (the parity check compares the two paths end to end).

Example::

    packed = pack_graphs([featuriser.parse_latex(t).graph for t in ("x^2", "a+b")])
    packed.num_graphs, packed.num_nodes   # (2, ...)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.runtime.errors import ModelMismatchError, RuntimeInputError

__all__ = ["INPUT_NAMES", "PackedGraphs", "pack_graphs"]

#: The ONNX input names, in the order of the exported model's inputs.
INPUT_NAMES = ("tag", "attr", "char", "pos", "edge_index", "batch_index", "ptr")


@dataclass(frozen=True)
class PackedGraphs:
    """A batch of graphs as the ONNX model's inputs (see the module docstring)."""

    tag: np.ndarray
    attr: np.ndarray
    char: np.ndarray
    pos: np.ndarray
    edge_index: np.ndarray
    batch_index: np.ndarray
    ptr: np.ndarray

    @property
    def num_graphs(self) -> int:
        return int(self.ptr.shape[0]) - 1

    @property
    def num_nodes(self) -> int:
        return int(self.tag.shape[0])

    def feeds(self) -> dict[str, np.ndarray]:
        """``{input name: array}`` for ``InferenceSession.run``."""
        return {name: getattr(self, name) for name in INPUT_NAMES}


def pack_graphs(
    graphs: Sequence[EquationGraph],
    vocab_hash: str | None = None,
    sizes: Sequence[int] | None = None,
) -> PackedGraphs:
    """Pack ``graphs`` into one disjoint union.

    Args:
        graphs: one or more featurised equations.
        vocab_hash: when given, every graph must have been featurised with this vocabulary.
        sizes: when given, the (tag, attribute, character) slot counts the ids must fit.

    Raises:
        RuntimeInputError: no graphs, an empty graph, or an id outside its slot range.
        ModelMismatchError: a graph from another vocabulary than ``vocab_hash``.
    """
    if not graphs:
        raise RuntimeInputError("pack_graphs needs at least one graph")
    counts = np.fromiter((g.num_nodes for g in graphs), dtype=np.int64, count=len(graphs))
    if counts.min() < 1:
        raise RuntimeInputError(f"graph {int(np.argmin(counts))} has no nodes")
    expected = vocab_hash if vocab_hash is not None else graphs[0].vocab_hash
    for index, graph in enumerate(graphs):
        if graph.vocab_hash != expected:
            raise ModelMismatchError(
                f"graph {index} was featurised with vocabulary {graph.vocab_hash[:12]}, "
                f"the model expects {expected[:12]}"
            )
    ptr = np.zeros(len(graphs) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    columns = _columns(graphs)
    batch_index = np.repeat(np.arange(len(graphs), dtype=np.int64), counts)
    parents = columns.pop("parents")
    child = np.flatnonzero(parents >= 0)
    parent = parents[child] + ptr[batch_index[child]]
    down = np.stack((parent, child))
    edge_index = np.concatenate((down, down[::-1]), axis=1)
    if sizes is not None:
        for name, size in zip(("tag", "attr", "char"), sizes, strict=True):
            ids = columns[name]
            low = 0 if name == "tag" else -1
            if ids.min() < low or ids.max() >= size:
                raise RuntimeInputError(f"{name} ids outside [{low}, {size})")
    return PackedGraphs(
        tag=columns["tag"],
        attr=columns["attr"],
        char=columns["char"],
        pos=columns["pos"],
        edge_index=np.ascontiguousarray(edge_index),
        batch_index=batch_index,
        ptr=ptr,
    )


def _columns(graphs: Sequence[EquationGraph]) -> dict[str, np.ndarray]:
    names = (
        ("tag", "tag_ids"),
        ("attr", "attr_ids"),
        ("char", "char_ids"),
        ("pos", "positions"),
        ("parents", "parents"),
    )
    return {
        name: np.concatenate([getattr(g, attr) for g in graphs]).astype(np.int64, copy=False)
        for name, attr in names
    }
