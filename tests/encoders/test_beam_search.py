"""Beam search over the ExpEmb decoder: greedy at size 1, scores = the model's log-probability."""

from __future__ import annotations

import pytest
import torch

from mathsearch.encoders.beam_search import beam_search
from mathsearch.encoders.seq2seq import EOE, SOE, ExpEmb, ExpEmbConfig, sequence_nll


@pytest.fixture(autouse=True)
def _one_thread() -> object:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model() -> ExpEmb:
    torch.manual_seed(3)
    model = ExpEmb(ExpEmbConfig(vocab_size=9, hidden=8)).eval()
    with torch.no_grad():  # make EOE likely enough that hypotheses finish
        model.w_o.bias[EOE] += 2.0
    return model


def _log_prob(model: ExpEmb, src: list[int], ids: tuple[int, ...]) -> float:
    tgt_in = torch.tensor([[SOE, *ids]])
    tgt_out = torch.tensor([[*ids, EOE]])
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([len(src)]), tgt_in)
    return -float(sequence_nll(logits, tgt_out)[0])


def _greedy(model: ExpEmb, src: list[int], max_len: int) -> tuple[int, ...]:
    ids: list[int] = []
    for _ in range(max_len):
        with torch.no_grad():
            logits = model(
                torch.tensor([src]), torch.tensor([len(src)]), torch.tensor([[SOE, *ids]])
            )[0, -1]
        logits[[0, SOE]] = float("-inf")
        token = int(logits.argmax())
        if token == EOE:
            break
        ids.append(token)
    return tuple(ids)


def test_size_one_is_greedy_and_scores_are_log_probabilities(model: ExpEmb) -> None:
    src = [4, 5, 6]
    (best,) = beam_search(model, src, beam_size=1, max_len=12)
    assert best.ids == _greedy(model, src, 12)
    hyps = beam_search(model, src, beam_size=5, max_len=12)
    assert 1 <= len(hyps) <= 5
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    for hyp in hyps:
        assert hyp.finished
        assert hyp.score == pytest.approx(_log_prob(model, src, hyp.ids), abs=1e-4)
    assert hyps[0].score >= best.score - 1e-6  # a wider beam never finds a worse best


def test_bad_arguments(model: ExpEmb) -> None:
    with pytest.raises(ValueError):
        beam_search(model, [], beam_size=2)
    with pytest.raises(ValueError):
        beam_search(model, [4], beam_size=0)
