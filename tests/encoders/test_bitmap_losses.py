"""Losses of the ECML 2019 seed: Siamese (eq. 2), triplet with swap (eq. 3), labels (eq. 1)."""

from __future__ import annotations

import math

import pytest
import torch

from mathsearch.encoders.losses.multilabel_loss import LabelLogLoss, label_log_loss_fn
from mathsearch.encoders.losses.siamese_loss import SiameseLoss, siamese_loss_fn
from mathsearch.encoders.losses.triplet_loss import TripletLoss


def test_siamese_hinge_and_square() -> None:
    sim = torch.tensor([0.5, 0.5, 1.0, -1.0])
    y = torch.tensor([1, -1, 1, -1])
    # max(0, 1 - y s): 0.5, 1.5, 0, 0
    assert float(siamese_loss_fn(sim, y, squared=False)) == pytest.approx(0.5)
    assert float(siamese_loss_fn(sim, y)) == pytest.approx((0.25 + 2.25) / 4)
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[0.6, 0.8], [0.6, 0.8]])
    expected = ((1 - 0.6) ** 2 + (1 + 0.8) ** 2) / 2
    assert float(SiameseLoss()(a, b, torch.tensor([1, -1]))) == pytest.approx(expected)


def test_siamese_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        siamese_loss_fn(torch.tensor([0.1]), torch.tensor([0]))
    with pytest.raises(ValueError):
        siamese_loss_fn(torch.tensor([0.1, 0.2]), torch.tensor([1]))


def test_triplet_anchor_swap_squared_is_eq3() -> None:
    a = torch.tensor([[1.0, 0.0]])
    p = torch.tensor([[0.0, 1.0]])
    n = torch.tensor([[0.6, 0.8]])  # <a,n> = 0.6, <p,n> = 0.8: the swap takes 0.8
    loss = TripletLoss(1.0, swap=True, squared=True)(a, p, n)
    assert float(loss) == pytest.approx((1 - 0 + 0.8) ** 2)


def test_label_loss_is_logistic_cross_entropy() -> None:
    e = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    w = torch.tensor([[2.0, 0.0], [0.0, -1.0]])
    z = torch.tensor([1.0, 0.0])
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    expected = (-math.log(sig(2.0)) - math.log(1 - sig(-1.0))) / 2
    assert float(label_log_loss_fn(e, w, z)) == pytest.approx(expected, rel=1e-6)
    head = LabelLogLoss(3, 2)
    with torch.no_grad():
        head.weights.copy_(torch.tensor([[2.0, 0.0], [9.0, 9.0], [0.0, -1.0]]))
    assert head(e, torch.tensor([0, 2]), z).item() == pytest.approx(expected, rel=1e-6)
    assert head.logits(e).shape == (2, 3)
    with pytest.raises(ValueError):
        label_log_loss_fn(e, w[:1], z)
