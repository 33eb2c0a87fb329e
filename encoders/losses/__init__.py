"""Training losses of the equation encoders (KDD 2020 section 4.2, ECML 2019 section 4.2).

- :func:`histogram_loss_fn` / :class:`HistogramLoss`: histogram loss, KDD 2020 eq. 2.
- :func:`triplet_loss_fn` / :class:`TripletLoss`: triplet margin loss, KDD 2020 eq. 1, with the
  ECML 2019 anchor swap and squared hinge (ECML eq. 3).
- :func:`info_nce_loss_fn` / :class:`InfoNCELoss`: contrastive loss with in-batch negatives
  (InfoNCE / multiple-negatives ranking), beyond the seeds.
- :func:`masked_feature_loss_fn`: cross-entropy of the masking task's three heads.

The ``*_fn`` functions are the pure math over tensors; the modules compute the similarities of
``(B, d)`` embedding batches and call them.
"""

from __future__ import annotations

from mathsearch.encoders.losses.histogram_loss import (
    DEFAULT_BINS,
    HistogramLoss,
    histogram_loss_fn,
    pair_similarity,
)
from mathsearch.encoders.losses.info_nce_loss import (
    InfoNCELoss,
    info_nce_loss_fn,
    multi_positive_cross_entropy,
    same_group_mask,
)
from mathsearch.encoders.losses.masking_loss import NONE_TARGET, masked_feature_loss_fn
from mathsearch.encoders.losses.triplet_loss import TripletLoss, triplet_loss_fn

__all__ = [
    "DEFAULT_BINS",
    "NONE_TARGET",
    "HistogramLoss",
    "InfoNCELoss",
    "TripletLoss",
    "histogram_loss_fn",
    "info_nce_loss_fn",
    "masked_feature_loss_fn",
    "multi_positive_cross_entropy",
    "pair_similarity",
    "same_group_mask",
    "triplet_loss_fn",
]
