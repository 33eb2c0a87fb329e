"""Equation graphs as torch-geometric data (KDD 2020 seed, sections 3.2 and 4.1).

:class:`~mathsearch.indexer.mathml_graph.EquationGraph` (numpy, torch-free) becomes a
:class:`torch_geometric.data.Data` with integer node ids, not the dense features, so a batch
stays small and the masking task (section 4.2) can blank a node by setting its ids to "none":

==============  ============  ==============================================================
attribute       shape, dtype  meaning
==============  ============  ==============================================================
``x_tag``       (N,) long     tag slot in ``[0, 32)`` (-1 only for a masked node)
``x_attr``      (N,) long     attribute slot in ``[0, 32)``, -1 = none
``x_char``      (N,) long     character slot in ``[0, 192)``, -1 = none
``pos``         (N,) long     position among the parent's children, capped at 255
``edge_index``  (2, E) long   parent -> child edges, then child -> parent (E = 2 (N - 1))
``edge_type``   (E,) long     1 top-down, 0 bottom-up (the augmentation finds ``mi`` leaves)
``vocab_hash``  str           the vocabulary the ids belong to
==============  ============  ==============================================================

The dense node features of section 3.2 are rebuilt on the fly by :func:`one_hot`: for a node with
tag ``t``, attribute ``a`` and character ``c`` the 256-d row is

    X_i = [onehot_32(t) | onehot_32(a) | onehot_192(c)],  onehot(-1) = 0

(equal to :meth:`EquationGraph.features`). :func:`collate` batches graphs with
``Batch.from_data_list``, which offsets ``edge_index`` and adds ``batch`` (N,) and ``ptr`` (B + 1,).

Example::

    graphs = [featuriser.parse_latex(tex).graph for tex in ("x^2", r"\\frac{a}{b}")]
    batch = collate(graphs)            # Batch with x_tag, ..., batch, ptr
    x = one_hot(batch)                 # (N, 256) float32
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
import torch.nn.functional as F  # noqa: N812 - the usual alias
from torch import Tensor
from torch_geometric.data import Batch, Data

from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.vocabulary import DEFAULT_SIZES

logger = logging.getLogger(__name__)

__all__ = ["EncoderInputError", "collate", "one_hot", "one_hot_ids", "to_data"]


class EncoderInputError(ValueError):
    """An encoder got input it cannot use (empty batch, mixed vocabularies, bad shapes)."""


def to_data(graph: EquationGraph) -> Data:
    """One equation graph as a :class:`Data` with long id tensors (see the module docstring).

    Args:
        graph: the featurised equation (``mathsearch.indexer.mathml_graph``).

    Returns:
        ``Data(x_tag, x_attr, x_char, pos, edge_index, edge_type, vocab_hash, num_nodes)``.

    Example::

        data = to_data(featuriser.parse_latex("x^2").graph)
        data.x_tag.shape   # (N,)
    """
    n = graph.num_nodes
    if n < 1:
        raise EncoderInputError("an equation graph needs at least one node")
    return Data(
        x_tag=torch.from_numpy(graph.tag_ids.astype("int64")),
        x_attr=torch.from_numpy(graph.attr_ids.astype("int64")),
        x_char=torch.from_numpy(graph.char_ids.astype("int64")),
        pos=torch.from_numpy(graph.positions.astype("int64")),
        edge_index=torch.from_numpy(graph.edge_index()),
        edge_type=torch.from_numpy(graph.edge_type()),
        vocab_hash=graph.vocab_hash,
        num_nodes=n,
    )


def collate(graphs: Sequence[EquationGraph]) -> Batch:
    """A :class:`Batch` of graphs that share one vocabulary (hash and sizes).

    Args:
        graphs: one or more equation graphs.

    Returns:
        the disjoint union: node tensors concatenated, ``edge_index`` offset per graph, plus
        ``batch`` (N,) and ``ptr`` (B + 1,); ``vocab_hash`` is a list of B equal strings.

    Raises:
        EncoderInputError: for an empty sequence or graphs from different vocabularies.
    """
    if not graphs:
        raise EncoderInputError("collate needs at least one graph")
    first = graphs[0]
    for graph in graphs:
        if graph.vocab_hash != first.vocab_hash or tuple(graph.sizes) != tuple(first.sizes):
            raise EncoderInputError(
                f"graphs from different vocabularies in one batch "
                f"({first.vocab_hash[:12]} {first.sizes} vs {graph.vocab_hash[:12]} {graph.sizes})"
            )
    return Batch.from_data_list([to_data(graph) for graph in graphs])


def one_hot_ids(
    tag: Tensor,
    attr: Tensor,
    char: Tensor,
    sizes: tuple[int, int, int] = DEFAULT_SIZES,
) -> Tensor:
    """Dense ``(N, sum(sizes))`` float32 features from three ``(N,)`` id tensors; -1 -> zeros.

    ``F.one_hot(id + 1, size + 1)[:, 1:]`` maps id -1 to the dropped column 0, so "none" (and a
    masked node) is an all-zero segment without any data-dependent branching.
    """
    segments = [
        F.one_hot(ids.long() + 1, size + 1)[:, 1:]
        for ids, size in zip((tag, attr, char), sizes, strict=True)
    ]
    return torch.cat(segments, dim=1).to(torch.float32)


def one_hot(data: Data, sizes: tuple[int, int, int] = DEFAULT_SIZES) -> Tensor:
    """The 256-d node features of section 3.2 for a :class:`Data` or :class:`Batch`.

    Args:
        data: has ``x_tag``, ``x_attr``, ``x_char`` (N,) long.
        sizes: slots per segment (tag, attribute, character); default (32, 32, 192).

    Returns:
        ``(N, sum(sizes))`` float32; equals ``EquationGraph.features()`` for an unmasked graph.

    Raises:
        EncoderInputError: when an id does not fit its segment.
    """
    for name, size in zip(("x_tag", "x_attr", "x_char"), sizes, strict=True):
        ids = getattr(data, name)
        if ids.numel() and (int(ids.min()) < -1 or int(ids.max()) >= size):
            raise EncoderInputError(f"{name} outside [-1, {size}); wrong sizes {sizes}?")
    return one_hot_ids(data.x_tag, data.x_attr, data.x_char, sizes)
