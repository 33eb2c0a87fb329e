"""Beam search over the ExpEmb decoder (expemb seed, section 3 "Other Details" and 5.1).

For one source expression the encoder runs once; ``beam_size`` hypotheses are extended token
by token, each scored by its log-probability ``sum_t log P(y_t | y_<t, x)`` (eq. 6-7, no length
normalisation: the output "with minimum loss"). A hypothesis ends when it emits ``EOE``; the
search stops when ``beam_size`` hypotheses have ended and no live one can still beat the worst
of them (scores only fall), or after ``max_len`` tokens. Every finished hypothesis is returned,
best first: the evaluation checks them all (section 5.1: "if any of the outputs are correct").
``beam_size = 1`` is greedy decoding.

Example::

    hyps = beam_search(model, vocab.encode(["+", "x", "x"]), beam_size=10, max_len=64)
    hyps[0].ids, hyps[0].score
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mathsearch.encoders.seq2seq import EOE, PAD, SOE, ExpEmb

logger = logging.getLogger(__name__)

__all__ = ["Hypothesis", "beam_search"]


@dataclass(frozen=True)
class Hypothesis:
    """One decoded sequence (ids without SOE/EOE) and its log-probability."""

    ids: tuple[int, ...]
    score: float
    finished: bool = True


@torch.no_grad()
def beam_search(
    model: ExpEmb, src: Sequence[int], beam_size: int = 10, max_len: int = 64
) -> list[Hypothesis]:
    """Hypotheses for ``src`` (ids), best first: the finished ones, else the live ones.

    Raises:
        ValueError: ``beam_size < 1`` or an empty source.
    """
    if beam_size < 1 or not src:
        raise ValueError("beam search needs beam_size >= 1 and a non-empty source")
    model.eval()
    src_t = torch.tensor([list(src)], dtype=torch.long)
    keys, state = model.encode(src_t, torch.tensor([len(src)]))
    mask = src_t != PAD
    projected = model.u_a(keys)
    alive: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    finished: list[Hypothesis] = []
    for _ in range(max_len):
        k = len(alive)
        tokens = torch.tensor([ids[-1] if ids else SOE for ids, _ in alive])
        logits, new_state = model.decode_step(
            tokens, state, keys.expand(k, -1, -1), mask.expand(k, -1), projected.expand(k, -1, -1)
        )
        logp = torch.log_softmax(logits, dim=-1)
        total = torch.tensor([score for _, score in alive]).unsqueeze(1) + logp
        best = torch.topk(total.flatten(), min(2 * beam_size, total.numel()))
        vocab = logp.size(1)
        keep: list[tuple[tuple[int, ...], float]] = []
        rows: list[int] = []
        for value, flat in zip(best.values.tolist(), best.indices.tolist(), strict=True):
            row, token = divmod(flat, vocab)
            ids = alive[row][0]
            if token == EOE:
                if len(finished) < beam_size or value > finished[-1].score:
                    finished.append(Hypothesis(ids, value))
                    finished.sort(key=lambda h: -h.score)
                    del finished[beam_size:]
            elif token not in (PAD, SOE) and len(keep) < beam_size:
                keep.append(((*ids, token), value))
                rows.append(row)
        if not keep:
            break
        if len(finished) >= beam_size and keep[0][1] <= finished[-1].score:
            break
        alive = keep
        state = new_state[:, rows]
    if finished:
        return finished
    return [Hypothesis(ids, score, finished=False) for ids, score in alive]
