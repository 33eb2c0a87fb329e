r"""Triplet margin loss on inner-product similarities (KDD 2020 eq. 1; ECML 2019 eq. 3).

KDD 2020, section 4.2, eq. 1 (margin :math:`\Delta`, usually 1):

.. math::

    \ell_t(x, x^+, x^-) = \max\big(0,\ \Delta - \langle \bar\phi(x), \bar\phi(x^+) \rangle
        + \langle \bar\phi(x), \bar\phi(x^-) \rangle\big)

ECML 2019, section 4.2, eq. 3 (Balntas et al.'s anchor swap: the positive takes the anchor's
role when that gives the larger loss):

.. math::

    \ell_{tri}(x, x_+, x_-) = \max\big(0,\
        \Delta - \langle f(x), f(x_+) \rangle + \langle f(x), f(x_-) \rangle,\
        \Delta - \langle f(x_+), f(x) \rangle + \langle f(x_+), f(x_-) \rangle\big)

i.e. the harder (more similar) of :math:`\langle x, x_- \rangle` and :math:`\langle x_+, x_-
\rangle`. ECML 2019 trains with the squared hinge :math:`\ell_{tri}^2` (Janocha & Czarnecki).
Both seeds score pairs by inner products (the embeddings are L2- or soft-normalised), not by
distances; the loss is averaged over the batch.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor, nn

from mathsearch.encoders.losses.histogram_loss import Similarity, pair_similarity

logger = logging.getLogger(__name__)

__all__ = ["TripletLoss", "triplet_loss_fn"]


def triplet_loss_fn(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    *,
    swap: bool = False,
    squared: bool = False,
    similarity: Similarity = "inner",
) -> Tensor:
    r"""Mean triplet margin loss over a batch (KDD 2020 eq. 1, ECML 2019 eq. 3).

    Per triplet ``i``: :math:`\max(0, \Delta - \langle a_i, p_i \rangle + \langle a_i, n_i
    \rangle)`; with ``swap`` the negative term is :math:`\max(\langle a_i, n_i \rangle,
    \langle p_i, n_i \rangle)`; with ``squared`` the hinge is squared. Then the batch mean.

    Args:
        anchor: ``(B, d)`` embeddings of the anchors ``x``.
        positive: ``(B, d)`` embeddings of the positives ``x+``.
        negative: ``(B, d)`` embeddings of the negatives ``x-``.
        margin: :math:`\Delta`, default 1.0 (both seeds).
        swap: ECML 2019 anchor/positive swap, default False.
        squared: squared hinge (ECML 2019), default False.
        similarity: ``"inner"`` (default, the seeds) or ``"cosine"``.

    Returns:
        A scalar tensor.

    Raises:
        ValueError: on shapes other than three equal ``(B, d)`` or ``B == 0``.

    Example (``<a,p> = 0``, ``<a,n> = 0``, ``<p,n> = 1``):
        >>> import torch
        >>> a, p = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
        >>> n = torch.tensor([[0.0, 1.0]])
        >>> float(triplet_loss_fn(a, p, n))
        1.0
        >>> float(triplet_loss_fn(a, p, n, swap=True, squared=True))
        4.0
    """
    if anchor.shape != negative.shape:
        raise ValueError(
            f"anchor and negative shapes differ: {tuple(anchor.shape)} vs {tuple(negative.shape)}"
        )
    if anchor.dim() != 2 or anchor.shape[0] == 0:
        raise ValueError(f"expected non-empty (B, d) embeddings, got {tuple(anchor.shape)}")
    pos_sim = pair_similarity(anchor, positive, similarity)
    neg_sim = pair_similarity(anchor, negative, similarity)
    if swap:
        neg_sim = torch.maximum(neg_sim, pair_similarity(positive, negative, similarity))
    hinge = torch.clamp(margin - pos_sim + neg_sim, min=0.0)
    if squared:
        hinge = hinge * hinge
    return hinge.mean()


class TripletLoss(nn.Module):
    """Module form of :func:`triplet_loss_fn`.

    Args:
        margin: :math:`\\Delta`, default 1.0.
        swap: ECML 2019 anchor swap, default False.
        squared: squared hinge, default False.
        similarity: ``"inner"`` (default) or ``"cosine"``.

    Example:
        >>> import torch
        >>> loss = TripletLoss(swap=True)
        >>> a = torch.tensor([[1.0, 0.0]])
        >>> float(loss(a, torch.tensor([[1.0, 0.0]]), torch.tensor([[-1.0, 0.0]])))
        0.0
    """

    def __init__(
        self,
        margin: float = 1.0,
        swap: bool = False,
        squared: bool = False,
        similarity: Similarity = "inner",
    ) -> None:
        super().__init__()
        if similarity not in ("inner", "cosine"):
            raise ValueError(f"unknown similarity {similarity!r}; expected 'inner' or 'cosine'")
        self.margin = margin
        self.swap = swap
        self.squared = squared
        self.similarity: Similarity = similarity

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """Mean loss of ``(B, d)`` anchor, positive and negative embeddings; a scalar tensor."""
        return triplet_loss_fn(
            anchor,
            positive,
            negative,
            self.margin,
            swap=self.swap,
            squared=self.squared,
            similarity=self.similarity,
        )

    def extra_repr(self) -> str:
        return (
            f"margin={self.margin}, swap={self.swap}, squared={self.squared}, "
            f"similarity={self.similarity!r}"
        )
