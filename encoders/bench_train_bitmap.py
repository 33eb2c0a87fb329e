"""Training speed of the bitmap CNN: the whole loop against the network alone.

For one run configuration (net, task, loss, augmentation, batch size) on rendered crops
(:class:`~mathsearch.encoders.bitmap_data.BitmapCorpus`, rendered once beforehand, so no rendering
is timed), the same steps are timed twice, with the same threads:

* the *loop*: drawing the step's examples (positives, negatives, labels), building the batch from
  the packed crops, the augmentation, forward, backward and the Adam step, as
  :func:`~mathsearch.encoders.bitmap_training.train_bitmap` runs them
  (:class:`~mathsearch.encoders.bitmap_steps.BitmapSteps`);
* the *network*: forward, backward and the Adam step on the same batches, prepared beforehand.

Medians over ``steps`` steps after ``warmup``; rates are anchors/s (the batch size) and crops/s
(the images a step embeds: 3 per anchor for the triplet loss, 2 for Siamese and InfoNCE, 1 for
the label and teacher tasks).

Example::

    report = bench_train_bitmap(BitmapTrainConfig(task="teacher"), corpus, steps=8)
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

import numpy as np
import torch

from mathsearch.encoders.bitmap_augment import CropAugment
from mathsearch.encoders.bitmap_cnn import BitmapCNN, BitmapCNNConfig
from mathsearch.encoders.bitmap_data import BitmapCorpus
from mathsearch.encoders.bitmap_steps import BitmapSteps, build_steps

logger = logging.getLogger(__name__)

__all__ = ["bench_train_bitmap", "format_bench_train_bitmap"]

_CROPS_PER_ANCHOR = {"triplet": 3, "siamese": 2, "info-nce": 2}


def _random_targets(count: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _rates(batch: int, crops: int, seconds: list[float]) -> dict[str, float]:
    median = statistics.median(seconds)
    return {
        "median_step_s": round(median, 4),
        "anchors_per_s": round(batch / median, 1),
        "crops_per_s": round(crops / median, 1),
        "steps": len(seconds),
    }


def _optimise(steps: BitmapSteps, optimizer: torch.optim.Optimizer, prepared: Any) -> None:
    loss = steps.loss(prepared)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def _setup(config: Any, corpus: BitmapCorpus) -> tuple[BitmapSteps, torch.optim.Optimizer]:
    model = BitmapCNN(BitmapCNNConfig(net=config.net, out_norm=config.out_norm))
    model.train()
    targets = (
        _random_targets(len(corpus), model.config.out_dim, config.seed)
        if config.task == "teacher"
        else None
    )
    augment = CropAugment() if config.augment else None
    steps = build_steps(config, corpus, model, targets=targets, augment=augment)
    return steps, torch.optim.Adam(steps.parameters(), lr=config.lr)


def bench_train_bitmap(
    config: Any, corpus: BitmapCorpus, *, steps: int = 8, warmup: int = 2
) -> dict[str, Any]:
    """Time the loop and the network alone (see the module docstring); a JSON-ready report.

    ``config`` is a :class:`~mathsearch.encoders.bitmap_training.BitmapTrainConfig`; the
    ``teacher`` task gets random unit targets (the same cost as a teacher's).

    Raises:
        BitmapTaskError: the task cannot be set up on ``corpus``.
    """
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    batch = config.batch_size
    per_anchor = _CROPS_PER_ANCHOR.get(config.loss, 2) if config.task == "context" else 1
    crops = batch * per_anchor
    total = warmup + steps

    loop_steps, optimizer = _setup(config, corpus)
    rng = np.random.default_rng(config.seed)
    loop_seconds = []
    for step in range(total):
        tick = time.perf_counter()
        idx = rng.choice(loop_steps.anchors, batch)
        _optimise(loop_steps, optimizer, loop_steps.prepare(idx))
        if step >= warmup:
            loop_seconds.append(time.perf_counter() - tick)

    net_steps, optimizer = _setup(config, corpus)
    rng = np.random.default_rng(config.seed)
    prepared = [net_steps.prepare(rng.choice(net_steps.anchors, batch)) for _ in range(total)]
    net_seconds = []
    for step, ready in enumerate(prepared):
        tick = time.perf_counter()
        _optimise(net_steps, optimizer, ready)
        if step >= warmup:
            net_seconds.append(time.perf_counter() - tick)

    loop, network = _rates(batch, crops, loop_seconds), _rates(batch, crops, net_seconds)
    return {
        "net": config.net,
        "task": config.task,
        "loss": config.loss if config.task == "context" else None,
        "augment": bool(config.augment),
        "batch_size": batch,
        "crops_per_step": crops,
        "threads": torch.get_num_threads(),
        "parameters": loop_steps.model.num_parameters(),
        "loop": loop,
        "network": network,
        "loop_over_network": round(loop["median_step_s"] / network["median_step_s"], 3),
    }


def format_bench_train_bitmap(reports: list[dict[str, Any]]) -> str:
    """A table of :func:`bench_train_bitmap` reports."""
    lines = [
        f"{'net':<6} {'task':<9} {'loss':<9} {'aug':<4} {'batch':>5} {'crops/step':>10} "
        f"{'loop crops/s':>12} {'net crops/s':>11} {'loop/net':>8}"
    ]
    for r in reports:
        augment = "yes" if r["augment"] else "no"
        lines.append(
            f"{r['net']:<6} {r['task']:<9} {r['loss'] or '-':<9} {augment:<4}"
            f" {r['batch_size']:>5} {r['crops_per_step']:>10} {r['loop']['crops_per_s']:>12.1f}"
            f" {r['network']['crops_per_s']:>11.1f} {r['loop_over_network']:>8.2f}"
        )
    return "\n".join(lines)
