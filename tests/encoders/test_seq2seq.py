"""The ExpEmb model (expemb seed, appendix A): attention, h_N, eq. 7 loss, shapes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mathsearch.encoders.seq2seq import (
    PAD,
    ExpEmb,
    ExpEmbConfig,
    ExpEmbConfigError,
    additive_attention,
    last_hidden,
    sequence_nll,
)


@pytest.fixture(autouse=True)
def _one_thread() -> object:
    """Tiny tensors: more threads only add contention on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(hidden: int = 8, vocab: int = 12) -> ExpEmb:
    torch.manual_seed(0)
    return ExpEmb(ExpEmbConfig(vocab_size=vocab, hidden=hidden)).eval()


def test_defaults_are_the_seeds() -> None:
    config = ExpEmbConfig(vocab_size=10)
    assert (config.hidden, config.layers, config.lr, config.batch_size) == (1024, 1, 1e-4, 64)
    assert config.max_len == 512 and config.beam_sizes == (1, 10, 50)
    assert ExpEmbConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ExpEmbConfigError):
        ExpEmbConfig(vocab_size=10, mode="other")


def test_additive_attention_is_eq3_and_ignores_padding() -> None:
    torch.manual_seed(1)
    h = 4
    w_a, u_a, v_a = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False), nn.Linear(h, 1)
    query, keys = torch.randn(2, h), torch.randn(2, 3, h)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    got = additive_attention(query, keys, mask, w_a=w_a, u_a=u_a, v_a=v_a)
    for b in range(2):
        n = int(mask[b].sum())
        a = torch.stack([v_a(torch.tanh(w_a(query[b]) + u_a(keys[b, i])))[0] for i in range(n)])
        expected = (torch.softmax(a, 0).unsqueeze(1) * keys[b, :n]).sum(0)
        assert torch.allclose(got[b], expected, atol=1e-6)
    changed = keys.clone()
    changed[1, 2] = 100.0  # a padded position cannot move the context
    assert torch.allclose(
        additive_attention(query, changed, mask, w_a=w_a, u_a=u_a, v_a=v_a)[1], got[1]
    )


def test_last_hidden_is_the_packed_final_state() -> None:
    model = _model()
    src = torch.tensor([[4, 5, 6, 7], [8, 9, PAD, PAD]])
    lengths = torch.tensor([4, 2])
    outputs, _ = model.encoder(model.src_embedding(src))
    packed = nn.utils.rnn.pack_padded_sequence(
        model.src_embedding(src), lengths, batch_first=True, enforce_sorted=False
    )
    _, final = model.encoder(packed)
    assert torch.allclose(last_hidden(outputs, lengths), final[-1], atol=1e-6)
    alone = model.embed(torch.tensor([[8, 9]]), torch.tensor([2]))
    assert torch.allclose(model.embed(src, lengths)[1], alone[0], atol=1e-6)


def test_sequence_nll_is_eq7() -> None:
    torch.manual_seed(2)
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[1, 2, 3], [4, 2, PAD]])
    ce = nn.functional.cross_entropy(logits.reshape(-1, 5), target.reshape(-1), reduction="none")
    expected = (ce.reshape(2, 3) * (target != PAD)).sum(1)
    assert torch.allclose(sequence_nll(logits, target), expected, atol=1e-6)


def test_forward_shapes_and_a_step_lowers_the_loss() -> None:
    model = _model(hidden=16).train()
    src = torch.tensor([[4, 5, 6], [7, 8, PAD]])
    lengths = torch.tensor([3, 2])
    tgt_in, tgt_out = torch.tensor([[1, 6, 5], [1, 9, 9]]), torch.tensor([[6, 5, 2], [9, 9, 2]])
    assert model(src, lengths, tgt_in).shape == (2, 3, 12)
    assert model.embed(src, lengths).shape == (2, 16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = model.loss(src, lengths, tgt_in, tgt_out).item()
    for _ in range(20):
        loss = model.loss(src, lengths, tgt_in, tgt_out)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < first / 2
