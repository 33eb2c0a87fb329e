"""ONNX export of the bitmap CNN (:class:`mathsearch.encoders.bitmap_cnn.BitmapCNN`) with parity and
card.

The exported graph takes ``bitmap``: float32 ``(B, 1, 32, 333)`` grey crops (255 = paper, what
:func:`mathsearch.indexer.bitmap.centre_crop` gives, cast) with a dynamic batch axis and returns
``embedding``: float32 ``(B, 64)``, L2-normalised exactly as in PyTorch eval mode (the large net's
batch norm with its running statistics). Opset 17, IR version 8 (onnxruntime 1.31 reads up to
11), checked with ``onnx.checker``.

The parity check renders real equations, runs PyTorch (eval mode) and ONNX Runtime (CPU) on the
same crops in batches (the last smaller, so the dynamic axis is exercised) and fails over the
tolerance. The card (:class:`mathsearch.runtime.model_card.ModelCard`): family ``bitmap``,
similarity
``dot``,
``vocab_hash`` = :func:`mathsearch.runtime.bitmap_runtime.settings_hash` of the render settings,
``vocab_sizes`` = ``[1, 32, 333]`` (the input's channels, rows, columns).

Example::

    card, parity = export_bitmap_checkpoint("runs/bitmap/checkpoint.pt", "bitmap-v1.onnx", crops)
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

from mathsearch.encoders.bitmap_cnn import BitmapCNN
from mathsearch.encoders.bitmap_training import BitmapTrainingError, load_bitmap_model
from mathsearch.encoders.checkpoints import CheckpointError
from mathsearch.export.errors import ExportError, ParityError
from mathsearch.export.onnx_file import IR_VERSION, OPSET, software_versions, write_onnx
from mathsearch.export.parity import DEFAULT_TOLERANCE, ParityReport
from mathsearch.runtime.bitmap_runtime import INPUT_NAME, OUTPUT_NAME, crops_to_input, settings_hash
from mathsearch.runtime.gcn_session import open_session
from mathsearch.runtime.model_card import ModelCard, file_sha256

logger = logging.getLogger(__name__)

__all__ = [
    "IR_VERSION",
    "OPSET",
    "check_bitmap_parity",
    "export_bitmap",
    "export_bitmap_checkpoint",
]


def export_bitmap(
    model: BitmapCNN, path: str | os.PathLike[str], *, metadata: dict[str, str] | None = None
) -> Path:
    """Write ``model`` (a CPU eval-mode copy; ``model`` is untouched) as ONNX to ``path``.

    Raises:
        ExportError: the exporter or the ONNX checker failed.
    """
    module = copy.deepcopy(model).cpu().eval()
    example = torch.full((2, 1, module.config.height, module.config.width), 255.0)
    return write_onnx(
        module,
        (example,),
        path,
        input_names=[INPUT_NAME],
        output_name=OUTPUT_NAME,
        dynamic_axes={INPUT_NAME: {0: "B"}, OUTPUT_NAME: {0: "B"}},
        what="bitmap CNN",
        metadata=metadata,
    )


def check_bitmap_parity(
    model: BitmapCNN,
    onnx_path: str | os.PathLike[str],
    crops: np.ndarray,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    batch_size: int = 64,
    raise_on_failure: bool = True,
) -> ParityReport:
    """ONNX Runtime (CPU) against PyTorch eval mode on uint8 crops ``(N, 32, 333)``.

    Raises:
        ParityError: no crops, or (with ``raise_on_failure``) a difference over ``tolerance``.
    """
    if len(crops) == 0:
        raise ParityError("the parity check needs at least one rendered equation")
    session = open_session(onnx_path, device="cpu")
    model = copy.deepcopy(model).cpu().eval()
    worst, worst_index, total, batches = 0.0, -1, 0.0, 0
    with torch.no_grad():
        for start in range(0, len(crops), batch_size):
            feed = crops_to_input(crops[start : start + batch_size])
            expected = model(torch.from_numpy(feed)).numpy().astype(np.float64)
            (got,) = session.run([OUTPUT_NAME], {INPUT_NAME: feed})
            diff = np.abs(np.asarray(got, dtype=np.float64) - expected).max(axis=1)
            if diff.max() > worst:
                worst, worst_index = float(diff.max()), start + int(diff.argmax())
            total += float(np.abs(np.asarray(got, dtype=np.float64) - expected).sum())
            batches += 1
    report = ParityReport(
        equations=len(crops),
        batches=batches,
        max_abs_diff=worst,
        mean_abs_diff=total / (len(crops) * model.config.out_dim),
        tolerance=tolerance,
        provider="CPUExecutionProvider",
    )
    if raise_on_failure and not report.passed:
        raise ParityError(
            f"ONNX Runtime differs from PyTorch by {worst:.3g} > {tolerance:g} "
            f"(worst: equation {worst_index} of {len(crops)})"
        )
    return report


def _training(checkpoint: Path, meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The card's ``training`` block and the hold-out metrics found in the run's history."""
    history = meta.get("history") or {}
    training: dict[str, Any] = {
        "checkpoint": checkpoint.name,
        "epoch": meta.get("epoch"),
        "step": meta.get("step"),
        "config": meta.get("train_config"),
        "labels": len(meta["labels"]) if meta.get("labels") else None,
        "epochs": history.get("epochs"),
    }
    report = checkpoint.resolve().parent / "train.json"
    if report.is_file():
        try:
            summary = json.loads(report.read_text(encoding="utf-8"))
            corpus = summary.get("corpus") or {}
            training["data"] = {
                k: {x: (corpus.get(k) or {}).get(x) for x in ("equations", "papers")}
                for k in ("all", "train", "test")
            }
            training["sources"] = corpus.get("sources")
            training["seconds"] = summary.get("seconds")
        except (OSError, json.JSONDecodeError) as exc:
            logger.warning("cannot read %s: %s", report, exc)
    evaluations = [e for e in history.get("evaluations", []) if "holdout_ranking" in e]
    metrics: dict[str, Any] = {}
    if evaluations:
        first, last = evaluations[0], evaluations[-1]
        # the run's first evaluation is of its starting point: untrained, or --pretrained's net
        start = "pretrained" if (meta.get("train_config") or {}).get("pretrained") else "untrained"
        for key in ("holdout_ranking", "holdout_triples", "holdout_siamese"):
            metrics[f"{key}_{start}"] = first[key]
            metrics[key] = last[key]
    return training, metrics


def export_bitmap_checkpoint(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    parity_crops: np.ndarray | Sequence[np.ndarray],
    *,
    name: str | None = None,
    version: int = 1,
    tolerance: float = DEFAULT_TOLERANCE,
    metrics: dict[str, Any] | None = None,
    parity_data: str = "",
) -> tuple[ModelCard, ParityReport]:
    """Export a ``train bitmap`` checkpoint with its parity check and card.

    Raises:
        ExportError: unreadable checkpoint, other render settings, or a failed export.
        ParityError: ONNX Runtime differs from PyTorch by more than ``tolerance``.
    """
    checkpoint, out = Path(checkpoint), Path(out)
    try:
        model, meta = load_bitmap_model(checkpoint)
    except (BitmapTrainingError, CheckpointError) as exc:
        raise ExportError(str(exc)) from exc
    digest = settings_hash()
    if meta.get("settings_hash") != digest:
        raise ExportError(
            f"{checkpoint} was trained on crops rendered with settings "
            f"{str(meta.get('settings_hash'))[:12]}, the renderer uses {digest[:12]}"
        )
    name = name or f"bitmap-v{version}"
    export_bitmap(model, out, metadata={"name": name, "family": "bitmap", "vocab_hash": digest})
    parity = check_bitmap_parity(model, out, np.asarray(parity_crops), tolerance=tolerance)
    training, found = _training(checkpoint, meta)
    config = model.config
    card = ModelCard(
        name=name,
        family="bitmap",
        version=version,
        description=f"Bitmap CNN ({config.net}, {model.num_parameters():,} parameters) over "
        "333x32 centre crops of equations rendered at 100 dpi (ECML 2019 seed, sec. 4.1); "
        f"64-d, L2-normalised, dot product; trained on the {training['config']['task']} proxy "
        "task.",
        embedding_dim=config.out_dim,
        similarity="dot",
        vocab_hash=digest,
        vocab_sizes=[1, config.height, config.width],
        opset=OPSET,
        ir_version=IR_VERSION,
        inputs=[
            {"name": INPUT_NAME, "dtype": "float32", "shape": ["B", 1, config.height, config.width]}
        ],
        outputs=[{"name": OUTPUT_NAME, "dtype": "float32", "shape": ["B", config.out_dim]}],
        sha256=file_sha256(out),
        training=training,
        metrics={**found, **(metrics or {})},
        parity={**parity.to_dict(), "data": parity_data},
        created=datetime.now(UTC).replace(microsecond=0).isoformat(),
        software=software_versions(),
    )
    card.write(out)
    return card, parity
