r"""Histogram loss (Ustinova & Lempitsky 2016) as the KDD 2020 seed writes it (section 4.2, eq. 2).

The seed collects the similarities of the ``m`` positive pairs in
:math:`s^+ = (\langle \bar\phi(x_i), \bar\phi(x_i^+) \rangle)_{i=1..m}` and of the negative pairs
in :math:`s^-`, divides ``[-1, 1]`` into ``R - 1`` equal bins with nodes
:math:`-1 = t_1 < t_2 < \dots < t_R = 1` and width :math:`\Delta = 2 / (R - 1)`, and computes

.. math::

    \ell_h(s^+, s^-) = \frac{1}{m^2} \sum_{r=1}^{R} \sum_{r'=1}^{r}
        \Big(\sum_{i=1}^{m} \delta_r[s_i^-]\Big) \Big(\sum_{i=1}^{m} \delta_{r'}[s_i^+]\Big)
        = \sum_{r=1}^{R} h^-_r \, \Phi^+_r

with the triangular kernel :math:`\delta_r[s] = (s - t_{r-1})/\Delta` on
:math:`[t_{r-1}, t_r]`, :math:`(t_{r+1} - s)/\Delta` on :math:`[t_r, t_{r+1}]`, 0 elsewhere, i.e.
:math:`\delta_r[s] = \max(0, 1 - |s - t_r| / \Delta)` (linear interpolation to the two nearest
nodes). :math:`h^\pm_r = \frac{1}{m}\sum_i \delta_r[s_i^\pm]` are the histograms (each sums to 1)
and :math:`\Phi^+_r = \sum_{r' \le r} h^+_{r'}` the positive CDF, so the loss estimates the
probability that a random negative pair scores at least as high as a random positive pair.

Notes on the transcription: the seed's second kernel case reads ``(t_{r-1} - s)/Delta``, which
is negative on ``[t_r, t_{r+1}]``; the original paper (and the only reading that gives a
histogram) has ``(t_{r+1} - s)/Delta``, which is what is implemented. When the numbers of
positive and negative similarities differ, the normalisation is :math:`1/(m^+ m^-)` (equal to
the seed's :math:`1/m^2` when both are ``m``). ``bins`` is the seed's ``R`` (section 4.4 uses
``R = 64``): the number of nodes, hence ``R - 1`` intervals.

Similarity (section 4.2): the inner product of the soft-normalised embeddings
:math:`\bar\phi`, not the cosine; :class:`HistogramLoss` uses ``similarity="inner"`` by default.
Soft normalisation only makes *most* norms smaller than 1, so similarities are clamped to
``[-1, 1]`` before binning (a clamped value has no gradient).
"""

from __future__ import annotations

import logging
from typing import Literal

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import Tensor, nn

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_BINS", "HistogramLoss", "histogram_loss_fn", "pair_similarity"]

#: The seed's ``R`` (section 4.4).
DEFAULT_BINS = 64

Similarity = Literal["inner", "cosine"]


def _check_similarities(name: str, s: Tensor) -> None:
    if s.dim() != 1:
        raise ValueError(f"{name} must be 1-d (m,), got shape {tuple(s.shape)}")
    if s.numel() == 0:
        raise ValueError(f"{name} is empty")
    if not torch.is_floating_point(s):
        raise ValueError(f"{name} must be a floating-point tensor, got {s.dtype}")


def _soft_histogram(s: Tensor, nodes: Tensor, width: float) -> Tensor:
    """Normalised histogram ``(R,)`` of ``s`` (``(m,)``) under the triangular kernel."""
    delta = torch.clamp(1.0 - (s.unsqueeze(1) - nodes.unsqueeze(0)).abs() / width, min=0.0)
    return delta.sum(dim=0) / s.numel()


def histogram_loss_fn(pos_sim: Tensor, neg_sim: Tensor, bins: int = DEFAULT_BINS) -> Tensor:
    r"""Histogram loss of eq. 2 (KDD 2020, section 4.2) over two vectors of similarities.

    :math:`\ell_h = \sum_{r=1}^{R} h^-_r \sum_{r'=1}^{r} h^+_{r'}` with triangular-kernel
    histograms on the ``R`` nodes :math:`t_r = -1 + (r - 1)\Delta`, :math:`\Delta = 2/(R-1)`.

    Args:
        pos_sim: ``(m+,)`` similarities of the positive pairs, expected in ``[-1, 1]``
            (values outside are clamped).
        neg_sim: ``(m-,)`` similarities of the negative pairs, same convention.
        bins: ``R``, the number of histogram nodes (``R - 1`` intervals); default 64, at least 2.

    Returns:
        A scalar tensor in ``[0, 1]``, differentiable w.r.t. both inputs.

    Raises:
        ValueError: on empty or non-1-d inputs, non-float tensors, or ``bins < 2``.

    Example (``R = 3``: nodes ``-1, 0, 1``):
        >>> import torch
        >>> float(histogram_loss_fn(torch.tensor([0.5]), torch.tensor([0.0]), bins=3))
        0.5
    """
    if bins < 2:
        raise ValueError(f"bins must be >= 2 (the seed's R nodes), got {bins}")
    _check_similarities("pos_sim", pos_sim)
    _check_similarities("neg_sim", neg_sim)
    dtype = torch.promote_types(pos_sim.dtype, neg_sim.dtype)
    nodes = torch.linspace(-1.0, 1.0, bins, dtype=dtype, device=pos_sim.device)
    width = 2.0 / (bins - 1)
    h_pos = _soft_histogram(pos_sim.to(dtype).clamp(-1.0, 1.0), nodes, width)
    h_neg = _soft_histogram(neg_sim.to(dtype).clamp(-1.0, 1.0), nodes, width)
    cdf_pos = torch.cumsum(h_pos, dim=0)
    return torch.sum(h_neg * cdf_pos)


def pair_similarity(u: Tensor, v: Tensor, similarity: Similarity = "inner") -> Tensor:
    """Row-wise similarity ``(B,)`` of two ``(B, d)`` embedding batches.

    Args:
        u: ``(B, d)`` embeddings.
        v: ``(B, d)`` embeddings.
        similarity: ``"inner"`` (the seeds' :math:`\\langle u_i, v_i \\rangle`, default) or
            ``"cosine"``.

    Raises:
        ValueError: on shapes other than two equal ``(B, d)`` or an unknown similarity.
    """
    if u.dim() != 2 or u.shape != v.shape:
        raise ValueError(
            f"expected two (B, d) tensors of equal shape, got {tuple(u.shape)} and {tuple(v.shape)}"
        )
    if similarity == "inner":
        return (u * v).sum(dim=1)
    if similarity == "cosine":
        return F.cosine_similarity(u, v, dim=1)
    raise ValueError(f"unknown similarity {similarity!r}; expected 'inner' or 'cosine'")


class HistogramLoss(nn.Module):
    """Histogram loss over a batch of triplets ``(x, x+, x-)`` (KDD 2020, eq. 2).

    ``s+_i = <anchor_i, positive_i>`` and ``s-_i = <anchor_i, negative_i>`` (inner products of
    the soft-normalised embeddings, section 4.2), then :func:`histogram_loss_fn`.

    Args:
        bins: the seed's ``R`` (number of histogram nodes), default 64.
        similarity: ``"inner"`` (default, as the seed) or ``"cosine"``.

    Example:
        >>> import torch
        >>> loss = HistogramLoss(bins=64)
        >>> a = torch.tensor([[1.0, 0.0]])
        >>> float(loss(a, torch.tensor([[1.0, 0.0]]), torch.tensor([[-1.0, 0.0]])))
        0.0
    """

    def __init__(self, bins: int = DEFAULT_BINS, similarity: Similarity = "inner") -> None:
        super().__init__()
        if bins < 2:
            raise ValueError(f"bins must be >= 2 (the seed's R nodes), got {bins}")
        if similarity not in ("inner", "cosine"):
            raise ValueError(f"unknown similarity {similarity!r}; expected 'inner' or 'cosine'")
        self.bins = bins
        self.similarity: Similarity = similarity

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """Loss of ``(B, d)`` anchor, positive and negative embeddings; a scalar tensor."""
        pos_sim = pair_similarity(anchor, positive, self.similarity)
        neg_sim = pair_similarity(anchor, negative, self.similarity)
        return histogram_loss_fn(pos_sim, neg_sim, self.bins)

    def extra_repr(self) -> str:
        return f"bins={self.bins}, similarity={self.similarity!r}"
