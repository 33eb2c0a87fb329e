"""``mathsearch export`` of a seq2seq (ExpEmb) checkpoint: the plug-in of
:mod:`mathsearch.cli.export`.

``mathsearch export runs/s2s/checkpoint.pt -o seq2seq-v3.onnx --version 3`` routes here (the
checkpoint's ``"family": "seq2seq"``). Parity data: ``--parity-data`` E-Gen ``.txt`` files or
SemVec ``.json.gz`` sets, else the run's ``heldout-egen.txt`` plus the shared SemVec validation
sets; ``--parity-equations`` sequences are checked. ``--metrics`` is a JSON file (e.g. the
merged ``eval score-k/generation/analogies --json`` outputs) copied into the card.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import random
from pathlib import Path

from mathsearch.cli.common import emit, fail
from mathsearch.core.paths import SHARED_DATA

logger = logging.getLogger(__name__)

__all__ = ["parity_sequences", "run_export"]

_SHARED = SHARED_DATA


def parity_sequences(sources: list[str], limit: int, seed: int = 0) -> list[tuple[str, ...]]:
    """Up to ``limit`` real prefix sequences from E-Gen files and SemVec sets (a random draw)."""
    from mathsearch.encoders.seq2seq_data import read_egen
    from mathsearch.indexer.semvec_prefix import read_semvec_prefix

    sequences: list[tuple[str, ...]] = []
    for source in sources:
        if source.endswith(".json.gz"):
            sequences += [m for c in read_semvec_prefix(source) for m in c.members]
        else:
            sequences += [s for cluster in read_egen([source], limit=2000) for s in cluster]
    unique = list(dict.fromkeys(sequences))
    random.Random(seed).shuffle(unique)
    return unique[:limit]


def run_export(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch export`` for seq2seq checkpoints."""
    try:
        from mathsearch.encoders.checkpoints import CheckpointError
        from mathsearch.encoders.seq2seq_training import load_expemb
        from mathsearch.export.errors import ExportError
        from mathsearch.export.seq2seq_onnx import export_seq2seq, vocab_path
    except ImportError as exc:
        return fail(f"this command needs the train extra (torch): {exc}")
    checkpoint = Path(args.checkpoint)
    try:
        model, vocab, data = load_expemb(checkpoint)
    except CheckpointError as exc:
        return fail(str(exc))
    if getattr(args, "int8", False):
        return fail("--int8 is not available for seq2seq models (the GRU is float32 only)")
    sources = list(args.parity_data or [])
    if not sources:
        held = checkpoint.parent / "heldout-egen.txt"
        sources = ([str(held)] if held.is_file() else []) + sorted(
            glob.glob(str(_SHARED / "semvec" / "*-validationset.json.gz"))
        )
    missing = [s for s in sources if not Path(s).is_file()]
    if missing:
        return fail(f"no such parity data: {missing[0]}")
    try:
        metrics = None
        if args.metrics:
            metrics = json.loads(Path(args.metrics).read_text(encoding="utf-8"))
        sequences = parity_sequences(sources, args.parity_equations)
        run = dict(data.get("run") or {})
        for local in ("out", "progress", "threads"):
            run.pop(local, None)
        for key in ("egen", "semvec", "semvec_exclude"):  # file names, not this machine's paths
            run[key] = [Path(p).name for p in run.get(key) or []]
        training = {
            "steps": data.get("step"),
            "run": run,
            "counts": (data.get("history") or {}).get("counts"),
            "final_loss": ((data.get("history") or {}).get("losses") or [{}])[-1].get("loss"),
        }
        card, parity = export_seq2seq(
            model,
            vocab,
            args.out,
            sequences,
            name=args.name,
            version=args.version,
            tolerance=args.tolerance,
            training=training,
            metrics=metrics,
            parity_data=" ".join(Path(s).name for s in sources[:6]),
            l2=bool(getattr(args, "l2", False)),
        )
    except (ExportError, ValueError, OSError) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(card.to_dict(), indent=2))
        return 0
    emit(f"exported {card.name} (seq2seq, {card.embedding_dim}-d, {card.similarity})")
    emit(f"  model: {args.out}  (opset {card.opset}, IR {card.ir_version})")
    emit(f"  vocabulary: {vocab_path(args.out)} ({len(vocab)} tokens)")
    emit(
        f"  parity: {parity.sequences} real sequences, max |onnx - torch| "
        f"{parity.max_abs_diff:.2e} <= {parity.tolerance:g}"
    )
    return 0
