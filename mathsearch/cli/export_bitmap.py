"""``mathsearch export CHECKPOINT`` for ``train bitmap`` checkpoints (routed here by the
checkpoint's ``"family": "bitmap"``): ONNX + parity on real rendered equations + model card."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from mathsearch.cli.common import emit, fail
from mathsearch.core.paths import SHARED_DATA, TEST_RESOURCES
from mathsearch.indexer.errors import IndexerError

logger = logging.getLogger(__name__)

__all__ = ["run_export"]

#: Default real data of the parity check (falls back to the bundled hep-th slice).
_SHARED = SHARED_DATA / "hepth2003"
_BUNDLED = TEST_RESOURCES / "export" / "hepth2003-every12th.txt"


def _default_sources() -> list[str]:
    found = sorted(str(p) for p in _SHARED.glob("*.txt"))
    return found or [str(_BUNDLED)]


def run_export(args: argparse.Namespace) -> int:
    """Export a bitmap checkpoint (``args`` of ``mathsearch export``); 0 or 1."""
    try:
        from mathsearch.encoders.bitmap_data import BitmapCorpus
        from mathsearch.export.bitmap_onnx import export_bitmap_checkpoint
        from mathsearch.export.errors import ExportError
    except ImportError as exc:
        return fail(f"export needs the train extra (torch, onnx): {exc}")
    if getattr(args, "int8", False):
        return fail("--int8 is not available for bitmap models")
    try:
        metrics = None
        if args.metrics:
            metrics = {"eval": json.loads(Path(args.metrics).read_text(encoding="utf-8"))}
        sources = args.parity_data or _default_sources()
        count = max(1, int(args.parity_equations or 1000))
        cache = Path(args.cache_dir) if args.cache_dir else Path(args.checkpoint).parent / "cache"
        corpus = BitmapCorpus.cached(sources, args.format, cache, limit=count)
        card, parity = export_bitmap_checkpoint(
            args.checkpoint,
            args.out,
            corpus.crops,
            name=args.name,
            version=args.version,
            tolerance=args.tolerance,
            metrics=metrics,
            parity_data=" ".join(Path(s).name for s in sources),
        )
    except (ExportError, IndexerError, OSError, ValueError) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(card.to_dict(), indent=2))
        return 0
    emit(f"exported {card.name} ({card.family}, {card.embedding_dim}-d, {card.similarity})")
    emit(f"  model: {args.out}  (opset {card.opset}, IR {card.ir_version})")
    emit(
        f"  parity: {parity.equations} real equations, max |onnx - torch| "
        f"{parity.max_abs_diff:.2e} <= {parity.tolerance:g}"
    )
    for key, value in card.metrics.items():
        if not isinstance(value, dict):
            emit(f"  {key}: {value}")
    return 0
