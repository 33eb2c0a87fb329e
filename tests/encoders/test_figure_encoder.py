"""The figure encoder (text LSTM + image CNN + fusion) and its losses."""

from __future__ import annotations

import math

import pytest
import torch

from mathsearch.encoders.figure_encoder import (
    FigureConfigError,
    FigureEncoder,
    FigureEncoderConfig,
    gather_last,
    masked_concat,
)
from mathsearch.encoders.figure_training import (
    pair_ce_loss,
    pair_mse_loss,
    soft_info_nce_loss,
    triplet_hinge_loss,
)


def inputs(batch: int = 3, size: int = 32) -> tuple[torch.Tensor, ...]:
    tokens = torch.randint(2, 20, (batch, 7))
    lengths = torch.tensor([7, 3, 0][:batch])
    tokens[1, 3:] = 0
    tokens[2] = 0
    return tokens, lengths, torch.rand(batch, 1, size, size), torch.tensor([[1.0], [0.0], [1.0]])


def test_seed_sizes_and_shapes() -> None:
    config = FigureEncoderConfig(vocab_size=1002, image_size=32)
    model = FigureEncoder(config).eval()
    assert model.text.embedding.embedding_dim == 100 and model.text.lstm.hidden_size == 50
    convs = [m for m in model.image.features if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size) for c in convs] == [(32, (3, 3))] * 2
    assert model.norm.num_features == 100 and model.dense.out_features == 50
    assert model(*inputs()).shape == (3, 50)
    with pytest.raises(FigureConfigError):
        FigureEncoderConfig(vocab_size=10, image_size=8, pool=8)


def test_missing_image_and_text_are_masked() -> None:
    model = FigureEncoder(FigureEncoderConfig(vocab_size=30, image_size=32)).eval()
    tokens, lengths, images, flags = inputs()
    base = model(tokens, lengths, images, flags)
    other = images.clone()
    other[1] = torch.rand_like(other[1])  # row 1 has has_image = 0: its pixels do not count
    other[0] = torch.rand_like(other[0])  # row 0 has an image: they do
    moved = model(tokens, lengths, other, flags)
    assert torch.allclose(base[1], moved[1]) and not torch.allclose(base[0], moved[0])
    text = torch.ones(2, 2)
    image = torch.full((2, 3), 2.0)
    out = masked_concat(text, image, torch.tensor([[1.0], [0.0]]), torch.tensor([[0.0], [1.0]]))
    assert out.tolist() == [[1, 1, 0, 0, 0], [0, 0, 2, 2, 2]]


def test_gather_last_takes_the_real_last_step() -> None:
    outputs = torch.arange(24.0).view(2, 4, 3)
    got = gather_last(outputs, torch.tensor([2, 4]))
    assert got.tolist() == [outputs[0, 1].tolist(), outputs[1, 3].tolist()]


def test_losses_match_the_seed_formulas() -> None:
    a = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    r = torch.tensor([1.0, 0.6])
    # dots 1.0 and 1.0 -> errors 0 and 0.4
    assert pair_mse_loss(a, b, r).item() == pytest.approx((0 + 0.4**2) / 2)
    expected = torch.nn.functional.binary_cross_entropy(torch.sigmoid(torch.ones(2)), torch.ones(2))
    assert pair_ce_loss(a, b, r).item() == pytest.approx(expected.item())
    q, p, n = torch.tensor([[1.0, 0.0]]), torch.tensor([[2.0, 0.0]]), torch.tensor([[0.5, 0.0]])
    assert triplet_hinge_loss(q, p, n).item() == pytest.approx(max(0.0, 1 + 0.5 - 2.0))
    assert triplet_hinge_loss(q, n, p).item() == pytest.approx(1 + 2.0 - 0.5)


def test_soft_info_nce_matches_its_formula() -> None:
    """Soft targets R_kl / sum_m R_km over in-batch cosines / tau, both directions."""
    a = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 2.0]])
    b = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.8, 0.6]])
    relation = torch.tensor([[1.0, 0.0, 0.6], [0.0, 1.0, 0.0], [0.6, 1.0, 1.0]])
    tau = 0.5
    cos = [[float(x @ y / (x.norm() * y.norm())) / tau for y in b] for x in a]

    def direction(logits: list[list[float]], rel: list[list[float]]) -> float:
        total = 0.0
        for row, weights in zip(logits, rel, strict=True):
            norm = math.log(sum(math.exp(v) for v in row))
            total -= sum(w / sum(weights) * (v - norm) for v, w in zip(row, weights, strict=True))
        return total / len(logits)

    rel = relation.tolist()
    transposed = [list(c) for c in zip(*rel, strict=True)]
    cols = [list(c) for c in zip(*cos, strict=True)]
    expected = (direction(cos, rel) + direction(cols, transposed)) / 2
    assert soft_info_nce_loss(a, b, relation, tau).item() == pytest.approx(expected, rel=1e-5)
    # an in-batch negative (R = 0) turned towards a_1 raises the loss
    closer = b.clone()
    closer[1] = torch.tensor([1.0, 0.2])
    assert soft_info_nce_loss(a, closer, relation, tau) > soft_info_nce_loss(a, b, relation, tau)
