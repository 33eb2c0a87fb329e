"""``mathsearch train bitmap``: the ECML 2019 bitmap CNN on one proxy task (plug-in of
:mod:`mathsearch.cli.families`; no torch at import time).

Outputs in ``--out DIR``: ``checkpoint.pt`` (the input of ``mathsearch export``), ``train.json``
(config, corpus counts, loss and hold-out metrics per epoch) and, unless ``--cache-dir`` says
otherwise, ``cache/bitmaps-*.npz`` (the rendered crops, reused by the next run).
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail, positive_int, unit_fraction
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]

_TASKS = (
    "symbols",
    "keywords",
    "context",
    "teacher",
)  # mathsearch.encoders.bitmap_steps.TASKS, without torch


def register(kinds: Any) -> None:
    """Add ``bitmap`` to ``train``'s sub-parsers."""
    parser = kinds.add_parser(
        "bitmap",
        help="the ECML 2019 bitmap CNN (symbols / keywords / document-context / teacher tasks)",
        description="Train the bitmap CNN of the ECML 2019 seed on rendered 333x32 equation "
        "crops: LaTeX symbols or RAKE keywords as labels (negative sampling, logistic loss), or "
        "the document context (same paper = similar) with the triplet (anchor swap) or Siamese "
        "loss, squared hinges, or InfoNCE; beyond the seed, --task teacher: every crop against the "
        "vector a trained encoder (default: the graph CNN) gives the same equation's LaTeX. "
        "Adam, lr 0.00025 x0.1 every 10 epochs, batches of 100. Papers are split into train and "
        "test (--held-out: the default model's held-out papers, always with a teacher); "
        "hold-out metrics are logged after every epoch.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch train bitmap ../shared/data/hepth2003/*.txt --format hepth \\
                  --task context --loss triplet --net small --out runs/bitmap
              mathsearch train bitmap eq.txt --format hepth --loss info-nce --out runs/nce
              mathsearch train bitmap papers/ --format tex --task keywords --out runs/kw
              mathsearch train bitmap eq.txt --format hepth --task symbols --out runs/sym \\
                  --epochs 2 --steps-per-epoch 50 --limit 3000
              mathsearch train bitmap eq.txt --format hepth --task context --out runs/sym+tri \\
                  --pretrained runs/sym/checkpoint.pt        SYMBOLS+TRIPLES transfer
              mathsearch train bitmap ../shared/data/hepth2003/*.txt --format hepth \
                  --task teacher --teacher gcn --augment --lr 0.001 --out runs/teach
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("sources", nargs="+", metavar="SRC", help="files or folders to train on")
    parser.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    parser.add_argument("--out", required=True, help="output folder (checkpoint.pt, train.json)")
    parser.add_argument("--task", choices=_TASKS, default="context", help="default context")
    parser.add_argument("--loss", choices=("triplet", "siamese", "info-nce"), default="triplet",
                        help="context task loss (default triplet, the seed's; info-nce: in-batch "
                        "negatives, beyond the seed)")  # fmt: skip
    parser.add_argument("--net", choices=("small", "large"), default="small", help="default small")
    parser.add_argument("--epochs", type=positive_int, default=30, help="default 30 (the seed)")
    parser.add_argument(
        "--steps-per-epoch", type=positive_int, help="default: anchors / batch size"
    )
    parser.add_argument("--batch-size", type=positive_int, default=100, help="default 100")
    parser.add_argument("--lr", type=float, default=2.5e-4, help="initial learning rate")
    parser.add_argument("--lr-step", type=positive_int, default=10, help="epochs per x0.1 (10)")
    parser.add_argument(
        "--freeze-bn-epoch",
        type=int,
        default=1,
        help="large net: batch norm frozen after this epoch (1; 0 = never)",
    )
    parser.add_argument("--pretrained", metavar="CKPT", help="start from this run's encoder")
    parser.add_argument("--teacher", default="gcn", metavar="MODEL",
                        help="--task teacher: a family (its default model) or an .onnx path "
                        "(default gcn)")  # fmt: skip
    parser.add_argument("--augment", action="store_true",
                        help="re-sample training crops at a random scale (0.85-1.15) and shift "
                        "(+-12 x, +-2 y pixels)")  # fmt: skip
    parser.add_argument("--out-norm", action="store_true",
                        help="centre the embeddings with a parameter-free batch norm before the "
                        "L2 normalisation (beyond the seed; learns far faster)")  # fmt: skip
    parser.add_argument("--held-out", action="store_true",
                        help="test papers = the default model's held-out hep-th papers, and its "
                        "validation papers left out of training (implied by --task teacher, so "
                        "the teacher never saw the test papers)")  # fmt: skip
    parser.add_argument("--min-label-count", type=positive_int, default=2, help="default 2")
    parser.add_argument("--limit", type=positive_int, help="use at most N equations")
    parser.add_argument("--test-fraction", type=unit_fraction, default=0.2,
                        help="papers held out for the metrics (0.2; 0 = none)")  # fmt: skip
    parser.add_argument("--eval-triplets", type=positive_int, default=2000, help="default 2000")
    parser.add_argument("--seed", type=int, default=0, help="seed of everything random (0)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--workers", type=positive_int, default=1, help="render processes (1)")
    parser.add_argument("--cache-dir", help="rendered-crop cache (default OUT/cache)")
    parser.add_argument("--no-cache", action="store_true", help="always render again")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch train bitmap``; 0 on success, 1 with a one-line reason."""
    try:
        from mathsearch.encoders.bitmap_data import BitmapCorpus, BitmapCorpusError
        from mathsearch.encoders.bitmap_training import (
            BitmapTrainConfig,
            BitmapTrainingError,
            train_bitmap,
        )
    except ImportError as exc:
        return fail(f"training needs the train extra (torch): {exc}")
    from mathsearch.core.errors import EvaluationError
    from mathsearch.export.errors import ModelCardError

    out = Path(args.out)
    try:
        config = BitmapTrainConfig(
            task=args.task,
            loss=args.loss,
            net=args.net,
            epochs=args.epochs,
            steps_per_epoch=args.steps_per_epoch,
            batch_size=args.batch_size,
            lr=args.lr,
            lr_step=args.lr_step,
            freeze_bn_epoch=args.freeze_bn_epoch,
            min_label_count=args.min_label_count,
            eval_triplets=args.eval_triplets,
            seed=args.seed,
            threads=args.threads,
            progress=not args.no_progress,
            pretrained=args.pretrained,
            augment=args.augment,
            out_norm=args.out_norm,
            teacher=args.teacher if args.task == "teacher" else None,
        )
        cache = None if args.no_cache else Path(args.cache_dir or out / "cache")
        corpus = BitmapCorpus.cached(args.sources, args.format, cache, args.limit,
                                     workers=args.workers)  # fmt: skip
        if len(corpus) == 0:
            return fail("no equation could be rendered from the sources")
        held_out = args.held_out or args.task == "teacher"
        if held_out:
            held, validation = _held_out_papers()
            rest, test = corpus.split_on(held)
            train = rest.subset([i for i, p in enumerate(rest.papers) if p not in validation])
        elif args.test_fraction > 0:
            train, test = corpus.split_by_paper(args.test_fraction, args.seed)
        else:
            train, test = corpus, None
        targets = (
            teacher_targets(train.latex, args.teacher, progress=not args.no_progress)
            if args.task == "teacher"
            else None
        )
        summary = train_bitmap(config, train, test, out, targets=targets)
    except (
        BitmapTrainingError,
        BitmapCorpusError,
        EvaluationError,
        IndexerError,
        ModelCardError,
        OSError,
        ValueError,
    ) as exc:
        return fail(str(exc))
    summary.pop("model", None)
    summary["config"] = config.to_dict()
    summary["corpus"] = {
        "all": corpus.summary(),
        "train": train.summary(),
        "test": test.summary() if test is not None else None,
        "split": (
            {
                "held_out": "the default model's held-out hep-th papers (test); its validation "
                "papers left out",
                "limit": args.limit,
            }
            if held_out
            else {"test_fraction": args.test_fraction, "seed": args.seed, "limit": args.limit}
        ),
        "sources": [str(s) for s in args.sources],
    }
    report = out / "train.json"
    out.mkdir(parents=True, exist_ok=True)
    summary["report"] = str(report)
    report.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    if args.json:
        emit(json.dumps(summary, indent=2))
        return 0
    emit(
        f"trained bitmap/{args.net} on {args.task}"
        f"{'/' + args.loss if args.task == 'context' else ''}: {summary['steps']} steps in "
        f"{summary['seconds']:.1f} s on {train.summary()['equations']} equations of "
        f"{train.num_papers} papers"
    )
    for entry in summary["history"]["evaluations"]:
        if "holdout_ranking" in entry:
            emit(
                f"  epoch {entry['epoch']:>3}: hold-out ranking {entry['holdout_ranking']:.4f}"
                f"  triples {entry['holdout_triples']:.4f}  siamese {entry['holdout_siamese']:.4f}"
            )
    emit(f"checkpoint: {summary['checkpoint']}")
    emit(f"report: {report}")
    return 0


def _held_out_papers() -> tuple[list[str], set[str]]:
    """The default model's held-out papers (the test side) and its validation papers (left out
    of training, as `train gcn --shared-data` does, so that they stay fit for tuning)."""
    from mathsearch.evaluation.held_out import held_out_papers, validation_papers

    return held_out_papers(), set(validation_papers())


def latex_vectors(latex: list[str], model: str, *, progress: bool = True) -> Any:
    """``model``'s vectors ``(N, D)`` of every equation, featurised by the one featurisation and
    embedded by the torch-free runtime; zero rows where either refuses an equation.

    Raises:
        ModelCardError: no such model.
    """
    import numpy as np
    from tqdm import tqdm

    from mathsearch.indexer.parse import Featuriser, ParsedEquation
    from mathsearch.indexer.records import EquationRecord
    from mathsearch.runtime.embedders import load_embedder

    embedder = load_embedder(model)
    vectors = np.zeros((len(latex), embedder.dim), dtype=np.float32)
    with Featuriser() as featuriser:
        starts = range(0, len(latex), 256)
        for start in tqdm(starts, desc=f"{model} vectors", disable=not progress or None):
            chunk = latex[start : start + 256]
            records = [EquationRecord(eq_id=f"t{start + n}", doc_id="", position=0, latex=tex)
                       for n, tex in enumerate(chunk)]  # fmt: skip
            parsed = featuriser.parse_batch(records)
            items = [p.embed_item() for p in parsed if isinstance(p, ParsedEquation)]
            where = [n for n, p in enumerate(parsed) if isinstance(p, ParsedEquation)]
            for n, vector in zip(where, embedder.embed(items), strict=True):
                if isinstance(vector, np.ndarray):
                    vectors[start + n] = vector
    refused = int((~vectors.any(axis=1)).sum())
    logger.info("%s: %d of %d equations refused", model, refused, len(latex))
    return vectors


def teacher_targets(latex: list[str], teacher: str, dim: int = 64, *, progress: bool = True) -> Any:
    """Unit targets ``(N, dim)`` of the ``teacher`` task: :func:`latex_vectors` of ``teacher``
    projected to ``dim`` (:func:`~mathsearch.encoders.bitmap_teacher.project_targets`); zero rows
    where the featurisation or the teacher refuses an equation.

    Raises:
        ModelCardError: no such teacher model.
    """
    from mathsearch.encoders.bitmap_teacher import project_targets

    targets, _ = project_targets(latex_vectors(latex, teacher, progress=progress), dim)
    return targets
