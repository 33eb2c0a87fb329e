"""Crop augmentations of the bitmap CNN (beyond ECML 2019): the identity is exact, a shift moves
ink by whole pixels, a scale keeps the crop's centre, paper stays paper."""

from __future__ import annotations

import pytest
import torch

from mathsearch.encoders.bitmap_augment import CropAugment, affine_resample


def _crop() -> torch.Tensor:
    grey = torch.full((1, 1, 32, 333), 255.0)
    grey[0, 0, 14:18, 160:173] = 0.0  # a 4 x 13 block of ink at the centre
    return grey


def test_identity_and_integer_shift() -> None:
    grey = _crop()
    assert torch.allclose(affine_resample(grey, torch.ones(1), torch.zeros(1, 2)), grey)
    moved = affine_resample(grey, torch.ones(1), torch.tensor([[5.0, 2.0]]))
    ink = (moved[0, 0] < 128).nonzero()
    # reading at u + t moves the picture by -t: the block now starts 5 left, 2 up
    assert (int(ink[:, 0].min()), int(ink[:, 1].min())) == (12, 155)
    assert int((moved < 128).sum()) == int((grey < 128).sum())


def test_scale_grows_the_ink_around_the_centre() -> None:
    grey = _crop()
    larger = affine_resample(grey, torch.tensor([1.5]), torch.zeros(1, 2))
    smaller = affine_resample(grey, torch.tensor([0.7]), torch.zeros(1, 2))
    ink = [float((255.0 - x).sum()) for x in (smaller, grey, larger)]
    assert ink[0] < ink[1] < ink[2]
    assert float(larger[0, 0, 0].min()) == 255.0 and float(larger[0, 0, :, 0].min()) == 255.0


def test_random_augmentation_is_seeded_and_bounded() -> None:
    batch = _crop().repeat(6, 1, 1, 1)
    augment = CropAugment()
    first = augment(batch, torch.Generator().manual_seed(3))
    again = augment(batch, torch.Generator().manual_seed(3))
    assert torch.equal(first, again) and first.shape == batch.shape
    assert not torch.allclose(first[0], first[1])  # each crop its own draw
    assert float(first.min()) >= 0.0 and float(first.max()) <= 255.0
    with pytest.raises(ValueError, match="bad augmentation"):
        CropAugment(scale=(1.2, 0.8))
