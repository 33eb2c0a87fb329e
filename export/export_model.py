"""``mathsearch export``: a training checkpoint to ``MODEL.onnx`` + ``MODEL.card.json``.

Steps: load the checkpoint (refused when its vocabulary is not the featuriser's), export the
eval-mode model (:func:`mathsearch.export.gcn_onnx.export_gcn`), check parity against PyTorch on
real
equations (:func:`mathsearch.export.parity.check_parity`; a failure deletes nothing but writes no
card and
raises), then write the card with the training run's configuration and metrics.

Metrics in the card: the hold-out ranking scores logged during training (untrained at step 0,
trained at the last evaluation) and, with ``metrics``, the JSON report of
``mathsearch eval ranking --json`` (the BoW baseline on the same triplets, confidence widths).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from mathsearch.encoders.checkpoints import load_model, run_dir
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.export.errors import ExportError
from mathsearch.export.gcn_onnx import IR_VERSION, OPSET, OUTPUT_NAME, export_gcn
from mathsearch.export.onnx_file import software_versions
from mathsearch.export.parity import DEFAULT_TOLERANCE, ParityReport, check_parity
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary
from mathsearch.runtime.graph_batch import INPUT_NAMES
from mathsearch.runtime.model_card import ModelCard, file_sha256

logger = logging.getLogger(__name__)

__all__ = ["PARITY_EQUATIONS", "export_checkpoint", "parity_sample"]

#: Real equations the parity check uses by default (the issue asks for at least 1,000).
PARITY_EQUATIONS = 1000

_SHAPES = {"edge_index": [2, "E"], "ptr": ["B+1"]}
_INPUT_SPEC = [
    {"name": name, "dtype": "int64", "shape": _SHAPES.get(name, ["N"])} for name in INPUT_NAMES
]


def parity_sample(
    sources: Sequence[str],
    fmt: str | None,
    count: int = PARITY_EQUATIONS,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[EquationGraph]:
    """``count`` real equations spread evenly over ``sources`` (featurised, cached when asked).

    Raises:
        ExportError: the sources hold fewer than ``count`` equations.
    """
    if cache_dir is not None:
        corpus = EquationCorpus.cached(list(sources), fmt, cache_dir)
    else:
        corpus = EquationCorpus.from_sources(list(sources), fmt)
    if len(corpus) < count:
        raise ExportError(
            f"the parity data holds {len(corpus)} equations, fewer than the {count} asked for "
            "(point --parity-data at more real equations, e.g. ../shared/data/hepth2003/*.txt)"
        )
    picks = np.linspace(0, len(corpus) - 1, count).round().astype(int)
    return [corpus.graphs[i] for i in picks]


def _training(checkpoint: Path, meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The card's ``training`` and ``metrics`` from the checkpoint and its run's train.json."""
    config = dict(meta.get("train_config") or {})
    for local in ("checkpoint_dir", "progress", "device"):  # this machine's, not the model's
        config.pop(local, None)
    evaluations = list((meta.get("history") or {}).get("evaluations") or [])
    training: dict[str, Any] = {
        "checkpoint": checkpoint.name,
        "step": meta.get("step"),
        "total_steps": meta.get("total_steps"),
        "config": config,
        "split": config.get("split"),
    }
    report = run_dir(checkpoint) / "train.json"
    if report.is_file():
        try:
            summary = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            logger.warning("cannot read %s: %s", report, exc)
        else:
            corpus = summary.get("corpus") or {}
            shared = corpus.get("shared")
            parts = ("all", "train", "test")
            if shared:  # train gcn --shared-data: the hepth2003 corpus the held-out split is of
                corpus = {**corpus, "hepth2003": shared.get("hepth2003")}
                parts = ("hepth2003", "train", "test")
                training["sources"] = shared.get("sources")
                training["held_out"] = shared.get("held_out")
                training["parts"] = {
                    name: {k: part.get(k) for k in ("equations", "papers", "sections")}
                    for name, part in (shared.get("parts") or {}).items()
                }
            training["data"] = {
                part: {k: (corpus.get(part) or {}).get(k) for k in ("equations", "papers")}
                for part in parts
            }
            training["train_seconds"] = summary.get("train_seconds")
            training["seconds"] = summary.get("seconds")
            training["triplets_per_second"] = summary.get("triplets_per_second")
    ensemble = meta.get("ensemble")
    if ensemble:  # mathsearch train ensemble: the towers' networks (bench embed rebuilds them)
        training["ensemble"] = {
            "towers": len(ensemble["model_configs"]),
            "members": [run_dir(str(m)).name for m in ensemble["members"]],
            "model_configs": list(ensemble["model_configs"]),
            **({"weights": ensemble["weights"]} if ensemble.get("weights") else {}),
            "out_dim": ensemble["out_dim"],
            "fit_equations": ensemble.get("fit_equations"),
        }
    metrics: dict[str, Any] = {}
    if evaluations:
        # step 0 is the random network, or for --init runs the checkpoint they started from
        start = "init" if config.get("init_from") else "untrained"
        metrics[f"holdout_ranking_{start}"] = evaluations[0]["ranking_score"]
        metrics["holdout_ranking"] = evaluations[-1]["ranking_score"]
        metrics["holdout_ranking_step"] = evaluations[-1]["step"]
        metrics["holdout_bound_95"] = evaluations[-1].get("bound_95")
    return training, metrics


def _with_untrained(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` with ``holdout_ranking_untrained`` taken from an ``eval ranking`` report
    (``--metrics``) when the run's history has none (runs started from another checkpoint);
    for a checkpoint without any history (an ensemble), ``holdout_ranking`` and its width too."""
    scores = (metrics.get("eval") or {}).get("scores") or {}
    if "holdout_ranking_untrained" not in metrics:
        untrained = (scores.get("untrained") or {}).get("ranking_score")
        if untrained is not None:
            metrics["holdout_ranking_untrained"] = untrained
    model = scores.get("model") or {}
    if "holdout_ranking" not in metrics and model.get("ranking_score") is not None:
        metrics["holdout_ranking"] = model["ranking_score"]
        metrics["holdout_bound_95"] = model.get("bound_95")
        metrics["holdout_ranking_triplets"] = metrics["eval"].get("triplets")
    return metrics


def _description(config: Any, training: dict[str, Any]) -> str:
    """One sentence on what the model is, from its configuration."""
    used = training.get("config") or {}
    loss = used.get("loss", "histogram")
    masking = used.get("use_masking", True)
    permutation = used.get("use_augmentation", True)
    crops = float(used.get("crop_rate") or 0.0)
    norm = "L2 normalisation (cosine)" if config.normalisation == "l2" else "soft normalisation"
    pooling = "gated mean pooling" if config.pooling == "gated" else "mean pooling"
    sources = training.get("sources")
    trained_on = f"; trained on {' + '.join(sorted(sources))}" if isinstance(sources, dict) else ""
    if used.get("init_from"):
        trained_on += f"; started from the weights of {run_dir(str(used['init_from'])).name}"
    soup = used.get("soup")
    if isinstance(soup, list) and soup:
        trained_on += f"; uniform soup (mean weights) of {len(soup)} runs"
    ensemble = training.get("ensemble")
    if isinstance(ensemble, dict) and ensemble.get("model_configs"):
        return _ensemble_description(config, ensemble, loss, crops, trained_on)
    return (
        f"Graph CNN over Presentation MathML (KDD 2020 seed, section 4): {config.layers} x "
        f"{config.hidden} sum graph convolutions, {pooling}, {config.out_dim}-d, {norm}; "
        f"{loss} loss{' + masking task' if masking else ''}, "
        f"{'identifier permutation' if permutation else 'no identifier permutation'}"
        f"{f', sub-formula crops as anchors for {crops:g} of the pairs' if crops else ''}"
        f"{trained_on}."
    )


def _ensemble_description(
    config: Any, ensemble: dict[str, Any], loss: str, crops: float, trained_on: str
) -> str:
    """:func:`_description` of an ensemble: its towers' shapes and, if any, their weights."""
    shapes = [
        f"{c['layers']} x {c['hidden']}{' gated' if c.get('pooling') == 'gated' else ''}"
        for c in ensemble["model_configs"]
    ]
    same = len(set(shapes)) == 1
    towers = f"each {shapes[0]}" if same else ", ".join(shapes)
    weights = ensemble.get("weights")
    mean = (
        "mean" if not weights else "weighted mean (" + ", ".join(f"{w:.3g}" for w in weights) + ")"
    )
    return (
        f"Ensemble of {len(shapes)} graph CNNs over Presentation MathML (KDD 2020 seed, "
        f"section 4), {towers} sum graph convolutions, L2-normalised, {loss} loss"
        f"{f', sub-formula crops as anchors for {crops:g} of the pairs' if crops else ''}"
        f"{trained_on} (the first tower's run; the others differ in seed, start or size); their "
        f"concatenated unit vectors, projected to {config.out_dim} dimensions on their "
        "principal directions over training-paper equations and L2-normalised "
        f"(inner product ~ the {mean} of the towers' cosines)."
    )


def export_checkpoint(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    parity_graphs: Sequence[EquationGraph],
    *,
    name: str | None = None,
    version: int = 1,
    description: str = "",
    tolerance: float = DEFAULT_TOLERANCE,
    metrics: dict[str, Any] | None = None,
    parity_data: str = "",
    vocabulary: Vocabulary | None = None,
) -> tuple[ModelCard, ParityReport]:
    """Export a graph-CNN checkpoint with its parity check and card (module docstring).

    Raises:
        ExportError: unreadable checkpoint, another vocabulary, or a failed export.
        ParityError: ONNX Runtime differs from PyTorch by more than ``tolerance``.
    """
    from mathsearch.encoders.checkpoints import CheckpointError

    checkpoint = Path(checkpoint)
    out = Path(out)
    vocabulary = vocabulary or default_vocabulary()
    try:
        model, meta = load_model(checkpoint, map_location="cpu")
    except CheckpointError as exc:
        raise ExportError(str(exc)) from exc
    if meta.get("vocab_hash") != vocabulary.content_hash:
        raise ExportError(
            f"{checkpoint} was trained on vocabulary {str(meta.get('vocab_hash'))[:12]}, the "
            f"featuriser uses {vocabulary.content_hash[:12]}"
        )
    family = "gcn"
    name = name or f"{family}-v{version}"
    export_gcn(
        model,
        out,
        metadata={"name": name, "family": family, "vocab_hash": vocabulary.content_hash},
    )
    parity = check_parity(model, out, parity_graphs, tolerance=tolerance)
    training, found = _training(checkpoint, meta)
    card = ModelCard(
        name=name,
        family=family,
        version=version,
        description=description or _description(model.config, training),
        embedding_dim=model.config.out_dim,
        similarity="cosine" if model.config.normalisation == "l2" else "dot",
        vocab_hash=vocabulary.content_hash,
        vocab_sizes=list(model.config.sizes),
        opset=OPSET,
        ir_version=IR_VERSION,
        inputs=list(_INPUT_SPEC),
        outputs=[{"name": OUTPUT_NAME, "dtype": "float32", "shape": ["B", model.config.out_dim]}],
        sha256=file_sha256(out),
        training=training,
        metrics=_with_untrained({**found, **(metrics or {})}),
        parity={**parity.to_dict(), "data": parity_data},
        created=datetime.now(UTC).replace(microsecond=0).isoformat(),
        software=software_versions(),
    )
    card.write(out)
    return card, parity
