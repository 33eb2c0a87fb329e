"""``mathsearch export CHECKPOINT`` for ``train gcn`` checkpoints (the ``gcn`` family's
``export`` plug-in, :data:`mathsearch.runtime.families.FAMILY_REGISTRY`): ONNX with dynamic
numbers of equations and nodes, parity on real equations, model card, optional int8 variant."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from mathsearch.cli.common import emit, fail
from mathsearch.export.errors import ExportError
from mathsearch.indexer.errors import IndexerError
from mathsearch.runtime.model_card import ModelCard, card_path

logger = logging.getLogger(__name__)

__all__ = ["emit_int8", "emit_json", "metrics_report", "run_export"]


def metrics_report(path: str | None) -> dict | None:
    """``--metrics``: the ``eval ranking --json`` report at ``path`` as card metrics
    (``{"eval": report}``), or None without one.

    Raises:
        OSError, ValueError: the file cannot be read or is not JSON.
    """
    if not path:
        return None
    return {"eval": json.loads(Path(path).read_text(encoding="utf-8"))}


def run_export(args: argparse.Namespace) -> int:
    """Export a graph-CNN checkpoint (``args`` of ``mathsearch export``); 0 or 1."""
    from mathsearch.bench.corpus import default_bench_sources
    from mathsearch.encoders.checkpoints import run_dir
    from mathsearch.export.export_model import export_checkpoint, parity_sample

    checkpoint = Path(args.checkpoint)
    try:
        metrics = metrics_report(args.metrics)
        sources = args.parity_data or default_bench_sources()
        cache = Path(args.cache_dir) if args.cache_dir else run_dir(checkpoint) / "cache"
        graphs = parity_sample(sources, args.format, args.parity_equations, cache)
        card, parity = export_checkpoint(
            checkpoint,
            args.out,
            graphs,
            name=args.name,
            version=args.version,
            tolerance=args.tolerance,
            metrics=metrics,
            parity_data=" ".join(str(Path(s).name) for s in sources),
        )
        variant = None
        if args.int8:
            from mathsearch.export.quantize import quantize_int8

            variant, _ = quantize_int8(args.out, graphs, metrics=metrics)
    except (ExportError, IndexerError, OSError, ValueError) as exc:
        return fail(str(exc))
    if args.json:
        emit_json(card.to_dict(), variant)
        return 0
    emit(f"exported {card.name} ({card.family}, {card.embedding_dim}-d, {card.similarity})")
    emit(f"  model: {args.out}  (opset {card.opset}, IR {card.ir_version})")
    emit(f"  card:  {card_path(args.out)}")
    emit(
        f"  parity: {parity.equations} real equations, max |onnx - torch| "
        f"{parity.max_abs_diff:.2e} <= {parity.tolerance:g}"
    )
    for key, value in card.metrics.items():
        if not isinstance(value, dict):
            emit(f"  {key}: {value}")
    if variant is not None:
        emit_int8(args.out, variant)
    return 0


def emit_json(cards: dict[str, Any], variant: ModelCard | None) -> None:
    """``mathsearch export --json``: the card, with the int8 variant's under ``int8_variant``."""
    if variant is not None:
        cards["int8_variant"] = variant.to_dict()
    emit(json.dumps(cards, indent=2))


def emit_int8(out: str | Path, variant: ModelCard) -> None:
    """The int8 variant's lines of ``mathsearch export``'s report."""
    from mathsearch.export.quantize import int8_dot_instructions, int8_path

    parity = variant.parity
    emit(
        f"  int8 variant: {int8_path(out)} ({parity['products']} products), mean cosine "
        f"{parity['mean_cosine']:.5f} to float32, max |int8 - float32| "
        f"{parity['max_abs_diff']:.3g} (judge it with `mathsearch eval ranking --onnx`)"
    )
    if int8_dot_instructions() is False:
        emit(
            "  note: this CPU has no VNNI or AMX int8 instructions, so the variant embeds about "
            "as fast as float32 here; it pays off on CPUs that have them (docs/export.md, int8)"
        )
