r"""Rendering augmentations of cached bitmap crops that keep the equation's meaning.

Beyond the ECML 2019 seed (which renders every equation once, sec. 3): each training crop may be
re-sampled at a random *scale* (a larger or smaller font, another dpi) and *shift* (where the
centre crop falls), so that the net learns glyphs, not pixel positions. The crops are rendered once
into the cache (:mod:`mathsearch.encoders.bitmap_data`); the augmentation is an affine re-sampling
of the ink image, so no rendering runs in the training loop. For an output pixel at normalised
coordinates :math:`u` the ink is read at :math:`u / s + t` (bilinear; outside the crop is paper):

.. math::
    \theta = \begin{pmatrix} 1/s & 0 & t_x \\ 0 & 1/s & t_y \end{pmatrix},\qquad
    s \sim U[s_{lo}, s_{hi}],\quad t_x = 2 \delta_x / W,\ t_y = 2 \delta_y / H,\quad
    \delta \sim U\{-\Delta, \dots, \Delta\}

Args (:class:`CropAugment`): ``scale`` ((0.85, 1.15): font size / dpi), ``shift_x`` (12 px),
``shift_y`` (2 px).

Shapes: grey crops ``(B, 1, H, W)`` float (255 = paper) -> the same shape.

Example::

    augment = CropAugment()
    batch = augment(torch.full((4, 1, 32, 333), 255.0), torch.Generator().manual_seed(0))
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual alias
from torch import Tensor

logger = logging.getLogger(__name__)

__all__ = ["CropAugment", "affine_resample"]


def affine_resample(grey: Tensor, scale: Tensor, shift: Tensor) -> Tensor:
    """Re-sample grey crops ``(B, 1, H, W)`` at per-crop ``scale`` ``(B,)`` and pixel ``shift``
    ``(B, 2)`` (x, y); ink leaving the crop is lost, ink entering it is paper (255).

    >>> x = torch.full((1, 1, 4, 6), 255.0); x[0, 0, 1, 2] = 0.0
    >>> affine_resample(x, torch.ones(1), torch.zeros(1, 2)).allclose(x)
    True
    """
    batch, _, height, width = grey.shape
    theta = torch.zeros(batch, 2, 3, dtype=grey.dtype, device=grey.device)
    theta[:, 0, 0] = 1.0 / scale
    theta[:, 1, 1] = 1.0 / scale
    theta[:, 0, 2] = 2.0 * shift[:, 0] / width
    theta[:, 1, 2] = 2.0 * shift[:, 1] / height
    grid = F.affine_grid(theta, list(grey.shape), align_corners=False)
    ink = F.grid_sample(255.0 - grey, grid, mode="bilinear", padding_mode="zeros",
                        align_corners=False)  # fmt: skip
    return (255.0 - ink).clamp_(0.0, 255.0)


@dataclass(frozen=True)
class CropAugment:
    """A random scale and shift per crop (see the module docstring)."""

    scale: tuple[float, float] = (0.85, 1.15)
    shift_x: int = 12
    shift_y: int = 2

    def __post_init__(self) -> None:
        low, high = self.scale
        if not 0.0 < low <= high or self.shift_x < 0 or self.shift_y < 0:
            raise ValueError(f"bad augmentation {self}: need 0 < scale low <= high, shifts >= 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __call__(self, grey: Tensor, generator: torch.Generator) -> Tensor:
        batch = grey.size(0)
        low, high = self.scale
        scale = low + (high - low) * torch.rand(batch, generator=generator)
        shift = torch.stack(
            [
                torch.randint(-self.shift_x, self.shift_x + 1, (batch,), generator=generator),
                torch.randint(-self.shift_y, self.shift_y + 1, (batch,), generator=generator),
            ],
            dim=1,
        ).to(grey.dtype)
        return affine_resample(grey, scale.to(grey.dtype), shift)
