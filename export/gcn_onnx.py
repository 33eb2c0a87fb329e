"""ONNX export of the graph CNN (:class:`mathsearch.encoders.gcn.GraphCNN`), node ids in, embeddings
out.

The exported graph takes the packed id arrays of :mod:`mathsearch.runtime.graph_batch` (no dense
features)
and computes exactly the eval-mode :meth:`GraphCNN.embed_tensors`:

* first layer: ``W^(1) x_j`` for a one-hot ``x_j`` is the sum of three columns of ``W^(1)``, so
  it is computed as three row lookups in ``[W^(1)T ; 0]`` (the extra zero row stands for "none",
  id -1) instead of a product with the 256-d one-hot matrix: same sums, a seventh of the FLOPs;
* neighbourhood sums: :func:`planned_aggregate` over an :func:`aggregation_plan` computed once
  per call from ``edge_index`` and shared by every layer (and every tower of an ensemble).
  Each node's first :data:`SLOTS` in-edges are gathered row by row (``Gather`` + ``Add``); the
  in-edges past them (22% of a hep-th batch's edges, at 16% of its nodes) go through
  :func:`segment_sum` for the few nodes that have them. Scatter formulations are the known trap
  of GNN exports (pyg-team/pytorch_geometric#6000, pytorch/pytorch#147617), and both that ONNX
  Runtime offers fail here: ``ScatterElements`` with ``reduction="add"`` (what ``scatter_add``
  exports to) is exact but element-wise and took 90% of a run (6.4 of 7.1 s for 256 equations
  on 2 shared cores); the row-wise ``ScatterND`` with ``reduction="add"`` is fast but, with
  more than one intra-op thread, loses updates to duplicate indices (onnxruntime 1.31: errors
  up to 2.9 on random data). The plan writes integers only, each slot once;
* :func:`segment_sum` (also the mean pooling): a sorted segment sum through a blocked
  cumulative sum (ONNX ``TopK`` + ``CumSum`` + ``Gather``), as exact as summing 64 float32
  numbers. It was the whole aggregation until the slots took the common case: on 2,048 hep-th
  equations the shipped towers embed 1.16-1.25x faster with the slots
  (docs/export.md, "The slot aggregation");
* mean pooling (or the gate-weighted mean of ``pooling="gated"``) after the (linear)
  projection to 64 dimensions, which commutes with it;
* batch normalisation and the soft normalisation with their running statistics (eval mode), or
  the L2 normalisation of a ``normalisation="l2"`` model.

Dynamic axes: ``N`` nodes, ``E`` edges and ``B + 1`` graph offsets; the number of graphs comes
from ``ptr``'s shape. The file is written with opset 17 and IR version 8 (onnx 1.23 would write
IR 14 by default, which onnxruntime 1.31 refuses), checked with ``onnx.checker``.

Example::

    model = load_model("runs/gcn/checkpoint.pt")[0]
    export_gcn(model, "gcn-v1.onnx")
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path
from typing import NamedTuple, cast

import torch
from torch import Tensor, nn

from mathsearch.encoders.gcn import GraphCNN, SumGraphConv
from mathsearch.encoders.gcn_ensemble import GCNEnsemble, ensemble_embed
from mathsearch.export.onnx_file import IR_VERSION, OPSET, write_onnx
from mathsearch.runtime.graph_batch import INPUT_NAMES

logger = logging.getLogger(__name__)

__all__ = [
    "BLOCK",
    "IR_VERSION",
    "OPSET",
    "OUTPUT_NAME",
    "SLOTS",
    "AggregationPlan",
    "GCNEnsembleOnnxModule",
    "GCNOnnxModule",
    "aggregation_plan",
    "export_gcn",
    "planned_aggregate",
    "segment_sum",
]

OUTPUT_NAME = "embedding"
_DYNAMIC = {
    "tag": {0: "N"},
    "attr": {0: "N"},
    "char": {0: "N"},
    "pos": {0: "N"},
    "edge_index": {1: "E"},
    "batch_index": {0: "N"},
    "ptr": {0: "B_plus_1"},
    OUTPUT_NAME: {0: "B"},
}


#: Rows per block of the blocked cumulative sum in :func:`segment_sum`.
BLOCK = 64


def segment_sum(h: Tensor, rows: Tensor, index: Tensor, counts: Tensor) -> Tensor:
    """``out[m] = sum_{k: index[k] = m} h[rows[k]]``, float32 ``(M, F)``, without scatter.

    Args:
        h: (N, F) float node rows.
        rows: (K,) long row of ``h`` for each term.
        index: (K,) long segment of each term, in ``[0, M)``; any order.
        counts: (M,) long terms per segment (``bincount(index)``), which also fixes ``M``.

    The terms are gathered in segment order behind a zero row, so that segment ``m`` is the run
    ``(start_m, end_m]`` of a cumulative sum ``C`` and its sum is ``C[end_m] - C[start_m]``. A
    float32 cumulative sum over all ``K`` terms would lose precision as it grows, so ``C`` is
    blocked: a float32 cumulative sum inside blocks of :data:`BLOCK` rows, plus the float64
    cumulative sum of the block totals, ``C[k] = P[k // BLOCK] + L[k]``. The error is that of
    summing ``BLOCK`` float32 terms; no float64 copy of the terms is made.
    """
    width = h.size(1)
    padded = torch.cat((h.new_zeros((1, width)), h))
    order = torch.cat((index.new_zeros(1), rows.index_select(0, torch.argsort(index)) + 1))
    # pad to whole blocks with references to the zero row (the slice keeps shapes dynamic)
    total = (order.size(0) + BLOCK - 1) // BLOCK * BLOCK
    order = torch.cat((order, order.new_zeros(BLOCK)))[:total]
    local = torch.cumsum(padded.index_select(0, order).view(-1, BLOCK, width), dim=1)
    block_totals = local[:, -1, :].to(torch.float64)
    prefix = torch.cumsum(block_totals, dim=0) - block_totals  # sums of the earlier blocks
    local = local.view(-1, width)
    ends = torch.cumsum(counts, dim=0)
    starts = ends - counts
    blocks = prefix.index_select(0, ends // BLOCK) - prefix.index_select(0, starts // BLOCK)
    inside = local.index_select(0, ends) - local.index_select(0, starts)
    return blocks.to(h.dtype) + inside


#: In-edges per node that :func:`planned_aggregate` gathers directly (a tree node's parent and
#: first child; the median in-degree of a hep-th graph is 2, the 95th percentile 4).
SLOTS = 2


class AggregationPlan(NamedTuple):
    """Where :func:`planned_aggregate` reads each node's in-edges from (N nodes, E edges).

    Attributes:
        slots: (SLOTS * N,) long; entry ``k * N + i`` is the source of node ``i``'s ``k``-th
            in-edge, or ``N`` (a zero row) where it has fewer.
        overflow_rows: (M,) long, the sources of the in-edges past the slots, by target.
        overflow_segments: (M,) long, each one's target among the U targets that have some.
        overflow_counts: (U,) long, in-edges past the slots per such target.
        overflow_of: (N,) long, ``1 +`` a node's index among those U targets, 0 for the others.
    """

    slots: Tensor
    overflow_rows: Tensor
    overflow_segments: Tensor
    overflow_counts: Tensor
    overflow_of: Tensor


def aggregation_plan(edge_index: Tensor, num_nodes: int | Tensor) -> AggregationPlan:
    """The :class:`AggregationPlan` of ``edge_index`` (2, E): row 0 sources, row 1 targets.

    Integer work only: the edges sorted by target (``TopK``), each one's rank among its
    target's, the first :data:`SLOTS` ranks written into their slots (each slot once: the
    other edges go to distinct scratch entries past ``SLOTS * N``), the rest kept as runs.
    """
    source, target = edge_index[0], edge_index[1]
    edges = target.size(0)
    # ``num_nodes`` is a 0-dim tensor while the exporter traces (sizes are tensors then), which
    # torch's factories take as a size or fill value; their stubs allow only ints
    counts = torch.zeros(num_nodes, dtype=torch.long).scatter_add(  # type: ignore[arg-type]
        0, target, torch.ones_like(target)
    )
    order = torch.argsort(target)
    target, source = target.index_select(0, order), source.index_select(0, order)
    rank = torch.arange(edges) - (torch.cumsum(counts, 0) - counts).index_select(0, target)
    inside = rank < SLOTS
    where = torch.where(inside, rank * num_nodes + target, SLOTS * num_nodes + torch.arange(edges))
    size = (SLOTS * num_nodes + edges,)
    slots = torch.full(size, num_nodes, dtype=torch.long)  # type: ignore[arg-type]
    slots = slots.scatter(0, where, source)[: SLOTS * num_nodes]
    past = torch.nonzero(~inside).squeeze(1)
    past_target, past_source = target.index_select(0, past), source.index_select(0, past)
    runs = past_target.size(0)
    # the targets of the sorted rest, one run each: a run starts where the target changes
    starts = past_target != torch.cat((past_target.new_full((1,), -1), past_target))[:runs]
    heads = torch.nonzero(starts).squeeze(1)
    overflowing = past_target.index_select(0, heads)
    return AggregationPlan(
        slots=slots,
        overflow_rows=past_source,
        overflow_segments=torch.cumsum(starts.long(), 0) - 1,
        overflow_counts=torch.cat((heads, heads.new_full((1,), runs)))[1:] - heads,
        overflow_of=torch.zeros(num_nodes, dtype=torch.long).scatter(  # type: ignore[arg-type]
            0, overflowing, torch.arange(1, overflowing.size(0) + 1)
        ),
    )


def planned_aggregate(h: Tensor, plan: AggregationPlan) -> Tensor:
    """``h_i + sum_{(j -> i)} h_j`` (:func:`mathsearch.encoders.gcn.sum_aggregate`) by ``plan``.

    Args:
        h: (N, F) float node rows.
        plan: :func:`aggregation_plan` of the edges.

    Returns:
        (N, F): each row plus its :data:`SLOTS` slotted in-neighbours (one ``Gather`` of N rows
        each) plus the :func:`segment_sum` of its other in-neighbours.
    """
    nodes, width = h.shape
    zero = h.new_zeros((1, width))
    padded = torch.cat((h, zero))
    out = h
    for slot in range(SLOTS):
        out = out + padded.index_select(0, plan.slots[slot * nodes : (slot + 1) * nodes])
    rest = segment_sum(h, plan.overflow_rows, plan.overflow_segments, plan.overflow_counts)
    return out + torch.cat((zero, rest)).index_select(0, plan.overflow_of)


def _mean_pool(h: Tensor, batch_index: Tensor, ptr: Tensor, gate: Tensor | None = None) -> Tensor:
    """Mean of each graph's node rows, as :func:`mathsearch.encoders.gcn.mean_pool`; with a
    ``gate`` (N, 1) the gate-weighted mean of :func:`~mathsearch.encoders.gcn.gated_mean_pool`."""
    counts = ptr[1:] - ptr[:-1]
    nodes = torch.arange(h.size(0), device=h.device)
    if gate is not None:
        sums = segment_sum(h * gate, nodes, batch_index, counts)
        return sums / segment_sum(gate, nodes, batch_index, counts).clamp_min(1e-12)
    sums = segment_sum(h, nodes, batch_index, counts)
    return sums / counts.clamp_min(1).to(h.dtype).unsqueeze(1)


class GCNOnnxModule(nn.Module):
    """The eval-mode graph CNN over node ids (see the module docstring).

    Args:
        model: a trained :class:`GraphCNN`; its parameters and running statistics are shared,
            not copied (except the first layer's lookup table, built at construction).

    Shapes: ``forward(tag, attr, char, pos, edge_index, batch_index, ptr)`` with (N,) ids,
    (2, E) edges, (N,) graph index and (B + 1,) offsets -> (B, out_dim).
    """

    lookup: Tensor
    offsets: Tensor

    def __init__(self, model: GraphCNN) -> None:
        super().__init__()
        self.model = model.eval()
        config = model.config
        weight = model.input_layer.linear.weight.detach()  # (hidden, in_dim)
        table = torch.cat((weight.t(), weight.new_zeros(1, weight.size(0))))
        self.register_buffer("lookup", table.contiguous())
        tag, attr, _ = config.sizes
        self.register_buffer("offsets", torch.tensor([0, tag, tag + attr], dtype=torch.long))
        self.none = config.in_dim

    def _rows(self, ids: Tensor, offset: Tensor) -> Tensor:
        index = torch.where(ids >= 0, ids + offset, torch.full_like(ids, self.none))
        return self.lookup.index_select(0, index)

    def forward(  # noqa: PLR0917 - the ONNX inputs, positional
        self,
        tag: Tensor,
        attr: Tensor,
        char: Tensor,
        pos: Tensor,
        edge_index: Tensor,
        batch_index: Tensor,
        ptr: Tensor,
    ) -> Tensor:
        plan = aggregation_plan(edge_index, tag.size(0))
        return self.embed(tag, attr, char, pos, plan, batch_index, ptr)

    def embed(  # noqa: PLR0917 - forward's inputs with the plan for the edges
        self,
        tag: Tensor,
        attr: Tensor,
        char: Tensor,
        pos: Tensor,
        plan: AggregationPlan,
        batch_index: Tensor,
        ptr: Tensor,
    ) -> Tensor:
        """:meth:`forward` with the edges' :func:`aggregation_plan` already made."""
        model = self.model
        first = self._rows(tag, self.offsets[0]) + self._rows(attr, self.offsets[1])
        first = first + self._rows(char, self.offsets[2])
        positions = pos.clamp(0, model.config.max_position - 1)
        first = first + model.alpha * model.position_table.index_select(0, positions)
        h = torch.relu(planned_aggregate(first, plan) + model.input_layer.bias)
        for norm, layer in zip(model.norms, model.convs, strict=True):
            conv = cast(SumGraphConv, layer)  # GraphCNN's convs are SumGraphConv layers
            h = torch.relu(planned_aggregate(conv.linear(norm(h)), plan) + conv.bias)
        # the mean and the linear projection commute: project the nodes to out_dim first, so
        # the pooling sums 64 columns instead of 512 (same value, an eighth of the work)
        projected = nn.functional.linear(h, model.project.weight)
        # so does the gate-weighted mean (its weights sum to one)
        gate = torch.sigmoid(model.gate(h)) if model.gate is not None else None
        pooled = _mean_pool(projected, batch_index, ptr, gate)
        return model.normalise(pooled + model.project.bias)


class GCNEnsembleOnnxModule(nn.Module):
    """An ensemble of towers (:class:`~mathsearch.encoders.gcn_ensemble.GCNEnsemble`) over node
    ids: every tower's :class:`GCNOnnxModule` on the same inputs, then
    :func:`~mathsearch.encoders.gcn_ensemble.ensemble_embed`. Same inputs and output as
    :class:`GCNOnnxModule`; (B, D) out.
    """

    def __init__(self, model: GCNEnsemble) -> None:
        super().__init__()
        # the ensemble's towers are GraphCNNs (its ModuleList types them as modules)
        self.towers = nn.ModuleList(GCNOnnxModule(cast(GraphCNN, tower)) for tower in model.towers)
        self.mix = model.mix
        self.weights = model.weights

    def forward(self, *inputs: Tensor) -> Tensor:
        """``inputs``: :class:`GCNOnnxModule`'s seven, in its order (one plan for every tower)."""
        tag, attr, char, pos, edge_index, batch_index, ptr = inputs
        plan = aggregation_plan(edge_index, tag.size(0))
        parts = [
            cast(GCNOnnxModule, tower).embed(tag, attr, char, pos, plan, batch_index, ptr)
            for tower in self.towers
        ]
        return ensemble_embed(parts, self.mix.weight, self.mix.bias, self.weights)


def _example_inputs() -> tuple[Tensor, ...]:
    """Two small graphs (3 and 2 nodes) to trace with; every shape is dynamic afterwards."""
    tag = torch.tensor([1, 2, 3, 1, 4])
    attr = torch.tensor([-1, 0, -1, -1, 1])
    char = torch.tensor([-1, 5, 6, -1, 7])
    pos = torch.tensor([0, 0, 1, 0, 0])
    down = torch.tensor([[0, 0, 3], [1, 2, 4]])
    edge_index = torch.cat((down, down.flip(0)), dim=1)
    return tag, attr, char, pos, edge_index, torch.tensor([0, 0, 0, 1, 1]), torch.tensor([0, 3, 5])


def export_gcn(
    model: GraphCNN | GCNEnsemble,
    path: str | os.PathLike[str],
    *,
    metadata: dict[str, str] | None = None,
) -> Path:
    """Write ``model`` (eval mode) as ONNX to ``path``; returns the path.

    Args:
        model: the graph CNN (or an ensemble of them); a CPU copy in eval mode is exported,
            ``model`` is not touched.
        path: the ``.onnx`` file to write (atomically).
        metadata: string key/values stored in the model's ``metadata_props``.

    Raises:
        ExportError: the exporter or the ONNX checker failed.
    """
    # a copy: the exporter restores the wrapper's (training) mode afterwards, which would switch
    # the caller's model to training mode and let its next forward move the running statistics
    copied = copy.deepcopy(model).cpu()
    module: nn.Module
    if isinstance(copied, GCNEnsemble):
        module = GCNEnsembleOnnxModule(copied).eval()
    else:
        module = GCNOnnxModule(copied).eval()
    return write_onnx(
        module,
        _example_inputs(),
        path,
        input_names=INPUT_NAMES,
        output_name=OUTPUT_NAME,
        dynamic_axes=_DYNAMIC,
        what="graph CNN",
        metadata=metadata,
    )
