"""``mathsearch bench train seq2seq``: sequences/s of the ExpEmb training loop vs the network.

Same split as :mod:`mathsearch.encoders.bench_train` (the graph CNN): a step is *data* (cutting a
batch of
pairs, looking the tokens up, padding) and *network* (teacher-forced forward, backward, gradient
clipping, AdamW: :func:`mathsearch.encoders.seq2seq_training.optimise_step`). Three timings on the
same
batches, threads and model:

* ``loop``: what ``train seq2seq`` runs now - each sequence tokenised once
  (:class:`EncodedPairs`), batches length-bucketed by :meth:`EncodedPairs.batches`, cut from
  the table (:meth:`EncodedPairs.take`) and padded with NumPy (:func:`batch_of_ids`);
* ``network``: the same batches prepared beforehand, only the network step timed;
* ``legacy``: the loop it replaced, tokens looked up and padded per step (:func:`make_batch`).

``padding`` is the share of decoder positions that are padding in the bucketed batches (the
decoder runs one GRU cell per position of the longest target), ``padding_unbucketed`` the same
for batches drawn without bucketing: what bucketing saves.

Example::

    report = bench_train_seq2seq(pairs, hidden=128, steps=8)
    report["loop"]["items_per_s"], report["loop_over_network"]
"""

from __future__ import annotations

import logging
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from mathsearch.encoders.bench_train import step_rate
from mathsearch.encoders.seq2seq import ExpEmb, ExpEmbConfig
from mathsearch.encoders.seq2seq_data import (
    Batch,
    EncodedPairs,
    Pair,
    TokenVocabulary,
    batch_of_ids,
    make_batch,
)
from mathsearch.encoders.seq2seq_training import optimise_step

logger = logging.getLogger(__name__)

__all__ = ["bench_train_seq2seq", "format_bench_train_seq2seq"]


def _padding(batches: Sequence[Batch]) -> float:
    cells = sum(b.tgt_out.numel() for b in batches)
    real = sum(int((b.tgt_out != 0).sum()) for b in batches)
    return round(1 - real / max(1, cells), 4)


def _model(
    config: ExpEmbConfig, seed: int, device: str = "cpu"
) -> tuple[ExpEmb, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = ExpEmb(config).to(device).train()
    return model, torch.optim.AdamW(model.parameters(), lr=config.lr)


def bench_train_seq2seq(
    pairs: Sequence[Pair],
    *,
    hidden: int = 128,
    batch_size: int = 64,
    steps: int = 16,
    warmup: int = 2,
    threads: int | None = None,
    legacy: bool = True,
    seed: int = 0,
    device: str = "cpu",
    amp: bool = False,
) -> dict[str, Any]:
    """Time ``steps`` training steps (after ``warmup``) three ways (module docstring).

    On ``device`` ``cuda`` the prepared batches of ``network`` are on the GPU before the clock
    starts, the loop's are copied inside it; every step ends with a synchronise. ``amp``: bf16
    autocast of the forward pass, as ``train seq2seq --amp``.
    """
    from mathsearch.encoders.torch_setup import resolve_device

    device = resolve_device(device)
    cuda = device.startswith("cuda")
    if threads:
        torch.set_num_threads(threads)
    vocab = TokenVocabulary.build((s for p in pairs for s in p), 1)
    config = ExpEmbConfig(vocab_size=len(vocab), hidden=hidden, batch_size=batch_size)
    count = warmup + steps
    # the batches of the run: bucketed by length, in the loop's order
    table = EncodedPairs.build(pairs, vocab)  # what train_expemb does once per run
    rows = table.batches(batch_size, random.Random(seed))[:count]
    chosen = [[pairs[r] for r in batch] for batch in rows]

    def timed(batch_of_step: Callable[[int], Batch]) -> list[float]:
        """Seconds of each step after the warm-up: building the batch + the network step."""
        model, optimizer = _model(config, seed, device)
        seconds = []
        for step in range(len(chosen)):
            tick = time.perf_counter()
            optimise_step(model, optimizer, batch_of_step(step), device=device, amp=amp)
            if cuda:
                torch.cuda.synchronize()
            if step >= warmup:
                seconds.append(time.perf_counter() - tick)
        return seconds

    prepared = [make_batch(b, vocab).to(device) for b in chosen]
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    unbucketed = [
        make_batch(shuffled[i : i + batch_size], vocab)
        for i in range(0, min(len(shuffled), count * batch_size), batch_size)
    ]
    timed(prepared.__getitem__)  # one untimed pass: allocator and threads warm for every timing
    report: dict[str, Any] = {
        "hidden": hidden,
        "batch_size": batch_size,
        "threads": torch.get_num_threads(),
        "device": device,
        "amp": amp,
        "pairs": len(pairs),
        "vocab_size": len(vocab),
        "mean_target_tokens": round(statistics.fmean(len(b) for _, b in pairs), 1),
        "padding": _padding(prepared),
        "padding_unbucketed": _padding(unbucketed),
        "loop": step_rate(batch_size, timed(lambda step: batch_of_ids(table.take(rows[step])))),
        "network": step_rate(batch_size, timed(prepared.__getitem__)),
    }
    report["loop_over_network"] = round(
        report["loop"]["items_per_s"] / report["network"]["items_per_s"], 3
    )
    if legacy:
        legacy_seconds = timed(lambda step: make_batch(chosen[step], vocab))
        report["legacy"] = step_rate(batch_size, legacy_seconds)
        report["loop_over_legacy"] = round(
            report["loop"]["items_per_s"] / report["legacy"]["items_per_s"], 3
        )
    logger.info("bench train seq2seq H=%d: %s", hidden, report)
    return report


def format_bench_train_seq2seq(reports: Sequence[dict[str, Any]]) -> str:
    """One row per width: pairs/s of the loop, the network and the legacy loop, and ratios."""
    lines = [
        f"{'H':>5} {'batch':>5} {'loop/s':>8} {'network/s':>9} {'loop/net':>8} "
        f"{'legacy/s':>8} {'padding':>8} {'unbucketed':>10}"
    ]
    for r in reports:
        legacy = r.get("legacy", {}).get("items_per_s", float("nan"))
        lines.append(
            f"{r['hidden']:>5} {r['batch_size']:>5} {r['loop']['items_per_s']:>8.1f} "
            f"{r['network']['items_per_s']:>9.1f} {r['loop_over_network']:>8.3f} "
            f"{legacy:>8.1f} {r['padding']:>8.1%} {r['padding_unbucketed']:>10.1%}"
        )
    if reports:
        r = reports[0]
        lines.append(
            f"{r['pairs']} pairs, mean target {r['mean_target_tokens']} tokens, "
            f"{r['threads']} threads, {r.get('device', 'cpu')}"
            f"{' bf16 autocast' if r.get('amp') else ''}; pairs/s = batch / median step"
        )
    return "\n".join(lines)
