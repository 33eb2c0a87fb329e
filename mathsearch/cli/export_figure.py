"""``mathsearch export CHECKPOINT`` for a figure checkpoint (``"family": "figure"``).

:func:`run_export` is called by :func:`mathsearch.cli.export.run_export` with its parsed
arguments
(checkpoint, out, name, version, tolerance, metrics, parity_data, parity_equations, json, ...).
The parity data are LaTeX sources with figures (default: the bundled test sample
``tests/resources/indexer/figures``); ``--parity-equations`` caps the figures checked.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from mathsearch.cli.common import emit, fail
from mathsearch.core.paths import TEST_RESOURCES

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_PARITY_SOURCES", "run_export"]

DEFAULT_PARITY_SOURCES = [str(TEST_RESOURCES / "indexer" / "figures")]


def run_export(args: argparse.Namespace) -> int:
    """Export, check parity, write the card and the vocabulary; 0 or 1 with a reason."""
    try:
        from mathsearch.export.figure_onnx import (
            card_metrics,
            export_figure_checkpoint,
            vocabulary_path,
        )
    except ImportError as exc:
        return fail(f"export needs the train extra (torch): {exc}")
    from mathsearch.export.errors import ExportError
    from mathsearch.runtime.model_card import card_path

    sources = list(getattr(args, "parity_data", None) or DEFAULT_PARITY_SOURCES)
    try:
        metrics = None
        if getattr(args, "metrics", None):
            found = json.loads(Path(args.metrics).read_text(encoding="utf-8"))
            metrics = card_metrics(found["metrics"]) if "metrics" in found else {"eval": found}
        card, parity = export_figure_checkpoint(
            args.checkpoint,
            args.out,
            sources,
            name=getattr(args, "name", None),
            version=getattr(args, "version", 1) or 1,
            tolerance=getattr(args, "tolerance", 1e-4) or 1e-4,
            metrics=metrics,
            parity_figures=getattr(args, "parity_equations", 200) or 200,
        )
    except (ExportError, OSError, ValueError) as exc:
        return fail(str(exc))
    if getattr(args, "json", False):
        emit(json.dumps(card.to_dict(), indent=2))
        return 0
    emit(f"exported {card.name} ({card.family}, {card.embedding_dim}-d, {card.similarity})")
    emit(f"  model: {args.out}  (opset {card.opset}, IR {card.ir_version})")
    emit(f"  card:  {card_path(args.out)}")
    emit(f"  vocabulary: {vocabulary_path(args.out)}")
    emit(
        f"  parity: {parity.equations} real figures, max |onnx - torch| "
        f"{parity.max_abs_diff:.2e} <= {parity.tolerance:g}"
    )
    for key, value in card.metrics.items():
        if not isinstance(value, dict):
            emit(f"  {key}: {value}")
    return 0
