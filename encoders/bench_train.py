"""``mathsearch bench train gcn``: training speed of the whole loop against the network alone.

One training step is two halves (:class:`mathsearch.encoders.train_state.TrainState`):

* ``prepare`` - the data side: sample the step's triplets (pairs for ``infonce``), cut their
  graphs from the packed corpus (or, ``packed=False``, collate them one ``Data`` per graph, the
  loop as it was), permute identifiers, mask nodes, build the sparse adjacency;
* ``optimise`` - the network side: forward, losses, backward, optimiser step.

:func:`bench_train` times, on the same corpus, configuration and threads:

* ``loop``: ``steps`` whole steps (sampling + prepare + optimise), as ``train`` runs them;
* ``network``: the same steps' batches prepared beforehand, then only ``optimise`` timed;
* ``legacy`` (optional): the loop with per-graph collation (``packed=False``).

Rates are per *item* of the loss (a triplet, or an (anchor, positive) pair for infonce) from the
median step time, after ``warmup`` untimed steps; ``loop_over_network`` is the loop's rate over
the network's (1.0 = the loop costs nothing beyond the network).

``products`` says how far the hardware itself allows the network to go: the step's dense
node-matrix products (:func:`product_flops`, forward and backward of every hidden layer) against
the rate one such product runs at on the same device and threads (:func:`product_rate`).
``bound_items_per_s`` is the rate the network would reach if nothing but those products ran, at
that rate; ``network_over_bound`` the network's share of it. A network near the bound is limited
by the BLAS, not by the code around it.

``cpu`` (:func:`mathsearch.core.machine.describe_cpu`) names the CPU and its vector and matrix
units (AVX-512, AVX512-BF16, AMX, ...), and ``gpu`` the CUDA device, since the same command's
figures differ several times between machines.

Example::

    report = bench_train(corpus, TrainConfig(loss="histogram"), steps=8)
    report["loop_over_network"]     # e.g. 0.93
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import replace
from typing import Any

import torch

from mathsearch.core.machine import describe_cpu
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.prefetch import BatchPrefetcher
from mathsearch.encoders.train_config import TrainConfig
from mathsearch.encoders.train_state import TrainState, TripletBatches
from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

logger = logging.getLogger(__name__)

__all__ = ["bench_train", "format_bench_train", "product_flops", "product_rate"]

_STEPS_PER_EPOCH = 1_000_000  # the schedule must not reach zero during a bench


def _state(config: TrainConfig, corpus: EquationCorpus, vocabulary: Vocabulary) -> TrainState:
    return TrainState(config, corpus, vocabulary, _STEPS_PER_EPOCH)


def step_rate(batch_size: int, seconds: list[float]) -> dict[str, float]:
    """Median step time and items/s (``batch_size`` / median) of timed steps."""
    median = statistics.median(seconds)
    return {
        "median_step_s": round(median, 4),
        "items_per_s": round(batch_size / median, 1),
        "steps": len(seconds),
    }


def product_flops(nodes: int, hidden: int, layers: int, passes: int = 1) -> float:
    """FLOPs of one step's dense node-matrix products, forward and backward.

    Each of the ``layers`` hidden graph convolutions multiplies the (nodes, hidden) states by a
    (hidden, hidden) weight: ``2 N H^2`` forward, and twice that backward (the gradient of the
    input and of the weight), so ``6 N H^2`` per layer and forward pass. ``passes`` is 2 when the
    masking heads run their own pass over the masked graphs. The first layer (an embedding
    lookup on the packed path), the projection to the output and the heads are left out: at the
    seed size they are under 3% of the products.

    Example::

        product_flops(nodes=33_000, hidden=512, layers=3)   # 1.56e11
    """
    return 6.0 * passes * layers * nodes * hidden * hidden


def product_rate(
    rows: int, hidden: int, device: torch.device, *, amp: bool = False, repeat: int = 3
) -> float:
    """Measured FLOP/s of one ``(rows, hidden) @ (hidden, hidden)^T`` product (``nn.Linear``'s
    shape) on ``device`` with torch's current threads, under bf16 autocast with ``amp``; the
    median of ``repeat`` runs after one untimed run."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, hidden, generator=generator).to(device)
    w = torch.randn(hidden, hidden, generator=generator).to(device)
    seconds = []
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
        for i in range(repeat + 1):
            tick = time.perf_counter()
            torch.nn.functional.linear(x, w)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i:
                seconds.append(time.perf_counter() - tick)
    return 2.0 * rows * hidden * hidden / statistics.median(seconds)


def _time_loop(
    config: TrainConfig, corpus: EquationCorpus, vocabulary: Vocabulary, steps: int, warmup: int
) -> dict[str, float]:
    state = _state(config, corpus, vocabulary)
    batches = TripletBatches(corpus, config, _STEPS_PER_EPOCH)
    seconds, prepare = [], []
    total = warmup + steps
    with BatchPrefetcher(
        lambda step: state.prepare(batches(step), step),
        enabled=config.resolve_prefetch(state.device),
    ) as fetch:
        for step in range(total):
            tick = time.perf_counter()
            prepared = fetch.get(step, step + 1 if step + 1 < total else None)
            ready = time.perf_counter()
            state.optimise(prepared)
            if step >= warmup:
                seconds.append(time.perf_counter() - tick)
                prepare.append(ready - tick)
    out = step_rate(config.batch_size, seconds)
    #: the data time the step waited for (all of it without prefetching)
    out["median_prepare_s"] = round(statistics.median(prepare), 4)
    return out


def _time_network(
    config: TrainConfig, corpus: EquationCorpus, vocabulary: Vocabulary, steps: int, warmup: int
) -> tuple[dict[str, float], int]:
    """The network's rate, and the median node count of the timed steps' batches."""
    state = _state(config, corpus, vocabulary)
    batches = TripletBatches(corpus, config, _STEPS_PER_EPOCH)
    prepared = [state.prepare(batches(step), step) for step in range(warmup + steps)]
    seconds = []
    for step, ready in enumerate(prepared):
        tick = time.perf_counter()
        state.optimise(ready)
        if step >= warmup:
            seconds.append(time.perf_counter() - tick)
    nodes = round(statistics.median(int(p.batch.pos.numel()) for p in prepared[warmup:]))
    return step_rate(config.batch_size, seconds), nodes


def _products(
    config: TrainConfig, device: torch.device, nodes: int, network_items_per_s: float
) -> dict[str, float]:
    """The ``products`` part of the report (module docstring)."""
    passes = 2 if config.use_masking and not config.shared_masking_pass else 1
    hidden = config.model.hidden
    flops = product_flops(nodes, hidden, config.model.layers, passes)
    rate = product_rate(nodes, hidden, device, amp=config.amp)
    bound = config.batch_size * rate / flops
    return {
        "nodes_per_step": nodes,
        "passes": passes,
        "gflop_per_step": round(flops / 1e9, 2),
        "gflop_per_s": round(rate / 1e9, 1),
        "bound_items_per_s": round(bound, 1),
        "network_over_bound": round(network_items_per_s / bound, 3),
    }


def bench_train(
    corpus: EquationCorpus,
    config: TrainConfig,
    *,
    steps: int = 8,
    warmup: int = 2,
    legacy: bool = False,
    vocabulary: Vocabulary | None = None,
) -> dict[str, Any]:
    """Time the training loop and the network alone (see the module docstring).

    Args:
        corpus: training equations (the sampler needs papers with two or more equations).
        config: the run's configuration; checkpoints and evaluation are switched off here.
        steps: timed steps per measurement (default 8); ``warmup`` untimed ones before.
        legacy: also time the loop with per-graph collation.
        vocabulary: the corpus's (default: the shipped one).

    Returns:
        JSON-able: the setting (model size, loss, batch, threads, device, graphs and nodes per
        step) and ``loop``, ``network`` (and ``legacy``) rates with ``loop_over_network``, and
        ``products`` (the bound the device's dense products set; module docstring).
    """
    vocabulary = vocabulary or default_vocabulary()
    config = replace(config, checkpoint_dir=None, progress=False, time_budget=None)
    if config.threads:
        torch.set_num_threads(int(config.threads))
    graphs_per_item = 2 if config.loss == "infonce" else 3
    device = config.resolve_device()
    report: dict[str, Any] = {
        "hidden": config.model.hidden,
        "layers": config.model.layers,
        "loss": config.loss,
        "masking": config.use_masking,
        "shared_masking_pass": config.shared_masking_pass,
        "augmentation": config.use_augmentation,
        "batch_size": config.batch_size,
        "graphs_per_step": graphs_per_item * config.batch_size,
        "threads": torch.get_num_threads(),
        "device": str(device),
        "amp": config.amp,
        "prefetch": config.resolve_prefetch(device),
        "corpus_equations": len(corpus),
        "corpus_papers": corpus.num_papers,
        "mean_nodes": round(float(sum(g.num_nodes for g in corpus.graphs) / len(corpus)), 1),
        "cpu": describe_cpu().as_dict(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
    report["loop"] = _time_loop(config, corpus, vocabulary, steps, warmup)
    report["network"], nodes = _time_network(config, corpus, vocabulary, steps, warmup)
    report["products"] = _products(config, device, nodes, report["network"]["items_per_s"])
    report["loop_over_network"] = round(
        report["loop"]["items_per_s"] / report["network"]["items_per_s"], 3
    )
    if legacy:
        report["legacy"] = _time_loop(
            replace(config, packed=False), corpus, vocabulary, max(2, steps // 2), 1
        )
        report["loop_over_legacy"] = round(
            report["loop"]["items_per_s"] / report["legacy"]["items_per_s"], 2
        )
    return report


def format_bench_train(reports: list[dict[str, Any]]) -> str:
    """A table, one row per configuration."""
    head = (
        f"{'hidden x layers':>15} {'loss':>9} {'mask':>5} {'batch':>5} {'loop/s':>8} "
        f"{'network/s':>9} {'loop/net':>8} {'bound/s':>8} {'net/bound':>9} {'prepare ms':>10} "
        f"{'legacy/s':>8}"
    )
    lines = [head]
    for r in reports:
        legacy = r.get("legacy", {}).get("items_per_s")
        products = r["products"]
        lines.append(
            f"{r['hidden']:>9} x {r['layers']:<3} {r['loss']:>9} {str(r['masking'])[0]:>5} "
            f"{r['batch_size']:>5} {r['loop']['items_per_s']:>8.1f} "
            f"{r['network']['items_per_s']:>9.1f} {r['loop_over_network']:>8.3f} "
            f"{products['bound_items_per_s']:>8.1f} {products['network_over_bound']:>9.3f} "
            f"{r['loop']['median_prepare_s'] * 1000:>10.1f} "
            f"{legacy if legacy is not None else '-':>8}"
        )
    first = reports[0] if reports else {}
    lines.append(
        f"items/s: triplets (pairs for infonce) per second, median step; {first.get('threads')} "
        f"threads on {first.get('device')}"
        f"{', next batch prefetched' if first.get('prefetch') else ''}; "
        f"{first.get('corpus_equations')} equations, "
        f"{first.get('mean_nodes')} nodes on average\n"
        f"bound/s: items/s if the step ran only its dense products (forward + backward of every "
        f"hidden layer), at the {first.get('products', {}).get('gflop_per_s')} GFLOP/s one such "
        f"product ran at here"
    )
    if first.get("cpu"):
        lines.append(f"cpu: {first['cpu']['summary']}")
    if first.get("gpu"):
        lines.append(f"gpu: {first['gpu']}")
    return "\n".join(lines)
