"""Training losses of the equation encoders (KDD 2020 section 4.2, ECML 2019 section 4.2).

- :func:`histogram_loss_fn` / :class:`HistogramLoss`: histogram loss, KDD 2020 eq. 2.
- :func:`triplet_loss_fn` / :class:`TripletLoss`: triplet margin loss, KDD 2020 eq. 1, with the
  ECML 2019 anchor swap and squared hinge (ECML eq. 3).
- :func:`masked_feature_loss_fn`: cross-entropy of the masking task's three heads.

The ``*_fn`` functions are the pure math over tensors; the modules compute the similarities of
``(B, d)`` embedding batches and call them.
"""

from __future__ import annotations

from encoders.losses.histogram_loss import (
    DEFAULT_BINS,
    HistogramLoss,
    histogram_loss_fn,
    pair_similarity,
)
from encoders.losses.masking_loss import NONE_TARGET, masked_feature_loss_fn
from encoders.losses.triplet_loss import TripletLoss, triplet_loss_fn

__all__ = [
    "DEFAULT_BINS",
    "NONE_TARGET",
    "HistogramLoss",
    "TripletLoss",
    "histogram_loss_fn",
    "masked_feature_loss_fn",
    "pair_similarity",
    "triplet_loss_fn",
]
