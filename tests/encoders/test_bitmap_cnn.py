"""The ECML 2019 bitmap CNN: the seed's parameter counts, shapes, normalisation, batch norm."""

from __future__ import annotations

import pytest
import torch

from mathsearch.encoders.bitmap_cnn import (
    PARAMETERS,
    BitmapCNN,
    BitmapCNNConfig,
    BitmapConfigError,
    grey_to_ink,
    l2_normalise,
)


def test_parameter_counts_are_the_seeds() -> None:
    assert BitmapCNN(BitmapCNNConfig(net="small")).num_parameters() == 45_504
    assert BitmapCNN(BitmapCNNConfig(net="large")).num_parameters() == 255_040
    # the published constant is what the nets really have
    assert {n: BitmapCNN(BitmapCNNConfig(net=n)).num_parameters() for n in PARAMETERS} == PARAMETERS


@pytest.mark.parametrize("net", ["small", "large"])
def test_output_is_64_d_unit_length(net: str) -> None:
    torch.manual_seed(0)
    model = BitmapCNN(BitmapCNNConfig(net=net)).eval()
    x = torch.full((3, 1, 32, 333), 255.0)
    x[0, 0, 10:20, 100:150] = 0.0
    x[1, 0, 5:25, 200:210] = 0.0
    x[2, 0, 12:14, 20:300] = 30.0
    out = model(x)
    assert out.shape == (3, 64)
    assert torch.allclose(out.norm(dim=1), torch.ones(3), atol=1e-4)
    assert not torch.allclose(out[0], out[1])  # the ink matters


def test_input_must_be_single_channel_crops() -> None:
    with pytest.raises(BitmapConfigError):
        BitmapCNN()(torch.zeros(2, 32, 333))
    with pytest.raises(BitmapConfigError):
        BitmapCNNConfig(net="medium")
    with pytest.raises(BitmapConfigError):
        BitmapCNN(BitmapCNNConfig(height=8, width=8))


def test_grey_to_ink_and_normalisation() -> None:
    assert grey_to_ink(torch.tensor([255.0, 0.0])).tolist() == [0.0, 1.0]
    v = l2_normalise(torch.tensor([[3.0, 4.0]]), eps=1e-5)
    assert torch.allclose(v, torch.tensor([[0.6, 0.8]]), atol=1e-5)


def test_large_batch_norm_freezes() -> None:
    torch.manual_seed(0)
    model = BitmapCNN(BitmapCNNConfig(net="large")).train()
    x = torch.rand(4, 1, 32, 333) * 255
    model(x)
    assert model.batch_norm is not None
    before = model.batch_norm.running_mean.clone()
    model.freeze_batch_norm()
    model.train()  # later epochs: the rest trains, the batch norm stays frozen
    assert not model.batch_norm.training
    model(x)
    assert torch.equal(before, model.batch_norm.running_mean)
    model.eval()
    a = model(x[:1])
    b = model(x)[:1]
    assert torch.allclose(a, b, atol=1e-5)  # eval: no batch statistics


def test_out_norm_centres_the_embeddings_without_parameters() -> None:
    """Beyond the seed: the output batch norm keeps the seed's counts and takes out the one
    direction the seed's net starts with (mean pairwise cosine about 0.97)."""
    torch.manual_seed(0)
    x = torch.full((16, 1, 32, 333), 255.0)
    for n in range(16):  # different ink per crop
        x[n, 0, 8 + n % 8 : 20, 30 + 15 * n : 60 + 15 * n] = 0.0
    seed_net = BitmapCNN(BitmapCNNConfig(net="small"))
    torch.manual_seed(0)
    centred = BitmapCNN(BitmapCNNConfig(net="small", out_norm=True))
    assert centred.num_parameters() == 45_504
    assert centred.out_norm is not None and seed_net.out_norm is None
    off = ~torch.eye(16, dtype=torch.bool)
    with torch.no_grad():
        plain = seed_net(x)
        spread = centred.train()(x)
        raw = centred.unnormalised(x)
    assert (plain @ plain.T)[off].mean() > 0.9
    assert (spread @ spread.T)[off].mean().abs() < 0.2
    assert torch.allclose(raw.mean(dim=0), torch.zeros(64), atol=1e-4)
    assert BitmapCNNConfig.from_dict(centred.config.to_dict()).out_norm
