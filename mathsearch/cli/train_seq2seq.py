"""``mathsearch train seq2seq``: the ExpEmb GRU encoder-decoder (expemb seed).

Plug-in of :mod:`mathsearch.cli.families`: :func:`register` adds the sub-parser, :func:`run`
is the
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

from mathsearch.cli.common import RAW_HELP, emit, fail, positive_int
from mathsearch.core.paths import SHARED_DATA as _SHARED_DATA

logger = logging.getLogger(__name__)

__all__ = [
    "SEMVEC_SETS",
    "SHARED_DATA",
    "default_egen",
    "lone_set_file",
    "register",
    "run",
    "table13",
]

#: ``../shared/data`` beside the clone.
SHARED_DATA = _SHARED_DATA


def default_egen() -> list[str]:
    """The E-Gen cluster files of ``../shared/data/egen`` (sorted; empty when absent)."""
    return sorted(glob.glob(str(SHARED_DATA / "egen" / "*.txt")))


#: The SemVec sets (file stems under ``shared/data/semvec``), the seed's 14 and mediumBoolean7.
SEMVEC_SETS = (
    "boolean5",
    "boolean8",
    "boolean10",
    "largeBoolean5",
    "largeSimpleBoolean5",
    "mediumBoolean7",
    "oneVarPoly10",
    "oneVarPoly13",
    "poly5",
    "poly8",
    "simpleBoolean8",
    "simpleBoolean10",
    "simplepoly5",
    "simplepoly8",
    "simplepoly10",
)


def table13(name: str, hidden: int) -> tuple[float, int]:
    """The seed's Table 13 (EXPEMB-E): learning rate and batch size of set ``name`` at H."""
    if name == "simplepoly5":
        return 5e-5, 16
    if name == "poly5":
        return 1e-4, 32
    if name in {"boolean5", "oneVarPoly10"} and hidden == 64:
        return 2e-4, 64
    return 1e-4, 64


def lone_set_file(paths: list[str]) -> str | None:
    """The set's name when ``paths`` is exactly one SemVec set's train file
    (``.../<name>-trainset.json.gz``), else None: such a run is joint training, which a user
    who meant the set's own protocol (``--semvec NAME``) should be told."""
    from mathsearch.indexer.semvec import set_name, set_split

    if len(paths) != 1 or set_split(paths[0]) != "train":
        return None
    name = set_name(paths[0])
    return name if name in SEMVEC_SETS else None


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
              mathsearch train seq2seq --semvec poly5 --hidden 128 --out runs/poly5-128
                  (one SemVec set by name: the seed's per-set protocol, below)
              mathsearch train seq2seq --semvec poly8 --hidden 64 --lr 1e-3 --threads 1 \\
                  --validate-every 3000 --time-budget 1800 --out runs/poly8-64
                  (on a CPU: ten times the seed's rate, for a budget of a few epochs)
              mathsearch train seq2seq --semvec boolean10 --hidden 64 --lr 1e-3 \\
                  --lr-schedule linear --init runs/boolean10-64/last.pt \\
                  --time-budget 2400 --validate-every 3000 --out runs/boolean10-64-decay
                  (go on from a run's last weights while the rate decays to 0)
              mathsearch train seq2seq --semvec boolean5 --hidden 1024 --device cuda \\
                  --out runs/boolean5-1024        (on a GPU; --amp for bf16 autocast)

            A SemVec set given by name (poly5, simplepoly8, boolean5, ...) rather than a file
            is trained alone at the seed's protocol: the Appendix C pairs of its train split
            (every pair within a class, <= 100,000 per class, both directions), no E-Gen,
            score_5 on its validation split after every epoch (EQNET's denominator, as in the
            seed's Table 16) and checkpoint.pt = the best epoch (last.pt = the last), with
            Table 13's learning rate and batch size where the seed changed them. One set's
            train file given as a path, without E-Gen files, is joint training instead (E-Gen
            plus --semvec-per-class pairs a class), and the command warns that it is.
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("egen", nargs="*", metavar="EGEN", help="E-Gen files (default: shared)")
    parser.add_argument("--out", required=True, help="run folder (checkpoint.pt, vocab.json)")
    parser.add_argument("--mode", choices=("equivalent", "autoencoder"), default="equivalent")
    parser.add_argument("--hidden", type=positive_int, default=1024, help="H (1024)")
    parser.add_argument("--layers", type=positive_int, default=1, help="GRU layers (1)")
    parser.add_argument("--lr", type=float, help="AdamW learning rate (1e-4; Table 13)")
    parser.add_argument(
        "--lr-schedule",
        choices=("constant", "linear"),
        default="constant",
        help="constant (the seed's) or linear decay to 0 over the epochs or --time-budget",
    )
    parser.add_argument(
        "--init", metavar="CHECKPOINT", help="warm start: this checkpoint's weights and vocabulary"
    )
    parser.add_argument("--batch-size", type=positive_int, help="pairs per step (64; Table 13)")
    parser.add_argument("--max-len", type=positive_int, default=512, help="tokens (512)")
    parser.add_argument("--epochs", type=positive_int, default=20)
    parser.add_argument("--max-steps", type=positive_int)
    parser.add_argument("--time-budget", type=float, help="seconds of training, then stop")
    parser.add_argument("--max-clusters", type=positive_int, help="E-Gen clusters read")
    parser.add_argument("--held-out", type=float, default=0.05, help="E-Gen clusters held out")
    parser.add_argument("--per-cluster", type=positive_int, default=20, help="pairs/cluster")
    parser.add_argument("--generated", type=int, default=0, help="SymPy seed expressions (0)")
    parser.add_argument("--sympy-timeout", type=float, default=1.0, help="s per operation")
    parser.add_argument(
        "--semvec", nargs="*", default=[], help="SemVec train files, or one set's name (above)"
    )
    parser.add_argument("--semvec-exclude", nargs="*", default=[], help="classes kept unseen")
    parser.add_argument("--semvec-per-class", type=positive_int, default=20)
    parser.add_argument(
        "--validation",
        nargs="*",
        default=[],
        metavar="FILE",
        help="SemVec validation files: score_5 during training, checkpoint.pt = the best "
        "(a set given by name validates on its own split)",
    )
    parser.add_argument(
        "--validate-every", type=int, default=0, help="also validate every N steps (0: per epoch)"
    )
    parser.add_argument(
        "--validation-classes", type=positive_int, help="classes drawn per validation set (all)"
    )
    parser.add_argument("--min-count", type=positive_int, default=2, help="vocabulary cut")
    parser.add_argument("--vocabulary", help="a vocab.json to reuse")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=positive_int, default=1, help="torch threads (1)")
    parser.add_argument(
        "--device", default="cpu", help="cpu (default), cuda, cuda:N or auto (cuda if present)"
    )
    parser.add_argument(
        "--amp", action="store_true", help="bf16 autocast of the forward pass (GPU, or AMX CPU)"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=2000,
        help="without --semvec NAME: write checkpoint.pt every N steps (2000; 0: at the end)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``train seq2seq``."""
    try:
        from mathsearch.encoders.seq2seq import ExpEmbConfigError
        from mathsearch.encoders.seq2seq_data import VocabularyError
        from mathsearch.encoders.seq2seq_training import RunConfig, train_expemb
    except ImportError as exc:
        return fail(f"this command needs the train extra (torch): {exc}")
    named = [name for name in args.semvec if name in SEMVEC_SETS]
    per_set = bool(named)
    if per_set and (len(args.semvec) != 1 or args.egen or args.generated):
        return fail("a SemVec set by name is trained alone: one --semvec NAME, no E-Gen files")
    lr, batch_size = args.lr or 1e-4, args.batch_size or 64
    if per_set:
        name = named[0]
        semvec = [str(SHARED_DATA / "semvec" / f"{name}-trainset.json.gz")]
        validation = [str(SHARED_DATA / "semvec" / f"{name}-validationset.json.gz")]
        egen: list[str] = []
        seed_lr, seed_batch = table13(name, args.hidden)
        lr, batch_size = args.lr or seed_lr, args.batch_size or seed_batch
    else:
        semvec, validation = list(args.semvec), list(args.validation)
        egen = list(args.egen) or default_egen()
        lone = None if args.egen else lone_set_file(semvec)
        if lone:
            logger.warning(
                "--semvec %s is a file: joint training on the E-Gen clusters plus at most %d "
                "pairs a class of it; for the seed's per-set protocol (every pair within a "
                "class, no E-Gen, score_5 on its validation split) give the name: --semvec %s",
                semvec[0],
                args.semvec_per_class,
                lone,
            )
    inputs = egen + semvec + validation + args.semvec_exclude + ([args.init] if args.init else [])
    missing = [p for p in inputs if not Path(p).is_file()]
    if missing:
        hint = f" (set names: {', '.join(SEMVEC_SETS)})" if args.semvec and not per_set else ""
        return fail(f"no such file: {missing[0]}{hint}")
    if not 0 <= args.held_out < 1:
        return fail("--held-out must be in [0, 1)")
    run_config = RunConfig(
        egen=egen,
        out=args.out,
        mode=args.mode,
        hidden=args.hidden,
        layers=args.layers,
        lr=lr,
        lr_schedule=args.lr_schedule,
        init=args.init,
        batch_size=batch_size,
        max_len=args.max_len,
        epochs=args.epochs,
        max_steps=args.max_steps,
        time_budget=args.time_budget,
        max_clusters=args.max_clusters,
        held_out=args.held_out,
        per_cluster=args.per_cluster,
        generated=args.generated,
        sympy_timeout=args.sympy_timeout,
        semvec=semvec,
        semvec_exclude=list(args.semvec_exclude),
        semvec_per_class=args.semvec_per_class,
        all_pairs=per_set,
        validation=validation,
        validate_every=max(0, args.validate_every),
        validation_classes=args.validation_classes,
        min_count=1 if per_set else args.min_count,
        vocabulary=args.vocabulary,
        seed=args.seed,
        threads=args.threads,
        device=args.device,
        amp=args.amp,
        checkpoint_every=max(0, args.checkpoint_every),
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
    if summary.get("validation"):
        best = summary["validation"]["best"]
        emit(f"best validation score_5 {best['score_5']:.1f} at epoch {best['epoch']:g}")
    emit(f"checkpoint: {summary['checkpoint']}")
    return 0
