"""``mathsearch train gcn``: the KDD 2020 graph CNN (the ``gcn`` family's ``train`` plug-in,
:data:`mathsearch.runtime.families.FAMILY_REGISTRY`; no torch at import time).

Outputs in ``--out DIR``: ``checkpoint.pt`` (the latest checkpoint, the input of ``mathsearch
export``), ``checkpoints/step-XXXXXXXX.pt`` (the last few), ``train.json`` (config, corpus
counts, losses per epoch, hold-out ranking scores) and, unless ``--cache-dir`` says otherwise,
``cache/corpus-*.npz`` (the featurised corpus, reused by the next run on the same sources).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import emit, positive_int, unit_fraction
from mathsearch.encoders.prefetch import PREFETCH_MODES
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]

_LOSSES = (
    "histogram",
    "triplet",
    "ecml",
    "infonce",
)  # mathsearch.encoders.train_config.LOSSES, no torch


def register(kinds: Any) -> None:
    """Add ``gcn`` to ``train``'s sub-parsers."""
    gcn = _gcn_parser(kinds)
    _add_data_options(gcn)
    _add_optimiser_options(gcn)
    _add_model_options(gcn)
    _add_run_options(gcn)
    _add_task_options(gcn)
    _add_sampling_options(gcn)
    _add_augmentation_options(gcn)
    _add_start_options(gcn)
    _add_split_options(gcn)
    _add_evaluation_options(gcn)
    _add_device_options(gcn)
    _add_featurisation_options(gcn)
    _add_output_options(gcn)


def _gcn_parser(kinds: Any) -> argparse.ArgumentParser:
    """The ``gcn`` sub-parser: its help, description and examples (no arguments yet)."""
    gcn: argparse.ArgumentParser = kinds.add_parser(
        "gcn",
        help="the KDD 2020 graph CNN (histogram loss + masking task)",
        description="Train the graph CNN of the KDD 2020 seed: triplets sampled by section, "
        "paper and citation; histogram (or triplet) loss plus the masking task; identifier "
        "permutation; Adam with a linearly decreasing learning rate. The papers are split "
        "into train and test; the hold-out ranking score is logged after every epoch.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch train gcn ../shared/data/hepth2003/*.txt --format hepth --out runs/gcn
              mathsearch train gcn papers/ --format tex --out runs/tex --epochs 5 --json
              mathsearch train gcn eq.txt --format hepth --out runs/small --limit 2000 \\
                  --steps-per-epoch 50 --batch-size 32 --loss triplet --no-augmentation
              mathsearch train gcn ../shared/data/hepth2003/*.txt --format hepth --out runs/gcn \\
                  --resume runs/gcn/checkpoint.pt        continue an interrupted run
              mathsearch train gcn --shared-data ../shared/data --out runs/gcn-v2 --loss infonce \\
                  --hidden 256 --layers 2 --batch-size 256 --lr 2e-3 --normalisation l2 \\
                  --time-budget 3600 --epochs 1000      every shared equation, one CPU hour
              mathsearch train gcn --shared-data ../shared/data \\
                  --shared-sources hepth2003,documents --out runs/gcn-v4 --loss infonce \\
                  --out-dim 128 --hidden 128 --layers 2 \\
                  --batch-size 256 --lr 2e-3 --no-masking --no-augmentation --normalisation l2 \\
                  --time-budget 300 --epochs 1000 --amp   gcn-v4: the 2003 papers, 5 CPU minutes
              mathsearch train gcn --shared-data ../shared/data \\
                  --shared-sources hepth2003,documents --out runs/gcn-v5 --loss infonce \\
                  --out-dim 128 --hidden 128 --layers 2 \\
                  --batch-size 256 --lr 2e-3 --no-masking --no-augmentation --normalisation l2 \\
                  --time-budget 300 --epochs 1000 --amp --seed 2 --init runs/pre/checkpoint.pt
                                  gcn-v5: runs/pre (gcn-v4's command without
                                  --shared-sources: every source, 5 minutes) fine-tuned 5 minutes
              ... --crop-rate 0.5     gcn-v6: gcn-v5's two stages, half of every batch's pairs
                                  (a sub-formula of an equation, that equation)
              mathsearch train ensemble RUN_A/checkpoint.pt RUN_B/... RUN_C/... --out ENS
                                  gcn-v7: three gcn-v6-recipe runs from different starts
            """),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return gcn


def _add_data_options(gcn: argparse.ArgumentParser) -> None:
    """What to train on (SRC or the shared data) and where the run is written."""
    gcn.add_argument("sources", nargs="*", metavar="SRC", help="files or folders to train on")
    gcn.add_argument(
        "--shared-data",
        metavar="DIR",
        help="train on every equation of the shared data folder instead of SRC (hepth2003, "
        "hepth2003-documents, hep_array; the hepth2003 held-out papers dropped everywhere)",
    )
    gcn.add_argument(
        "--shared-sources",
        metavar="NAMES",
        help="with --shared-data: which sources to train on, comma-separated (default all three: "
        "hepth2003,documents,hep_array; hep_array is 87k array environments of 9.6k older papers)",
    )
    gcn.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    gcn.add_argument("--out", required=True, help="output folder (checkpoints, train.json)")


def _add_optimiser_options(gcn: argparse.ArgumentParser) -> None:
    """Epochs, steps, batch size, learning rate and loss."""
    gcn.add_argument("--epochs", type=positive_int, default=20, help="default 20")
    gcn.add_argument(
        "--steps-per-epoch",
        type=positive_int,
        help="default: training equations / batch size (or --triplet-pool / batch size)",
    )
    gcn.add_argument("--batch-size", type=positive_int, default=128, help="triplets per step")
    gcn.add_argument("--lr", type=float, default=1e-4, help="initial learning rate (1e-4)")
    gcn.add_argument("--loss", choices=_LOSSES, default="histogram", help="default histogram")


def _add_model_options(gcn: argparse.ArgumentParser) -> None:
    """The network: width, depth, embedding size, normalisation and readout."""
    gcn.add_argument("--hidden", type=positive_int, default=512, help="graph layer width (512)")
    gcn.add_argument("--layers", type=positive_int, default=3, help="graph layers (3)")
    gcn.add_argument(
        "--out-dim", type=positive_int, default=64, help="embedding dimension (64, the seed's)"
    )
    gcn.add_argument(
        "--normalisation",
        choices=("soft", "l2"),
        default="soft",
        help="output normalisation: the seed's soft one, or l2 (cosine search)",
    )
    gcn.add_argument(
        "--pooling",
        choices=("mean", "gated"),
        default="mean",
        help="graph readout: the seed's mean over the nodes, or a learned gate-weighted mean",
    )


def _add_run_options(gcn: argparse.ArgumentParser) -> None:
    """The time budget, torch threads and weight decay."""
    gcn.add_argument(
        "--time-budget", type=float, metavar="S", help="stop after S seconds of training steps"
    )
    gcn.add_argument("--threads", type=positive_int, help="torch threads (default: all cores)")
    gcn.add_argument("--weight-decay", type=float, default=0.0, help="AdamW decay (0: Adam)")


def _add_task_options(gcn: argparse.ArgumentParser) -> None:
    """The masking task: shared with the ranking pass, or off."""
    gcn.add_argument(
        "--shared-masking-pass",
        action="store_true",
        help="both tasks from the masked graphs in one forward pass (cheaper)",
    )
    gcn.add_argument("--no-masking", action="store_true", help="no masking task")


def _add_sampling_options(gcn: argparse.ArgumentParser) -> None:
    """How each step's pairs and negatives are drawn."""
    gcn.add_argument(
        "--hard-batches",
        type=int,
        default=0,
        metavar="G",
        help="draw each step's anchors from G groups of papers with similar notation (hard "
        "in-batch negatives for infonce; 0: uniform papers, the seed's)",
    )
    gcn.add_argument(
        "--notation-groups",
        type=positive_int,
        default=512,
        help="groups the papers are clustered into for --hard-batches (512)",
    )
    gcn.add_argument(
        "--pairs-per-paper",
        type=positive_int,
        default=1,
        metavar="K",
        help="draw K pairs from each anchor paper of a step (batch-size / K papers a step; "
        "1: a paper per pair, the seed's)",
    )
    gcn.add_argument(
        "--same-paper-positives",
        action="store_true",
        help="infonce: the other pairs of an anchor's paper count as its positives "
        "(supervised contrastive) instead of being left out",
    )
    gcn.add_argument(
        "--bm25-negatives",
        type=int,
        default=0,
        metavar="K",
        help="infonce: one extra negative per anchor, drawn from its K best BM25 matches among "
        "other papers (hard negatives of the lexical ranker; 0: in-batch negatives only)",
    )
    gcn.add_argument(
        "--bm25-prior",
        type=float,
        default=0.0,
        metavar="W",
        help="infonce: add W (cosine units) times each in-batch pair's row-normalised BM25 score "
        "to its similarity, so the vectors learn what BM25 misses (0: no prior)",
    )


def _add_augmentation_options(gcn: argparse.ArgumentParser) -> None:
    """Identifier permutation, crops and a fixed triplet pool."""
    gcn.add_argument("--no-augmentation", action="store_true", help="no identifier permutation")
    gcn.add_argument(
        "--crop-rate",
        type=unit_fraction,
        default=0.0,
        metavar="R",
        help="infonce: make this fraction of each batch's pairs (crop of P, P), a sub-formula "
        "of the positive as its anchor, so fragments find their equation (0: none)",
    )
    gcn.add_argument(
        "--triplet-pool", type=positive_int, help="sample this many triplets once (seed style)"
    )


def _add_start_options(gcn: argparse.ArgumentParser) -> None:
    """Where the run starts: a checkpoint to continue, or weights to fine-tune."""
    gcn.add_argument("--resume", metavar="CKPT", help="continue from this checkpoint")
    gcn.add_argument(
        "--init",
        metavar="CKPT",
        help="start from this checkpoint's model weights (fine-tuning: a fresh optimiser, "
        "schedule and step count; same network and vocabulary)",
    )


def _add_split_options(gcn: argparse.ArgumentParser) -> None:
    """The seed, the equation limit and the held-out share of papers."""
    gcn.add_argument("--seed", type=int, default=0, help="seed of everything random (0)")
    gcn.add_argument("--limit", type=positive_int, help="use at most N equations")
    gcn.add_argument(
        "--test-fraction",
        type=unit_fraction,
        default=0.2,
        help="papers held out for the ranking score (0.2; 0 = none)",
    )


def _add_evaluation_options(gcn: argparse.ArgumentParser) -> None:
    """When the hold-out score is measured and checkpoints written."""
    gcn.add_argument("--eval-every", type=positive_int, help="steps (default: every epoch)")
    gcn.add_argument("--eval-triplets", type=positive_int, default=10_000)
    gcn.add_argument("--checkpoint-every", type=positive_int, default=1000, help="steps (1000)")


def _add_device_options(gcn: argparse.ArgumentParser) -> None:
    """The device, bf16 autocast and batch prefetching."""
    gcn.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda:0")
    gcn.add_argument(
        "--amp",
        action="store_true",
        help="bf16 autocast: on a GPU, or a CPU with bf16 matrix units (AMX / AVX512-BF16)",
    )
    gcn.add_argument(
        "--prefetch",
        choices=PREFETCH_MODES,
        default="auto",
        help="prepare the next batch on a worker thread while a step trains (auto: on for cuda)",
    )


def _add_featurisation_options(gcn: argparse.ArgumentParser) -> None:
    """The vocabulary and the featurised-corpus cache."""
    gcn.add_argument("--vocabulary", help="vocabulary JSON (default: the shipped one)")
    gcn.add_argument("--cache-dir", help="featurised-corpus cache (default OUT/cache)")
    gcn.add_argument("--no-cache", action="store_true", help="always parse the sources again")


def _add_output_options(gcn: argparse.ArgumentParser) -> None:
    """The progress bar and the summary format."""
    gcn.add_argument("--no-progress", action="store_true", help="no progress bar")
    gcn.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch train gcn``; 0 on success, 1 with a one-line reason otherwise."""
    try:
        from mathsearch.encoders.checkpoints import CheckpointError
        from mathsearch.encoders.corpus import CorpusError
        from mathsearch.encoders.gcn import GCNConfigError
        from mathsearch.encoders.sampler import SamplerError
        from mathsearch.encoders.train_config import TrainingError
    except ImportError as exc:
        sys.stderr.write(
            f"mathsearch: error: training needs the train extra (torch, torch-geometric): {exc}; "
            "pip install 'mathsearch[train]'\n"
        )
        return 1
    errors = (CheckpointError, CorpusError, GCNConfigError, SamplerError, TrainingError)
    try:
        summary = _train_gcn(args)
    except (*errors, IndexerError, OSError) as exc:
        sys.stderr.write(f"mathsearch: error: {exc}\n")
        return 1
    if args.json:
        emit(json.dumps(summary, indent=2))
        return 0
    corpus = summary["corpus"]
    emit(
        f"trained {summary['step']} of {summary['total_steps']} steps in "
        f"{summary['seconds']:.1f} s ({summary['triplets_per_second']:.0f} triplets/s) on "
        f"{corpus['train']['equations']} equations of {corpus['train']['papers']} papers"
    )
    for entry in summary["evaluations"]:
        emit(
            f"  step {entry['step']:>7}: hold-out ranking score {entry['ranking_score']:.4f} "
            f"(+-{entry['bound_95']:.3f} at 95%)"
        )
    emit(f"checkpoint: {summary['checkpoint']}")
    emit(f"report: {summary['report']}")
    return 0


def _train_gcn(args: argparse.Namespace) -> dict[str, Any]:
    from mathsearch.encoders.corpus import EquationCorpus
    from mathsearch.encoders.train_config import TrainingError
    from mathsearch.encoders.training import train
    from mathsearch.indexer.parse import Featuriser
    from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

    out = Path(args.out)
    vocabulary = Vocabulary.load(args.vocabulary) if args.vocabulary else default_vocabulary()
    if bool(args.shared_data) == bool(args.sources):
        raise TrainingError("give either SRC... or --shared-data DIR")
    if args.init and args.resume:
        raise TrainingError(
            "--init starts a new run from a checkpoint's weights, --resume "
            "continues one: give one of them"
        )
    if args.shared_data:
        corpus_train, corpus_test, split, data = _shared_corpus(args, out, vocabulary)
    else:
        with Featuriser(vocabulary) as featuriser:
            if args.no_cache:
                corpus = EquationCorpus.from_sources(
                    args.sources, args.format, args.limit, featuriser=featuriser
                )
            else:
                cache = Path(args.cache_dir) if args.cache_dir else out / "cache"
                corpus = EquationCorpus.cached(
                    args.sources, args.format, cache, args.limit, featuriser=featuriser
                )
        if args.test_fraction > 0:
            corpus_train, corpus_test = corpus.split_by_paper(args.test_fraction, args.seed)
        else:
            corpus_train, corpus_test = corpus, None
        split = {"test_fraction": args.test_fraction, "seed": args.seed, "limit": args.limit}
        data = {"all": corpus.summary()}
    config = _config(args, out, split)
    result = train(config, corpus_train, corpus_test, resume=args.resume, vocabulary=vocabulary)
    summary = result.summary()
    summary["corpus"] = {
        **data,
        "train": corpus_train.summary(),
        "test": corpus_test.summary() if corpus_test is not None else None,
    }
    summary["config"] = config.to_dict()
    report = out / "train.json"
    out.mkdir(parents=True, exist_ok=True)
    summary["report"] = str(report)
    report.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


def _model_config(args: argparse.Namespace) -> Any:
    from mathsearch.encoders.gcn import GCNConfig

    norms = (0, 2) if args.layers >= 3 else (0,)
    return GCNConfig(
        hidden=args.hidden,
        layers=args.layers,
        out_dim=args.out_dim,
        batch_norm_before=norms,
        normalisation=args.normalisation,
        pooling=args.pooling,
    )


def _source_names(text: str) -> tuple[str, ...]:
    """``"hepth2003,documents"`` -> ``("hepth2003", "documents")``; refuses an empty list (the
    names themselves are checked by ``shared_training_corpus``)."""
    from mathsearch.encoders.train_config import TrainingError

    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise TrainingError("--shared-sources names no source")
    return names


def _shared_corpus(args: argparse.Namespace, out: Path, vocabulary: Any) -> tuple[Any, ...]:
    """``(train, held_out, split, data)`` of ``--shared-data``
    (:mod:`mathsearch.encoders.shared_corpus`)."""
    from mathsearch.encoders.shared_corpus import (
        HELD_OUT_SPLIT,
        SHARED_SOURCES,
        VALIDATION_SPLIT,
        shared_training_corpus,
    )
    from mathsearch.indexer.parse import Featuriser

    cache = Path(args.cache_dir) if args.cache_dir else out / "cache"
    chosen = args.shared_sources
    sources = SHARED_SOURCES if chosen is None else _source_names(chosen)
    with Featuriser(vocabulary) as featuriser:
        corpus_train, corpus_test, data = shared_training_corpus(
            args.shared_data, featuriser, cache, sources=sources
        )
    split = {**HELD_OUT_SPLIT, "method": "shared-data", "validation": VALIDATION_SPLIT}
    return corpus_train, corpus_test, split, {"shared": data}


def _config(args: argparse.Namespace, out: Path, split: dict[str, Any]) -> Any:
    from mathsearch.encoders.training import TrainConfig

    return TrainConfig(
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        batch_size=args.batch_size,
        lr=args.lr,
        loss=args.loss,
        use_masking=not args.no_masking,
        use_augmentation=not args.no_augmentation,
        triplet_pool=args.triplet_pool,
        seed=args.seed,
        device=args.device,
        amp=args.amp,
        prefetch=args.prefetch,
        checkpoint_dir=str(out),
        checkpoint_every=args.checkpoint_every,
        eval_every=args.eval_every,
        eval_triplets=args.eval_triplets,
        progress=not args.no_progress,
        split=split,
        time_budget=args.time_budget,
        threads=args.threads,
        weight_decay=args.weight_decay,
        hard_batches=args.hard_batches,
        notation_groups=args.notation_groups,
        bm25_negatives=args.bm25_negatives,
        bm25_prior=args.bm25_prior,
        pairs_per_paper=args.pairs_per_paper,
        same_paper_positives=args.same_paper_positives,
        shared_masking_pass=args.shared_masking_pass,
        init_from=args.init,
        crop_rate=args.crop_rate,
        model=_model_config(args),
    )
