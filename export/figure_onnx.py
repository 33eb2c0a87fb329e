"""Export of the figure encoder to ONNX, with its parity check and model card.

Inputs (dynamic batch ``B``): ``tokens`` int64 ``(B, T)``, ``lengths`` int64 ``(B,)``,
``images`` float32 ``(B, C, S, S)``, ``has_image`` float32 ``(B, 1)``; output ``embedding``
float32 ``(B, 50)``. The vocabulary is written beside the model as ``MODEL.vocab.json``; the
card's ``vocab_hash`` is its
:attr:`~mathsearch.indexer.figure_features.FigureVocabulary.content_hash`.

Example::

    card, parity = export_figure_checkpoint("runs/figure/checkpoint.pt", "figure-v2.onnx",
                                            parity_sources=["tests/resources/indexer/figures"])
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mathsearch.encoders.figure_data import FigureCorpus
from mathsearch.encoders.figure_encoder import FigureEncoder
from mathsearch.encoders.figure_training import (
    FigureTrainingError,
    load_figure_checkpoint,
    to_tensors,
)
from mathsearch.export.errors import ExportError, ParityError
from mathsearch.export.onnx_file import IR_VERSION, OPSET, software_versions, write_onnx
from mathsearch.export.parity import ParityReport
from mathsearch.indexer.figure_features import FigureFeatures, featurise_figures
from mathsearch.runtime.gcn_session import open_session
from mathsearch.runtime.model_card import ModelCard, beside, file_sha256

logger = logging.getLogger(__name__)

__all__ = [
    "INPUT_NAMES",
    "card_metrics",
    "check_figure_parity",
    "export_figure",
    "export_figure_checkpoint",
    "vocabulary_path",
]

INPUT_NAMES = ("tokens", "lengths", "images", "has_image")
OUTPUT_NAME = "embedding"


def vocabulary_path(model_path: str | os.PathLike[str]) -> Path:
    """``MODEL.onnx`` -> ``MODEL.vocab.json``."""
    return beside(model_path, ".vocab.json")


def export_figure(
    model: FigureEncoder, path: str | os.PathLike[str], metadata: dict[str, str] | None = None
) -> Path:
    """Write ``model`` (an eval-mode copy) as ONNX to ``path``.

    Raises:
        ExportError: the exporter or the ONNX checker failed.
    """
    module = copy.deepcopy(model).cpu().eval()
    c = module.config
    example = (
        torch.tensor([[2, 3, 4], [5, 0, 0]]),
        torch.tensor([3, 1]),
        torch.zeros(2, c.channels, c.image_size, c.image_size),
        torch.tensor([[1.0], [0.0]]),
    )
    dynamic = {
        "tokens": {0: "B", 1: "T"},
        "lengths": {0: "B"},
        "images": {0: "B"},
        "has_image": {0: "B"},
        OUTPUT_NAME: {0: "B"},
    }
    return write_onnx(
        module,
        example,
        path,
        input_names=INPUT_NAMES,
        output_name=OUTPUT_NAME,
        dynamic_axes=dynamic,
        what="figure encoder",
        metadata=metadata,
    )


def check_figure_parity(
    model: FigureEncoder,
    onnx_path: str | os.PathLike[str],
    features: FigureFeatures,
    tolerance: float = 1e-4,
    batch_size: int = 64,
) -> ParityReport:
    """ONNX Runtime (CPU) vs PyTorch eval mode on real featurised figures.

    Raises:
        ParityError: no figures, or a difference over ``tolerance``.
    """
    if len(features) == 0:
        raise ParityError("the parity check needs at least one figure")
    session = open_session(onnx_path, device="cpu")
    worst, total, batches = 0.0, 0.0, 0
    model = model.cpu().eval()
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            part = features.take(np.arange(start, min(start + batch_size, len(features))))
            expected = model(*to_tensors(part)).numpy().astype(np.float64)
            (got,) = session.run([OUTPUT_NAME], part.feeds())
            diff = np.abs(np.asarray(got, dtype=np.float64) - expected)
            worst, total, batches = (
                max(worst, float(diff.max())),
                total + float(diff.sum()),
                batches + 1,
            )
    report = ParityReport(
        len(features),
        batches,
        worst,
        total / diff.shape[1] / len(features),
        tolerance,
        "CPUExecutionProvider",
    )
    if not report.passed:
        raise ParityError(f"ONNX Runtime differs from PyTorch by {worst:.3g} > {tolerance:g}")
    return report


#: The similarity each loss trains: the seed's losses score the dot product, InfoNCE the cosine
#: (the card's ``similarity``, so the index's kNN space ranks as the model was trained).
_SIMILARITY = {"mse": "dot", "ce": "dot", "info-nce": "cosine"}
#: How the card describes each ``train figure --loss``.
_LOSS_WORDS = {
    "mse": "MSE on the dot product",
    "ce": "cross-entropy on the sigmoid of the dot product",
    "info-nce": "text and fusion stages by in-batch InfoNCE with the relation as soft targets "
    "(the image CNN by the seed's triplet hinge)",
}


def export_figure_checkpoint(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    parity_sources: Sequence[str | os.PathLike[str]],
    *,
    name: str | None = None,
    version: int = 1,
    tolerance: float = 1e-4,
    metrics: dict[str, Any] | None = None,
    parity_figures: int = 200,
) -> tuple[ModelCard, ParityReport]:
    """Export a ``train figure`` checkpoint: ONNX, vocabulary beside it, parity, card.

    Raises:
        ExportError: unreadable checkpoint or failed export; ParityError: over tolerance.
    """
    try:
        model, vocabulary, meta = load_figure_checkpoint(checkpoint)
        records = FigureCorpus.extract(parity_sources, min_words=1)[:parity_figures]
    except (FigureTrainingError, ValueError) as exc:
        raise ExportError(str(exc)) from exc
    out = Path(out)
    name = name or f"figure-v{version}"
    export_figure(
        model, out, {"name": name, "family": "figure", "vocab_hash": vocabulary.content_hash}
    )
    vocabulary.save(vocabulary_path(out))
    features = featurise_figures([r.to_item() for r in records], vocabulary)
    parity = check_figure_parity(model, out, features, tolerance)
    c = model.config
    loss = str((meta.get("train_config") or {}).get("loss", "mse"))
    found = dict(metrics or {})
    report = Path(checkpoint).resolve().parent / "train.json"
    if not found and report.is_file():
        found = card_metrics(json.loads(report.read_text(encoding="utf-8")).get("metrics", {}))
    card = ModelCard(
        name=name,
        family="figure",
        version=version,
        description="Figure encoder (figure-embeddings seed): caption + mention text through an "
        "LSTM (100-d words, 50 units), the image through a small CNN (2 x conv 32 3x3, max "
        "pool, dropout, dense 100, dense 50), concatenation + batch norm + dense -> 50-d; weak "
        "supervision 1 / 0.6 / 0 (same / citing / random article), "
        + _LOSS_WORDS.get(loss, "MSE")
        + ".",
        embedding_dim=c.out_dim,
        similarity=_SIMILARITY.get(loss, "dot"),
        vocab_hash=vocabulary.content_hash,
        vocab_sizes=[
            vocabulary.size,
            vocabulary.max_words,
            vocabulary.image_size,
            vocabulary.channels,
        ],
        opset=OPSET,
        ir_version=IR_VERSION,
        inputs=[
            {"name": "tokens", "dtype": "int64", "shape": ["B", "T"]},
            {"name": "lengths", "dtype": "int64", "shape": ["B"]},
            {
                "name": "images",
                "dtype": "float32",
                "shape": ["B", c.channels, c.image_size, c.image_size],
            },
            {"name": "has_image", "dtype": "float32", "shape": ["B", 1]},
        ],
        outputs=[{"name": OUTPUT_NAME, "dtype": "float32", "shape": ["B", c.out_dim]}],
        sha256=file_sha256(out),
        training={
            "checkpoint": Path(checkpoint).name,
            "config": meta.get("train_config"),
            "split": meta.get("split"),
            "sources": meta.get("sources"),
            "model_config": c.to_dict(),
            "vocabulary": vocabulary_path(out).name,
        },
        metrics=found,
        parity={**parity.to_dict(), "data": " ".join(Path(s).name for s in parity_sources)},
        created=datetime.now(UTC).replace(microsecond=0).isoformat(),
        software=software_versions(),
    )
    card.write(out)
    return card, parity


def card_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of a ``train figure`` report for the card."""
    out: dict[str, Any] = {}
    for name, m in (metrics.get("similarity") or {}).items():
        out[f"similarity_accuracy_{name}"] = m.get("accuracy")
    for name, m in (metrics.get("recommendation") or {}).items():
        out[f"recommendation_p@5_{name}"] = m.get("p@5")
    for name, m in (metrics.get("paired") or {}).items():
        t = m.get("p@5") or {}
        out[f"recommendation_p@5_{name}_minus_tfidf"] = [
            t.get("mean_difference"),
            t.get("ci_low"),
            t.get("ci_high"),
        ]
    if metrics:
        out["eval"] = metrics
    return out
