r"""Contrastive loss with in-batch negatives (InfoNCE / multiple-negatives ranking).

Beyond the KDD 2020 seed's histogram and triplet losses (section 4.2, eq. 1-2), which compare
each anchor with one negative, this loss scores every anchor against its own positive *and every
other positive of the batch* (van den Oord et al. 2018, "InfoNCE"; Henderson et al. 2017,
"multiple negatives ranking"): ``B`` comparisons per forward pass instead of one. For ``B``
pairs of L2-normalised embeddings ``a_i``, ``p_i`` and a scale ``s = exp(t)`` (the inverse
temperature, fixed or learned):

.. math::

    S_{ij} = s \langle a_i, p_j \rangle,\qquad
    \ell_{a \to p} = -\frac{1}{B} \sum_i \log
        \frac{\exp S_{ii}}{\sum_{j \notin M_i} \exp S_{ij}},\qquad
    \ell = \tfrac12 (\ell_{a \to p} + \ell_{p \to a})

where :math:`\ell_{p \to a}` is the same with :math:`S^T` (each positive against every anchor,
``symmetric=True``) and :math:`M_i` the optional *ignored* columns of row ``i``: other pairs of
the batch known to be related to pair ``i`` (e.g. drawn from the same paper, so weak labels would
call them positives); they are neither positives nor negatives. The diagonal is never ignored.
Chance level is :math:`\log B`.

Optional *extra positives* (``positives``, the same shape as ``ignore``): the related pairs
count as positives of row ``i`` instead of being left out, the multi-positive form of Khosla et
al., "Supervised contrastive learning" (NeurIPS 2020, eq. 2, :math:`\mathcal{L}^{sup}_{out}`):

.. math::

    \ell_{a \to p} = -\frac{1}{B} \sum_i \frac{1}{|P_i|} \sum_{j \in P_i} \log
        \frac{\exp S_{ij}}{\sum_{k} \exp S_{ik}},\qquad
    P_i = \{i\} \cup \{j : \text{positives}_{ij}\}

(each anchor's own positive and the positives of the other pairs of its paper; with no extra
positive it is the plain loss). Batches of several pairs per paper
(``train gcn --pairs-per-paper K``) give each anchor ``K - 1`` of them.

Optional *extra negatives* ``n_1 .. n_{B'}`` (e.g. one BM25-mined hard negative per anchor, as
dense passage retrieval adds to its in-batch ones: Karpukhin et al., EMNLP 2020, section 3.2)
widen each anchor's softmax to :math:`B + B'` columns,
:math:`S_{i,B+k} = s \langle a_i, n_k \rangle`; the positive-to-anchor direction is unchanged
(negatives are no one's anchor), and ``ignore`` may then be ``(B, B + B')``.

An optional fixed *prior* ``w beta`` (``(B, B + B')``, in similarity units, no gradient) is added
to every score before the scale, :math:`S_{ij} = s (\langle a_i, c_j \rangle + w\beta_{ij})`,
and enters the positive-to-anchor direction transposed: the softmax then ranks by the fused score
of :mod:`~mathsearch.encoders.lexical_prior` (a BM25 prior, so that the vectors learn the
lexical ranker's residual).

Args (:class:`InfoNCELoss`): ``scale`` (initial ``s``, 20.0), ``learn_scale`` (True: ``t`` is a
parameter, clamped to ``s <= max_scale``, 100.0), ``symmetric`` (True).

Shapes: ``anchor``, ``positive`` (B, d); ``negative`` (B', d) or None; ``ignore`` (B, B) or
(B, B + B') bool or None; ``prior`` (B, B) or (B, B + B') float or None; ``positives`` like
``ignore`` -> scalar.

Example::

    loss = InfoNCELoss()
    value = loss(model(anchors), model(positives))   # ~log(B) untrained
"""

from __future__ import annotations

import logging
import math

import torch
import torch.nn.functional as F  # noqa: N812 - the usual alias
from torch import Tensor, nn

logger = logging.getLogger(__name__)

__all__ = ["InfoNCELoss", "info_nce_loss_fn", "multi_positive_cross_entropy", "same_group_mask"]


def same_group_mask(groups: Tensor) -> Tensor:
    """``(B, B)`` bool: True where pairs ``i != j`` share a group id (e.g. the same paper).

    Args:
        groups: ``(B,)`` integer group of each pair.
    """
    same = groups.unsqueeze(0) == groups.unsqueeze(1)
    return same & ~torch.eye(groups.numel(), dtype=torch.bool, device=groups.device)


def multi_positive_cross_entropy(logits: Tensor, positives: Tensor) -> Tensor:
    r"""Mean over rows of :math:`-\frac{1}{|P_i|}\sum_{j \in P_i} \log \mathrm{softmax}(z_i)_j`.

    Args:
        logits: ``(B, C)`` scores (``-inf`` for columns left out).
        positives: ``(B, C)`` bool, at least one True per row, never on a ``-inf`` column.

    Returns:
        the scalar loss; ``F.cross_entropy(logits, target)`` when ``positives`` is one-hot.
    """
    log_p = logits.log_softmax(dim=1).masked_fill(~positives, 0.0)
    return -(log_p.sum(dim=1) / positives.sum(dim=1)).mean()


def info_nce_loss_fn(
    anchor: Tensor,
    positive: Tensor,
    scale: Tensor | float = 20.0,
    ignore: Tensor | None = None,
    *,
    symmetric: bool = True,
    negative: Tensor | None = None,
    prior: Tensor | None = None,
    positives: Tensor | None = None,
) -> Tensor:
    r"""Mean InfoNCE loss of ``B`` (anchor, positive) pairs (see the module docstring).

    Args:
        anchor: ``(B, d)`` embeddings (L2-normalised for a cosine similarity).
        positive: ``(B, d)`` embeddings; ``positive[i]`` belongs to ``anchor[i]``, every other
            row is a negative of it.
        scale: ``s`` multiplying the inner products (a tensor keeps its gradient).
        ignore: ``(B, B)`` bool, True for pairs ``(i, j)`` (``i != j``) left out of row ``i``'s
            and column ``j``'s softmax; the diagonal is always kept.
        symmetric: also score every positive against all anchors and average both directions.
        negative: ``(B', d)`` extra negatives of every anchor (columns ``B..B+B'`` of its row).
        prior: ``(B, B [+ B'])`` fixed scores added to the similarities before the scale (e.g.
            ``w`` times a row-normalised BM25 score); None: none.
        positives: ``(B, B [+ B'])`` bool, True for pairs ``(i, j)`` that count as positives of
            row ``i`` (and of column ``j``) besides the diagonal (supervised contrastive, see the
            module docstring); None: the diagonal only.

    Returns:
        the scalar loss; ``log(B)`` when all similarities are equal.
    """
    if anchor.shape != positive.shape or anchor.dim() != 2:
        raise ValueError(
            f"anchor and positive must be (B, d) alike: {anchor.shape}, {positive.shape}"
        )
    pairs = anchor.size(0)
    candidates = positive
    if negative is not None:
        if negative.dim() != 2 or negative.size(1) != anchor.size(1):
            raise ValueError(f"negative must be (B', {anchor.size(1)}): {negative.shape}")
        candidates = torch.cat([positive, negative])
    similarity = anchor @ candidates.t()
    if prior is not None:
        if prior.shape != similarity.shape:
            raise ValueError(f"prior must be {tuple(similarity.shape)}: {tuple(prior.shape)}")
        similarity = similarity + prior.to(similarity.dtype)
    logits = scale * similarity
    if ignore is not None or positives is not None:
        diagonal = torch.eye(pairs, logits.size(1), dtype=torch.bool, device=logits.device)
    if ignore is not None:
        if ignore.shape != logits.shape:
            raise ValueError(f"ignore must be {tuple(logits.shape)}: {tuple(ignore.shape)}")
        logits = logits.masked_fill(ignore & ~diagonal, float("-inf"))
    if positives is not None:
        if positives.shape != logits.shape:
            raise ValueError(f"positives must be {tuple(logits.shape)}: {tuple(positives.shape)}")
        keep = positives & torch.isfinite(logits) | diagonal
        loss = multi_positive_cross_entropy(logits, keep)
        if symmetric:
            columns = keep[:, :pairs].t()
            loss = 0.5 * (loss + multi_positive_cross_entropy(logits[:, :pairs].t(), columns))
        return loss
    target = torch.arange(pairs, device=logits.device)
    loss = F.cross_entropy(logits, target)
    if symmetric:
        loss = 0.5 * (loss + F.cross_entropy(logits[:, :pairs].t(), target))
    return loss


class InfoNCELoss(nn.Module):
    """InfoNCE with in-batch negatives and a (learned) scale; see the module docstring.

    Args:
        scale: initial inverse temperature ``s`` (20.0).
        learn_scale: learn ``t = log s`` (True) or keep ``s`` fixed.
        max_scale: upper clamp of the learned ``s`` (100.0, as CLIP).
        symmetric: average the anchor->positive and positive->anchor directions (True).
    """

    def __init__(
        self,
        scale: float = 20.0,
        learn_scale: bool = True,
        max_scale: float = 100.0,
        symmetric: bool = True,
    ) -> None:
        super().__init__()
        if scale <= 0 or max_scale < scale:
            raise ValueError(f"need 0 < scale <= max_scale, got {scale}, {max_scale}")
        log_scale = torch.tensor(math.log(scale))
        if learn_scale:
            self.log_scale = nn.Parameter(log_scale)
        else:
            self.register_buffer("log_scale", log_scale)
        self.max_log_scale = math.log(max_scale)
        self.symmetric = symmetric

    @property
    def scale(self) -> Tensor:
        return self.log_scale.clamp(max=self.max_log_scale).exp()

    def forward(
        self,
        anchor: Tensor,
        positive: Tensor,
        ignore: Tensor | None = None,
        negative: Tensor | None = None,
        prior: Tensor | None = None,
        *,
        positives: Tensor | None = None,
    ) -> Tensor:
        return info_nce_loss_fn(
            anchor,
            positive,
            self.scale,
            ignore,
            symmetric=self.symmetric,
            negative=negative,
            prior=prior,
            positives=positives,
        )

    def extra_repr(self) -> str:
        return f"scale={float(self.scale.detach()):.2f}, symmetric={self.symmetric}"
