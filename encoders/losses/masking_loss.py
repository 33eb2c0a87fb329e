r"""Loss of the masking task (KDD 2020, section 4.2, "Masking Task").

15% of the nodes of a graph get an all-zero feature vector; from the last graph-convolution
output :math:`\phi_i(x_\blacksquare)` of each masked node three linear soft-max heads predict the
XML tag (32 classes), the attribute (32 + 1, the extra class being "no attribute") and the
character (192 + 1, the extra class being "no character"). With cross-entropy :math:`\ell`:

.. math::

    \ell_{\text{mask}, i} = \tfrac{1}{3}\,(\ell_{\text{tag}, i} + \ell_{\text{attr}, i}
        + \ell_{\text{char}, i})

and the loss is the mean of :math:`\ell_{\text{mask}, i}` over all masked nodes. Since every
masked node has all three targets, that equals the mean of the three per-head mean
cross-entropies, which is what is computed.

Targets follow the indexer's graph ids: ``-1`` means "none" and is mapped to the last class of
the head (``logits.shape[1] - 1``); the tag head has no "none" class in the seed, but the same
mapping applies if a caller gives it one.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import Tensor

logger = logging.getLogger(__name__)

__all__ = ["NONE_TARGET", "masked_feature_loss_fn"]

#: The target id that means "no attribute" / "no character".
NONE_TARGET = -1


def _head_targets(name: str, logits: Tensor, target: Tensor) -> Tensor:
    """Validated ``(M,)`` long targets with ``-1`` mapped to the head's last class."""
    if logits.dim() != 2:
        raise ValueError(f"{name}_logits must be (M, C), got shape {tuple(logits.shape)}")
    if target.shape != logits.shape[:1]:
        raise ValueError(
            f"{name}_target must be ({logits.shape[0]},), got shape {tuple(target.shape)}"
        )
    if torch.is_floating_point(target) or target.dtype == torch.bool:
        raise ValueError(f"{name}_target must hold integer class ids, got {target.dtype}")
    n_classes = logits.shape[1]
    target = target.long()
    mapped = torch.where(target == NONE_TARGET, torch.full_like(target, n_classes - 1), target)
    if mapped.numel() and (int(mapped.min()) < 0 or int(mapped.max()) >= n_classes):
        raise ValueError(
            f"{name}_target ids must lie in [-1, {n_classes - 1}], "
            f"got [{int(target.min())}, {int(target.max())}]"
        )
    return mapped


def masked_feature_loss_fn(  # noqa: PLR0917 - three heads' logits, then their targets
    tag_logits: Tensor,
    attr_logits: Tensor,
    char_logits: Tensor,
    tag_target: Tensor,
    attr_target: Tensor,
    char_target: Tensor,
) -> Tensor:
    r"""Mean of the tag, attribute and character cross-entropies over the masked nodes.

    :math:`\frac{1}{M}\sum_{i} \frac{1}{3}(\ell_{\text{tag},i} + \ell_{\text{attr},i} +
    \ell_{\text{char},i})` (KDD 2020, section 4.2).

    Args:
        tag_logits: ``(M, 32)`` pre-soft-max scores of the tag head, one row per masked node.
        attr_logits: ``(M, 33)`` scores of the attribute head (last class = "none").
        char_logits: ``(M, 193)`` scores of the character head (last class = "none").
        tag_target: ``(M,)`` integer tag ids in ``[0, 31]``.
        attr_target: ``(M,)`` attribute ids in ``[0, 31]`` or ``-1`` for none.
        char_target: ``(M,)`` character ids in ``[0, 191]`` or ``-1`` for none.

    Returns:
        A scalar tensor; ``0`` (still attached to the logits' graph) when ``M == 0``.

    Raises:
        ValueError: on mismatched shapes, non-integer targets or ids out of range.

    Example (uniform logits: every head costs ``ln C``):
        >>> import math, torch
        >>> m = 2
        >>> loss = masked_feature_loss_fn(
        ...     torch.zeros(m, 32), torch.zeros(m, 33), torch.zeros(m, 193),
        ...     torch.tensor([0, 5]), torch.tensor([-1, 3]), torch.tensor([7, -1]))
        >>> round(float(loss), 4) == round((math.log(32) + math.log(33) + math.log(193)) / 3, 4)
        True
    """
    heads = (
        ("tag", tag_logits, tag_target),
        ("attr", attr_logits, attr_target),
        ("char", char_logits, char_target),
    )
    n_masked = {logits.shape[0] if logits.dim() else -1 for _, logits, _ in heads}
    if len(n_masked) != 1:
        raise ValueError(
            "the three heads must score the same masked nodes, got row counts "
            f"{[tuple(logits.shape) for _, logits, _ in heads]}"
        )
    targets = [_head_targets(name, logits, target) for name, logits, target in heads]
    if tag_logits.shape[0] == 0:
        return (tag_logits.sum() + attr_logits.sum() + char_logits.sum()) * 0.0
    losses = [
        F.cross_entropy(logits, target)
        for (_, logits, _), target in zip(heads, targets, strict=True)
    ]
    return (losses[0] + losses[1] + losses[2]) / 3.0
