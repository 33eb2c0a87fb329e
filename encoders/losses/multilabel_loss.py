r"""Multi-label proxy tasks with negative sampling (ECML 2019 sec. 4.2, eq. 1).

"For each possible label y we have a weight vector :math:`w_y \in \mathbb{R}^d`. We jointly learn
the encoder and these weights, such that the dot-product of :math:`\langle f(x), w_y \rangle` is
large when y is in the set of labels of x and small otherwise. To train, we randomly generate
pairs of equations and labels; with probability 0.5 we create a pair with a correct label,
otherwise we choose an incorrect label uniformly at random." Each triple :math:`(x, y, z)`,
:math:`z \in \{0, 1\}`, is scored by the logistic cross entropy

.. math::

    \ell_{log}(x, y, z) = -z \ln \sigma(\langle f(x), w_y \rangle)
        - (1 - z) \ln\big(1 - \sigma(\langle f(x), w_y \rangle)\big)

averaged over the batch. The sampling of :math:`(y, z)` lives in
:mod:`mathsearch.encoders.bitmap_sampler`; here are the loss and the label weights.
"""

from __future__ import annotations

import logging
import math

import torch
from torch import Tensor, nn
from torch.nn import functional

logger = logging.getLogger(__name__)

__all__ = ["LabelLogLoss", "label_log_loss_fn"]


def label_log_loss_fn(embeddings: Tensor, label_weights: Tensor, targets: Tensor) -> Tensor:
    r"""Mean :math:`\ell_{log}` (eq. 1) of ``B`` (equation, label, z) triples.

    Args:
        embeddings: ``(B, d)`` :math:`f(x)` of the equations.
        label_weights: ``(B, d)`` :math:`w_y` of each triple's label.
        targets: ``(B,)`` :math:`z \in \{0, 1\}`.

    Returns:
        A scalar tensor (computed stably from the logits).

    Raises:
        ValueError: mismatched or empty shapes.

    Example (logit 0 -> ln 2 whatever z):
        >>> import torch
        >>> e, w = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
        >>> round(float(label_log_loss_fn(e, w, torch.tensor([1.0]))), 4)
        0.6931
    """
    if embeddings.shape != label_weights.shape or embeddings.dim() != 2:
        raise ValueError(
            f"expected equal (B, d) embeddings and label weights, got "
            f"{tuple(embeddings.shape)} and {tuple(label_weights.shape)}"
        )
    if targets.shape != embeddings.shape[:1] or targets.numel() == 0:
        raise ValueError(f"expected non-empty (B,) targets, got {tuple(targets.shape)}")
    logits = (embeddings * label_weights).sum(dim=1)
    return functional.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))


class LabelLogLoss(nn.Module):
    """The label weights :math:`w_y` (``(num_labels, d)``) and eq. 1 over sampled triples.

    Args:
        num_labels: size of the label vocabulary (symbols or keywords).
        dim: embedding size d (64).

    Initialisation: uniform in :math:`(-d^{-1/2}, d^{-1/2})`, as the seed's linear layers.

    Shapes: ``forward(embeddings (B, d), labels (B,) long, targets (B,))`` -> scalar;
    ``logits(embeddings (B, d))`` -> ``(B, num_labels)``.

    Example:
        >>> import torch
        >>> head = LabelLogLoss(num_labels=5, dim=4)
        >>> loss = head(torch.ones(2, 4) / 2, torch.tensor([0, 3]), torch.tensor([1.0, 0.0]))
        >>> loss.dim()
        0
    """

    def __init__(self, num_labels: int, dim: int = 64) -> None:
        super().__init__()
        if num_labels < 1 or dim < 1:
            raise ValueError(f"num_labels and dim must be positive, not {num_labels}, {dim}")
        self.weights = nn.Parameter(torch.empty(num_labels, dim))
        bound = 1.0 / math.sqrt(dim)
        nn.init.uniform_(self.weights, -bound, bound)

    @property
    def num_labels(self) -> int:
        return int(self.weights.shape[0])

    def logits(self, embeddings: Tensor) -> Tensor:
        """:math:`\\langle f(x), w_y \\rangle` for every label: ``(B, num_labels)``."""
        return embeddings @ self.weights.t()

    def forward(self, embeddings: Tensor, labels: Tensor, targets: Tensor) -> Tensor:
        if labels.dim() != 1 or labels.numel() != embeddings.shape[0]:
            raise ValueError(f"expected (B,) label ids, got {tuple(labels.shape)}")
        return label_log_loss_fn(embeddings, self.weights[labels], targets)

    def extra_repr(self) -> str:
        return f"num_labels={self.num_labels}, dim={self.weights.shape[1]}"
