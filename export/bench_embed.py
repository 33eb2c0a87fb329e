"""``mathsearch bench embed``: equations/s of ONNX Runtime against PyTorch eager, by batch size.

One run embeds the same real equations with both runtimes of the same network (the checkpoint's,
or a freshly initialised graph CNN of the seed's configuration when none is given: the speed does
not depend on the weights) at every batch size, ``repeat`` times, and reports medians:

* ``eq_per_s``: end to end from featurised graphs to embeddings (batch building included:
  :func:`~mathsearch.runtime.graph_batch.pack_graphs` for ONNX Runtime, torch-geometric's
  ``collate``
  +
  one-hot features for PyTorch);
* ``model_eq_per_s``: the network alone (the session call / the eager forward);
* ``ratio``: ONNX Runtime over PyTorch, both ways.

PyTorch runs eager in ``inference_mode`` with the same thread count as ONNX Runtime.

:func:`bench_onnx_files` times model files instead (``bench embed --onnx A.onnx --onnx B.onnx``,
no torch): every file on the same equations, batch sizes and threads, the files taking turns
within each repeat, so that the ratio of each to the first is measured under the same load.
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mathsearch.core.machine import describe_cpu
from mathsearch.export.errors import ExportError
from mathsearch.indexer.extract import extract
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord

logger = logging.getLogger(__name__)

__all__ = [
    "BATCH_SIZES",
    "bench_embed",
    "bench_onnx_files",
    "format_bench_embed",
    "format_files",
    "sample_graphs",
]

BATCH_SIZES = (1, 8, 64, 256, 1024)


def _median_rates(times: list[tuple[float, float]], count: int) -> tuple[float, float]:
    total = statistics.median(prep + run for prep, run in times)
    model = statistics.median(run for _, run in times)
    return count / max(total, 1e-12), count / max(model, 1e-12)


#: ``(runner, graphs, batch) -> (prep, run)``: a runtime's timing of one pass over ``graphs``
_Timer = Callable[[Any, Sequence[EquationGraph], int], tuple[float, float]]


def _time_onnx(session: Any, graphs: Sequence[EquationGraph], batch: int) -> tuple[float, float]:
    from mathsearch.runtime.graph_batch import pack_graphs

    prep = run = 0.0
    for start in range(0, len(graphs), batch):
        tick = time.perf_counter()
        packed = pack_graphs(graphs[start : start + batch])
        tock = time.perf_counter()
        session.run(None, packed.feeds())
        prep += tock - tick
        run += time.perf_counter() - tock
    return prep, run


def _time_torch(model: Any, graphs: Sequence[EquationGraph], batch: int) -> tuple[float, float]:
    import torch

    from mathsearch.encoders.graph_data import collate

    prep = run = 0.0
    with torch.inference_mode():
        for start in range(0, len(graphs), batch):
            tick = time.perf_counter()
            data = collate(graphs[start : start + batch])
            tock = time.perf_counter()
            model(data)
            prep += tock - tick
            run += time.perf_counter() - tock
    return prep, run


def _default_model() -> Any:
    """A random network of the default model's architecture (its card's training config; for
    an ensemble card every tower and the projection), else the seed's 3 x 512 network."""
    from mathsearch.encoders.gcn import GCNConfig, GraphCNN
    from mathsearch.encoders.gcn_ensemble import GCNEnsemble
    from mathsearch.runtime.model_card import load_card
    from mathsearch.runtime.settings import RuntimeSettings

    try:
        card = load_card(RuntimeSettings.from_env().model, verify_sha256=False)
    except (OSError, ValueError) as exc:
        logger.warning("no default model card (%s): timing the seed's 3 x 512 network", exc)
        return GraphCNN(GCNConfig()).eval()
    if card.training.get("ensemble"):
        return GCNEnsemble.from_record(card.training["ensemble"]).eval()
    recorded = (card.training.get("config") or {}).get("model")
    return GraphCNN(GCNConfig.from_dict(dict(recorded)) if recorded else GCNConfig()).eval()


def bench_embed(
    graphs: Sequence[EquationGraph],
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    repeat: int = 3,
    threads: int | None = None,
    device: str = "cpu",
    with_torch: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Time both runtimes on ``graphs`` (see the module docstring); a JSON-able report."""
    import torch

    from mathsearch.encoders.checkpoints import load_model
    from mathsearch.export.gcn_onnx import export_gcn
    from mathsearch.runtime.gcn_session import open_session
    from mathsearch.runtime.providers import CUDA

    threads = threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    if checkpoint is not None:
        model, _ = load_model(checkpoint, map_location="cpu")
    else:  # the shipped default model's architecture (same speed as its weights)
        torch.manual_seed(0)
        model = _default_model()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mathsearch-bench-") as tmp:
        session = open_session(
            export_gcn(model, Path(tmp) / "bench.onnx"), device=device, threads=threads
        )
        providers = session.get_providers()
        runtimes: list[tuple[str, Any, _Timer]] = [("onnxruntime", session, _time_onnx)]
        if with_torch:
            torch_model = model.to("cuda" if providers[0] == CUDA else "cpu")
            runtimes.append(("torch-eager", torch_model, _time_torch))
        bar = tqdm(
            total=len(batch_sizes) * len(runtimes) * (repeat + 1),
            desc="bench embed",
            unit="pass",
            disable=None if progress else True,
        )
        try:
            for batch in batch_sizes:
                row: dict[str, Any] = {"batch_size": batch}
                for name, runner, timer in runtimes:
                    timer(runner, graphs[: min(len(graphs), batch * 2)], batch)  # warm-up
                    bar.update(1)
                    times = []
                    for _ in range(repeat):
                        times.append(timer(runner, graphs, batch))
                        bar.update(1)
                    rate, model_rate = _median_rates(times, len(graphs))
                    row[name] = {"eq_per_s": round(rate, 1), "model_eq_per_s": round(model_rate, 1)}
                if with_torch:
                    onnx, eager = row["onnxruntime"], row["torch-eager"]
                    row["ratio"] = round(onnx["eq_per_s"] / max(eager["eq_per_s"], 1e-12), 2)
                    row["model_ratio"] = round(
                        onnx["model_eq_per_s"] / max(eager["model_eq_per_s"], 1e-12), 2
                    )
                results.append(row)
        finally:
            bar.close()
    return {
        **_sample(graphs, repeat, threads),
        "providers": providers,
        "weights": str(checkpoint)
        if checkpoint
        else "fresh network of the default model's "
        f"architecture ({model.config.layers} x {model.config.hidden}), seed 0",
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "results": results,
    }


def _sample(graphs: Sequence[EquationGraph], repeat: int, threads: int) -> dict[str, Any]:
    """The report fields that describe the timed equations and the run."""
    nodes = sum(g.num_nodes for g in graphs)
    return {
        "equations": len(graphs),
        "mean_nodes": round(nodes / max(len(graphs), 1), 1),
        "repeat": repeat,
        "threads": threads,
        "cpu": describe_cpu().as_dict(),
    }


def _heading(report: dict[str, Any], runs: str) -> str:
    return (
        f"{report['equations']} real equations ({report['mean_nodes']} nodes on average), "
        f"{report['threads']} thread(s), {', '.join(report['providers'])}; "
        f"medians of {report['repeat']} {runs}, equations/s"
        + (f"\ncpu: {report['cpu']['summary']}" if report.get("cpu") else "")
    )


def format_bench_embed(report: dict[str, Any]) -> str:
    """The report as a table a person reads."""
    lines = [
        _heading(report, "runs"),
        f"{'batch':>6} {'onnxruntime':>12} {'torch eager':>12} {'ratio':>6}   "
        f"{'ort model':>10} {'torch model':>11} {'ratio':>6}",
    ]
    for row in report["results"]:
        onnx = row["onnxruntime"]
        eager = row.get("torch-eager", {})
        lines.append(
            f"{row['batch_size']:>6} {onnx['eq_per_s']:>12.1f} {eager.get('eq_per_s', 0):>12.1f} "
            f"{row.get('ratio', 0):>6.2f}   {onnx['model_eq_per_s']:>10.1f} "
            f"{eager.get('model_eq_per_s', 0):>11.1f} {row.get('model_ratio', 0):>6.2f}"
        )
    return "\n".join(lines)


def sample_graphs(sources: Sequence[str], fmt: str | None, count: int) -> list[EquationGraph]:
    """``count`` real equation graphs spread evenly over the records of ``sources``, featurised
    by the indexer alone (no torch; the records that do not featurise are skipped).

    Raises:
        ExportError: the sources hold fewer than ``count`` equations that featurise.
    """
    records = [r for r in extract(list(sources), fmt) if isinstance(r, EquationRecord)]
    graphs: list[EquationGraph] = []
    with Featuriser() as featuriser:
        # a third more than asked for, evenly spread, covers the records that fail
        picks = np.linspace(0, len(records) - 1, min(len(records), count + count // 3 + 8))
        chosen = [records[i] for i in np.unique(picks.round().astype(int))]
        for parsed in featuriser.parse_batch(chosen):
            if isinstance(parsed, ParsedEquation):
                graphs.append(parsed.graph)
    if len(graphs) < count:
        raise ExportError(
            f"{len(graphs)} equations of {', '.join(map(str, sources))} featurise, fewer than "
            f"the {count} asked for"
        )
    keep = np.linspace(0, len(graphs) - 1, count).round().astype(int)
    return [graphs[i] for i in keep]


def bench_onnx_files(
    graphs: Sequence[EquationGraph],
    paths: Sequence[str | os.PathLike[str]],
    *,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    repeat: int = 3,
    threads: int | None = None,
    device: str = "cpu",
    progress: bool = True,
) -> dict[str, Any]:
    """Time graph-CNN ONNX files (cards beside them) on ``graphs``: per batch size, each file's
    median equations/s end to end and of the session alone, and its ratio to the first file's
    (module docstring). A JSON-able report.

    Raises:
        ModelCardError / ModelMismatchError: a file without its card, or of another vocabulary.
    """
    from mathsearch.runtime.gcn_session import GcnSession

    threads = threads or os.cpu_count() or 1
    files = [str(path) for path in paths]
    encoders = [GcnSession(path, device=device, threads=threads) for path in paths]
    bar = tqdm(
        total=len(batch_sizes) * len(encoders) * (repeat + 1),
        desc="bench embed",
        unit="pass",
        disable=None if progress else True,
    )
    results: list[dict[str, Any]] = []
    try:
        for batch in batch_sizes:
            times: list[list[tuple[float, float]]] = [[] for _ in encoders]
            for encoder in encoders:  # warm-up
                _time_onnx(encoder.session, graphs[: min(len(graphs), batch * 2)], batch)
                bar.update(1)
            for _ in range(repeat):
                for timed, encoder in zip(times, encoders, strict=True):
                    timed.append(_time_onnx(encoder.session, graphs, batch))
                    bar.update(1)
            rates = [_median_rates(timed, len(graphs)) for timed in times]
            first = rates[0][0]
            results.append(
                {
                    "batch_size": batch,
                    "models": [
                        {
                            "model": encoder.card.name,
                            "file": file,
                            "eq_per_s": round(rate, 1),
                            "model_eq_per_s": round(model_rate, 1),
                            "ratio_to_first": round(rate / max(first, 1e-12), 3),
                        }
                        for file, encoder, (rate, model_rate) in zip(
                            files, encoders, rates, strict=True
                        )
                    ],
                }
            )
    finally:
        bar.close()
    return {
        **_sample(graphs, repeat, threads),
        "providers": encoders[0].providers,
        "files": files,
        "results": results,
    }


def format_files(report: dict[str, Any]) -> str:
    """:func:`bench_onnx_files`' report as a table a person reads: a row per file, named by its
    card, or by its path where two cards share a name (freshly exported runs all read
    ``gcn-v1``)."""
    lines = [
        _heading(report, "runs (the files take turns)"),
        f"{'batch':>6} {'model':<24} {'end to end':>11} {'session':>9} {'vs first':>9}",
    ]
    for row in report["results"]:
        names = Counter(entry["model"] for entry in row["models"])
        for entry in row["models"]:
            label = entry["model"] if names[entry["model"]] == 1 else entry["file"]
            lines.append(
                f"{row['batch_size']:>6} {label:<24} {entry['eq_per_s']:>11.1f} "
                f"{entry['model_eq_per_s']:>9.1f} {entry['ratio_to_first']:>8.2f}x"
            )
    return "\n".join(lines)
