"""The masking task of the KDD 2020 seed (section 4.2, "Masking Task").

For each graph ``x`` with features ``X``, 15% of the nodes get an all-zero feature vector (graph
``x_■``); from the node states ``phi_i(x_■)`` (512-d, :meth:`GraphCNN.node_states`) three linear
soft-max classifiers predict the hidden tag (32 classes), attribute (32 + 1, the last = "no
attribute") and character (192 + 1, the last = "no character")::

    l_tag,i  = CE(softmax(W_tag  phi_i(x_■) + b_tag),  X_i,1:32)
    l_attr,i = CE(softmax(W_attr phi_i(x_■) + b_attr), X_i,33:64)
    l_char,i = CE(softmax(W_char phi_i(x_■) + b_char), X_i,65:256)
    l_mask,i = (l_tag,i + l_attr,i + l_char,i) / 3

and the loss of ``x_■`` is the mean of ``l_mask,i`` over the masked nodes (:func:`masking_loss`).

Masking sets a node's three id tensors to -1, so :func:`mathsearch.encoders.graph_data.one_hot`
gives an
all-zero row (its position is kept: it is not part of ``X`` in section 3.2). The count per graph
is ``floor(rate * n_g + u)`` with ``u ~ U[0, 1)`` (stochastic rounding: exactly ``rate`` of the
nodes in expectation, also for graphs of 3 nodes), the nodes drawn uniformly within the graph.

Example::

    masked, mask, targets = mask_nodes(batch, rate=0.15, generator=torch.Generator().manual_seed(0))
    heads = MaskingHeads(hidden=512)
    loss = masking_loss(heads(model.node_states(masked), mask), targets)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch_geometric.data import Data

from mathsearch.encoders.gcn import bucketed_linear
from mathsearch.encoders.graph_data import EncoderInputError
from mathsearch.encoders.losses.masking_loss import masked_feature_loss_fn
from mathsearch.indexer.vocabulary import DEFAULT_SIZES

logger = logging.getLogger(__name__)

__all__ = ["MaskLogits", "MaskTargets", "MaskingHeads", "mask_nodes", "masking_loss"]


@dataclass
class MaskTargets:
    """Class targets of the masked nodes, each (M,) long, in mask order (ascending node index).

    ``tag`` in [0, 32); ``attr`` in [0, 33) and ``char`` in [0, 193), where the last class
    (32, resp. 192) means "none".
    """

    tag: Tensor
    attr: Tensor
    char: Tensor


@dataclass
class MaskLogits:
    """Logits of the masked nodes: ``tag`` (M, 32), ``attr`` (M, 33), ``char`` (M, 193)."""

    tag: Tensor
    attr: Tensor
    char: Tensor


def _graph_index(data: Data) -> tuple[Tensor, Tensor]:
    n = int(data.x_tag.size(0))
    batch_index = getattr(data, "batch", None)
    ptr = getattr(data, "ptr", None)
    if batch_index is None or ptr is None:
        return torch.zeros(n, dtype=torch.long), torch.tensor([0, n], dtype=torch.long)
    return batch_index.cpu(), ptr.cpu()


def mask_nodes(
    data: Data,
    rate: float = 0.15,
    generator: torch.Generator | None = None,
    sizes: tuple[int, int, int] = DEFAULT_SIZES,
) -> tuple[Data, Tensor, MaskTargets]:
    """Hide ``rate`` of the nodes of every graph (section 4.2).

    Args:
        data: a :class:`Data` or :class:`Batch` from :mod:`mathsearch.encoders.graph_data` (not
        modified).
        rate: fraction of nodes to mask per graph, in [0, 1].
        generator: a CPU ``torch.Generator`` for reproducible masks.
        sizes: segment sizes; ``sizes[1]`` and ``sizes[2]`` are the "none" classes.

    Returns:
        ``(masked, mask, targets)``: a copy whose masked nodes have ``x_tag = x_attr = x_char =
        -1``; ``mask`` (N,) bool; :class:`MaskTargets` of the masked nodes (original ids, -1
        mapped to the "none" class).

    Raises:
        EncoderInputError: for a rate outside [0, 1] or a node that is already masked.
    """
    if not 0.0 <= rate <= 1.0:
        raise EncoderInputError(f"masking rate {rate} not in [0, 1]")
    batch_index, ptr = _graph_index(data)
    n = int(batch_index.size(0))
    counts = ptr[1:] - ptr[:-1]
    # per graph: how many nodes (stochastic rounding), and which (random rank within the graph)
    jitter = torch.rand(counts.size(0), generator=generator, dtype=torch.float64)
    take = torch.floor(rate * counts.to(torch.float64) + jitter).long().clamp(max=counts)
    scores = torch.rand(n, generator=generator, dtype=torch.float64)
    order = torch.argsort(batch_index.to(torch.float64) + scores)  # graphs stay contiguous
    rank = torch.empty(n, dtype=torch.long)
    rank[order] = torch.arange(n) - ptr[batch_index[order]]
    mask = (rank < take[batch_index]).to(data.x_tag.device)

    tag, attr, char = data.x_tag, data.x_attr, data.x_char
    if bool((tag[mask] < 0).any()):
        raise EncoderInputError("a node to mask has no tag (is it masked already?)")
    targets = MaskTargets(
        tag=tag[mask].clone(),
        attr=torch.where(attr[mask] < 0, sizes[1], attr[mask]),
        char=torch.where(char[mask] < 0, sizes[2], char[mask]),
    )
    masked = data.clone()
    none = torch.full_like(tag, -1)
    masked.x_tag = torch.where(mask, none, tag)
    masked.x_attr = torch.where(mask, none, attr)
    masked.x_char = torch.where(mask, none, char)
    logger.debug("masked %d of %d nodes", int(mask.sum()), n)
    return masked, mask, targets


class MaskingHeads(nn.Module):
    """Three linear heads on the node states: tag ``sizes[0]``, attribute ``sizes[1] + 1`` and
    character ``sizes[2] + 1`` classes (32, 33, 193 by default); soft-max is in the loss.

    Args:
        hidden: width of the node states (512).
        sizes: segment sizes of the one-hot features.
    """

    def __init__(self, hidden: int = 512, sizes: tuple[int, int, int] = DEFAULT_SIZES) -> None:
        super().__init__()
        self.tag = nn.Linear(hidden, sizes[0])
        self.attr = nn.Linear(hidden, sizes[1] + 1)
        self.char = nn.Linear(hidden, sizes[2] + 1)

    def forward(self, node_states: Tensor, mask: Tensor | None = None) -> MaskLogits:
        """Logits for the rows of ``node_states`` (N, hidden) selected by ``mask`` (N,) bool
        (all rows when None)."""
        states = node_states if mask is None else node_states[mask]
        return MaskLogits(
            bucketed_linear(self.tag, states),
            bucketed_linear(self.attr, states),
            bucketed_linear(self.char, states),
        )


def masking_loss(logits: MaskLogits, targets: MaskTargets) -> Tensor:
    """Mean over masked nodes of ``(l_tag + l_attr + l_char) / 3`` (section 4.2).

    The bundled form of :func:`mathsearch.encoders.losses.masked_feature_loss_fn` (targets here
    already
    use the "none" classes 32 and 192); a zero still connected to the logits when nothing was
    masked.
    """
    return masked_feature_loss_fn(
        logits.tag, logits.attr, logits.char, targets.tag, targets.attr, targets.char
    )
