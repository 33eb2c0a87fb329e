r"""Siamese margin loss on dot products of normalised embeddings (ECML 2019 sec. 4.2, eq. 2).

Mobahi et al.'s Siamese loss as the seed writes it: given a margin :math:`\Delta`, the dot product
of a similar pair (:math:`y = +1`) should exceed :math:`\Delta` and that of a dissimilar pair
(:math:`y = -1`) stay below :math:`-\Delta`:

.. math::

    \ell_{siam}(x_1, x_2, y) = \max\big(0,\ \Delta - y \langle f(x_1), f(x_2) \rangle\big)

trained as the squared hinge :math:`\ell_{siam}^2` (sec. 4.2, after Janocha & Czarnecki) with
:math:`\Delta = 1` (sec. 4.3) and averaged over the batch. With unit-length embeddings and
:math:`\Delta = 1` a pair is never loss-free except at :math:`y \langle\cdot,\cdot\rangle = 1`,
which is the seed's setting (its Table 1 reports losses of about 0.8).
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor, nn

logger = logging.getLogger(__name__)

__all__ = ["SiameseLoss", "siamese_loss_fn"]


def siamese_loss_fn(
    similarity: Tensor, labels: Tensor, margin: float = 1.0, *, squared: bool = True
) -> Tensor:
    r"""Mean of :math:`\max(0, \Delta - y_i s_i)` (squared by default) over pairs (eq. 2).

    Args:
        similarity: ``(B,)`` dot products :math:`\langle f(x_1), f(x_2) \rangle`.
        labels: ``(B,)`` :math:`y = +1` (similar) or :math:`-1` (dissimilar), any float/int dtype.
        margin: :math:`\Delta`, default 1.0 (sec. 4.3).
        squared: squared hinge :math:`\ell_{siam}^2`, default True (sec. 4.2).

    Returns:
        A scalar tensor.

    Raises:
        ValueError: shapes other than two equal non-empty ``(B,)``, or labels not in {-1, +1}.

    Example:
        >>> import torch
        >>> float(siamese_loss_fn(torch.tensor([0.5, 0.5]), torch.tensor([1, -1])))
        1.25
        >>> float(siamese_loss_fn(torch.tensor([0.5]), torch.tensor([1]), squared=False))
        0.5
    """
    if similarity.dim() != 1 or similarity.shape != labels.shape or similarity.numel() == 0:
        raise ValueError(
            f"expected equal non-empty (B,) similarity and labels, got "
            f"{tuple(similarity.shape)} and {tuple(labels.shape)}"
        )
    y = labels.to(similarity.dtype)
    if not bool(torch.all(y.abs() == 1)):
        raise ValueError("labels must be +1 (similar) or -1 (dissimilar)")
    hinge = torch.clamp(margin - y * similarity, min=0.0)
    if squared:
        hinge = hinge * hinge
    return hinge.mean()


class SiameseLoss(nn.Module):
    """Module form of :func:`siamese_loss_fn` over embedding pairs.

    Args:
        margin: :math:`\\Delta`, default 1.0.
        squared: squared hinge, default True.

    Shapes: ``forward(a, b, labels)``: ``(B, d)``, ``(B, d)``, ``(B,)`` -> scalar.

    Example:
        >>> import torch
        >>> a = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
        >>> b = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
        >>> float(SiameseLoss()(a, b, torch.tensor([1, -1])))
        0.0
    """

    def __init__(self, margin: float = 1.0, squared: bool = True) -> None:
        super().__init__()
        self.margin = margin
        self.squared = squared

    def forward(self, first: Tensor, second: Tensor, labels: Tensor) -> Tensor:
        if first.shape != second.shape or first.dim() != 2:
            raise ValueError(
                f"expected two equal (B, d) embeddings, got {tuple(first.shape)} and "
                f"{tuple(second.shape)}"
            )
        similarity = (first * second).sum(dim=1)
        return siamese_loss_fn(similarity, labels, self.margin, squared=self.squared)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, squared={self.squared}"
