"""``mathsearch train seq2seq``: the ExpEmb GRU encoder-decoder (expemb seed).

Plug-in of :mod:`encoders.family_cli`: :func:`register` adds the sub-parser, :func:`run` is the
handler. No torch at import time.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

from indexer.cli_io import RAW_HELP, emit, fail, positive_int

logger = logging.getLogger(__name__)

__all__ = ["SHARED_DATA", "default_egen", "register", "run"]

#: ``../shared/data`` beside the clone.
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def default_egen() -> list[str]:
    """The E-Gen cluster files of ``../shared/data/egen`` (sorted; empty when absent)."""
    return sorted(glob.glob(str(SHARED_DATA / "egen" / "*.txt")))


def register(kinds: Any) -> None:
    """Add ``seq2seq`` to ``train``'s sub-parsers."""
    parser = kinds.add_parser(
        "seq2seq",
        help="ExpEmb GRU encoder-decoder on equivalent prefix expressions (expemb seed)",
        description="Train the ExpEmb seq2seq model: EXPEMB-E (--mode equivalent) on pairs of "
        "equivalent expressions (E-Gen clusters, SymPy-generated pairs, optionally SemVec "
        "training classes minus the validation classes) or EXPEMB-A (--mode autoencoder). "
        "Defaults are the seed's (H=1024, AdamW 1e-4, batch 64, 512 tokens, 20 epochs); "
        "the CPU default model uses the smaller settings of the second example.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch train seq2seq --out runs/expemb-e
              mathsearch train seq2seq --out runs/s2s --hidden 128 --lr 1e-3 --max-len 64 \\
                  --generated 600 --semvec ../shared/data/semvec/*-trainset.json.gz \\
                  --semvec-exclude ../shared/data/semvec/*-validationset.json.gz \\
                  --time-budget 600 --threads 2
              mathsearch train seq2seq --mode autoencoder --hidden 128 --out runs/expemb-a
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("egen", nargs="*", metavar="EGEN", help="E-Gen files (default: shared)")
    parser.add_argument("--out", required=True, help="run folder (checkpoint.pt, vocab.json)")
    parser.add_argument("--mode", choices=("equivalent", "autoencoder"), default="equivalent")
    parser.add_argument("--hidden", type=positive_int, default=1024, help="H (1024)")
    parser.add_argument("--layers", type=positive_int, default=1, help="GRU layers (1)")
    parser.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (1e-4)")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--max-len", type=positive_int, default=512, help="tokens (512)")
    parser.add_argument("--epochs", type=positive_int, default=20)
    parser.add_argument("--max-steps", type=positive_int)
    parser.add_argument("--time-budget", type=float, help="seconds of training, then stop")
    parser.add_argument("--max-clusters", type=positive_int, help="E-Gen clusters read")
    parser.add_argument("--held-out", type=float, default=0.05, help="E-Gen clusters held out")
    parser.add_argument("--per-cluster", type=positive_int, default=20, help="pairs/cluster")
    parser.add_argument("--generated", type=int, default=0, help="SymPy seed expressions (0)")
    parser.add_argument("--sympy-timeout", type=float, default=1.0, help="s per operation")
    parser.add_argument("--semvec", nargs="*", default=[], help="SemVec train sets")
    parser.add_argument("--semvec-exclude", nargs="*", default=[], help="classes kept unseen")
    parser.add_argument("--semvec-per-class", type=positive_int, default=20)
    parser.add_argument("--min-count", type=positive_int, default=2, help="vocabulary cut")
    parser.add_argument("--vocabulary", help="a vocab.json to reuse")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=positive_int, default=1, help="torch threads (1)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``train seq2seq``."""
    try:
        from encoders.expemb import ExpEmbConfigError
        from encoders.expemb_data import VocabularyError
        from encoders.expemb_training import RunConfig, train_expemb
    except ImportError as exc:
        return fail(f"this command needs the train extra (torch): {exc}")
    egen = list(args.egen) or default_egen()
    missing = [p for p in egen + args.semvec + args.semvec_exclude if not Path(p).is_file()]
    if missing:
        return fail(f"no such file: {missing[0]}")
    if not 0 <= args.held_out < 1:
        return fail("--held-out must be in [0, 1)")
    run_config = RunConfig(
        egen=egen,
        out=args.out,
        mode=args.mode,
        hidden=args.hidden,
        layers=args.layers,
        lr=args.lr,
        batch_size=args.batch_size,
        max_len=args.max_len,
        epochs=args.epochs,
        max_steps=args.max_steps,
        time_budget=args.time_budget,
        max_clusters=args.max_clusters,
        held_out=args.held_out,
        per_cluster=args.per_cluster,
        generated=args.generated,
        sympy_timeout=args.sympy_timeout,
        semvec=list(args.semvec),
        semvec_exclude=list(args.semvec_exclude),
        semvec_per_class=args.semvec_per_class,
        min_count=args.min_count,
        vocabulary=args.vocabulary,
        seed=args.seed,
        threads=args.threads,
        progress=not args.no_progress,
    )
    try:
        summary = train_expemb(run_config)
    except (ExpEmbConfigError, VocabularyError, ValueError, OSError) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(summary, indent=2))
        return 0
    emit(
        f"trained seq2seq ({args.mode}, H={args.hidden}): {summary['steps']} steps, "
        f"{summary['epochs']} epochs in {summary['seconds']} s (stopped by "
        f"{summary['stopped_by']})"
    )
    emit(f"loss: {summary['first_loss']:.4f} -> {summary['last_loss']:.4f}")
    emit(f"pairs: {summary['counts']}")
    emit(f"checkpoint: {summary['checkpoint']}")
    return 0
