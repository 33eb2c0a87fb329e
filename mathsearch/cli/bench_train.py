"""``mathsearch bench train gcn|seq2seq|bitmap``: items/s of the training loop vs the network alone.

Wired into the ``bench`` subparsers by :func:`add_bench_train`; the training stack (torch) is
imported when the command runs. See :mod:`mathsearch.encoders.bench_train` (graph CNN) and
:mod:`mathsearch.encoders.bench_train_seq2seq` (ExpEmb) and
:mod:`mathsearch.encoders.bench_train_bitmap` (the bitmap CNN) for what is timed.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from typing import Any

from mathsearch.cli.bench_train_bitmap import add_bitmap, run_bitmap
from mathsearch.cli.common import emit, fail, positive_int
from mathsearch.encoders.prefetch import PREFETCH_MODES
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS

logger = logging.getLogger(__name__)

__all__ = ["add_bench_train", "run_bench_train"]

_LOSSES = ("histogram", "triplet", "ecml", "infonce")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list") from exc
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: positive integers wanted")
    return values


def add_bench_train(bench_cmds: Any) -> None:
    """Register ``bench train gcn`` on the ``bench`` subparsers."""
    parser = bench_cmds.add_parser(
        "train",
        help="training speed: the whole loop vs the network alone (triplets/s)",
        description="Time training steps of an encoder on real equations: the whole loop "
        "(sampling, batch building, augmentation, masking, forward, backward, optimiser) and "
        "the network alone (forward + backward + optimiser on batches prepared beforehand), "
        "same batches and threads; medians over --steps steps after --warmup.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench train gcn                          seed size 512 x 3 and 128 x 2
              mathsearch bench train gcn --hidden 512 --legacy --json
              mathsearch bench train bitmap --net small --runs teacher,context/info-nce
            """),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kinds = parser.add_subparsers(dest="bench_train_command", required=True, metavar="ENCODER")
    gcn = kinds.add_parser(
        "gcn",
        help="the graph CNN",
        description="Triplets/s (pairs/s for infonce) of the graph-CNN training loop and of "
        "the network alone, for every --hidden x --layers, with the loop/network ratio and "
        "the bound the device's dense products set (bound/s: the items/s of a step that ran "
        "only its hidden layers' products, at the rate one of them runs at here). "
        "--legacy also times the per-graph collate loop it replaced.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench train gcn                          seed size 512 x 3 and 128 x 2
              mathsearch bench train gcn --hidden 512,256,128 --layers 3,2 --loss infonce
              mathsearch bench train gcn --hidden 512 --legacy --json
              mathsearch bench train gcn --device cuda --amp      bf16 autocast on a GPU
              mathsearch bench train gcn --amp                    bf16 autocast on the CPU
            """),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gcn.add_argument(
        "sources", nargs="*", metavar="SRC", help="default: ../shared/data/hepth2003/*.txt"
    )
    gcn.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    gcn.add_argument("--limit", type=positive_int, default=5000, help="equations read (5000)")
    gcn.add_argument("--hidden", type=_int_list, default=[512, 128], help="widths (512,128)")
    gcn.add_argument("--layers", type=_int_list, default=[3], help="depths (3)")
    gcn.add_argument("--loss", choices=_LOSSES, default="histogram", help="default histogram")
    gcn.add_argument("--batch-size", type=positive_int, default=128, help="items per step")
    gcn.add_argument("--steps", type=positive_int, default=6, help="timed steps (6)")
    gcn.add_argument("--warmup", type=int, default=1, help="untimed steps first (1)")
    gcn.add_argument("--threads", type=positive_int, help="torch threads (default: all cores)")
    gcn.add_argument("--no-masking", action="store_true", help="without the masking task")
    gcn.add_argument(
        "--shared-masking-pass", action="store_true", help="masking on the same forward pass"
    )
    gcn.add_argument("--legacy", action="store_true", help="also time the per-graph collate loop")
    gcn.add_argument("--device", default="cpu", help="cpu (default), cuda, auto")
    gcn.add_argument(
        "--amp", action="store_true", help="bf16 autocast (GPU, or CPU with AMX / AVX512-BF16)"
    )
    gcn.add_argument(
        "--prefetch",
        choices=PREFETCH_MODES,
        default="auto",
        help="prepare the next batch on a worker thread (auto: on for cuda)",
    )
    gcn.add_argument("--cache-dir", help="featurised-corpus cache (default: none)")
    gcn.add_argument("--json", action="store_true", help="print the reports as JSON")
    seq = kinds.add_parser(
        "seq2seq",
        help="the ExpEmb equivalence encoder",
        description="Pairs/s of the ExpEmb-E training loop (pairs tokenised once, NumPy "
        "padding, length buckets), of the network alone (teacher-forced forward + backward + "
        "AdamW on prepared batches) and of the per-step tokenising loop it replaced, for every "
        "--hidden; plus the share of decoder positions that are padding with and without "
        "bucketing. Pairs: members of one class of the SemVec train sets (Appendix C).",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench train seq2seq                       H = 64, 128, 256
              mathsearch bench train seq2seq --hidden 1024 --steps 4
              mathsearch bench train seq2seq --device cuda --amp --hidden 64,1024
              mathsearch bench train seq2seq ../shared/data/semvec/poly8-trainset.json.gz --json
            """),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    seq.add_argument(
        "sets", nargs="*", metavar="SET", help="SemVec train files (default: every train set)"
    )
    seq.add_argument("--hidden", type=_int_list, default=[64, 128, 256], help="(64,128,256)")
    seq.add_argument("--batch-size", type=positive_int, default=64, help="pairs per step (64)")
    seq.add_argument("--pairs", type=positive_int, default=20000, help="pairs drawn (20000)")
    seq.add_argument("--steps", type=positive_int, default=16, help="timed steps (16)")
    seq.add_argument("--warmup", type=int, default=2, help="untimed steps first (2)")
    seq.add_argument("--threads", type=positive_int, help="torch threads (default: all cores)")
    seq.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N, auto")
    seq.add_argument("--amp", action="store_true", help="bf16 autocast of the forward pass")
    seq.add_argument("--json", action="store_true", help="print the reports as JSON")
    add_bitmap(kinds)


def _run_seq2seq(args: argparse.Namespace) -> int:
    import random
    from pathlib import Path

    try:
        from mathsearch.encoders.bench_train_seq2seq import (
            bench_train_seq2seq,
            format_bench_train_seq2seq,
        )
        from mathsearch.encoders.seq2seq_data import semvec_pairs
    except ImportError as exc:
        return fail(f"this command needs the train extra (torch): {exc}; pip install '.[train]'")
    from mathsearch.cli.train_seq2seq import SHARED_DATA
    from mathsearch.indexer.semvec_prefix import read_semvec_prefix

    sets = args.sets or sorted(str(p) for p in (SHARED_DATA / "semvec").glob("*-trainset.json.gz"))
    missing = [s for s in sets if not Path(s).is_file()]
    if not sets or missing:
        return fail(f"SemVec train sets not found: {missing or SHARED_DATA / 'semvec'}")
    rng = random.Random(0)
    try:
        pairs = [p for path in sets for p in semvec_pairs(read_semvec_prefix(path), rng)]
    except (IndexerError, OSError, ValueError) as exc:
        return fail(str(exc))
    rng.shuffle(pairs)
    pairs = pairs[: args.pairs]
    try:
        reports = [
            bench_train_seq2seq(
                pairs,
                hidden=hidden,
                batch_size=args.batch_size,
                steps=args.steps,
                warmup=args.warmup,
                threads=args.threads,
                device=args.device,
                amp=args.amp,
            )
            for hidden in args.hidden
        ]
    except ValueError as exc:  # an unknown device, or CUDA asked for where there is none
        return fail(str(exc))
    emit(json.dumps(reports, indent=2) if args.json else format_bench_train_seq2seq(reports))
    return 0


def run_bench_train(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch bench train``."""
    if args.bench_train_command == "seq2seq":
        return _run_seq2seq(args)
    if args.bench_train_command == "bitmap":
        return run_bitmap(args)
    try:
        from mathsearch.encoders.bench_train import bench_train, format_bench_train
        from mathsearch.encoders.corpus import CorpusError, EquationCorpus
        from mathsearch.encoders.gcn import GCNConfig
        from mathsearch.encoders.sampler import SamplerError
        from mathsearch.encoders.train_config import TrainConfig, TrainingError
    except ImportError as exc:
        return fail(
            f"this command needs the train extra (torch, torch-geometric): {exc}; "
            "pip install 'mathsearch[train]'"
        )
    from mathsearch.bench.corpus import default_bench_sources
    from mathsearch.indexer.parse import Featuriser

    sources = args.sources or default_bench_sources()
    try:
        with Featuriser() as featuriser:
            if args.cache_dir:
                corpus = EquationCorpus.cached(
                    sources, args.format, args.cache_dir, args.limit, featuriser=featuriser
                )
            else:
                corpus = EquationCorpus.from_sources(
                    sources, args.format, args.limit, featuriser=featuriser
                )
        reports = []
        for layers in args.layers:
            for hidden in args.hidden:
                model = GCNConfig(
                    hidden=hidden, layers=layers, batch_norm_before=(0, 2) if layers >= 3 else (0,)
                )
                config = TrainConfig(
                    loss=args.loss,
                    batch_size=args.batch_size,
                    use_masking=not args.no_masking,
                    shared_masking_pass=args.shared_masking_pass,
                    threads=args.threads,
                    device=args.device,
                    amp=args.amp,
                    prefetch=args.prefetch,
                    model=model,
                )
                reports.append(
                    bench_train(
                        corpus, config, steps=args.steps, warmup=args.warmup, legacy=args.legacy
                    )
                )
    except (CorpusError, SamplerError, TrainingError, IndexerError, OSError) as exc:
        return fail(str(exc))
    emit(json.dumps(reports, indent=2) if args.json else format_bench_train(reports))
    return 0
