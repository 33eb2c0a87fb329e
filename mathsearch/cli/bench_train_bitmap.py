"""``mathsearch bench train bitmap``: crops/s of the bitmap CNN's training loop vs the network.

Registered under ``bench train`` by :func:`mathsearch.cli.bench_train.add_bench_train`; see
:mod:`mathsearch.encoders.bench_train_bitmap` for what is timed.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from typing import Any

from mathsearch.cli.common import emit, fail, positive_int
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS

logger = logging.getLogger(__name__)

__all__ = ["add_bitmap", "run_bitmap"]

_RUNS = ("context/triplet", "context/siamese", "context/info-nce", "teacher", "symbols")


def _runs(text: str) -> list[str]:
    runs = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in runs if r not in _RUNS]
    if not runs or unknown:
        raise argparse.ArgumentTypeError(f"runs must be among {', '.join(_RUNS)}: {unknown}")
    return runs


def add_bitmap(kinds: Any) -> None:
    """Add ``bitmap`` to ``bench train``'s encoders."""
    parser = kinds.add_parser(
        "bitmap",
        help="the ECML 2019 bitmap CNN",
        description="Crops/s of the bitmap-CNN training loop (sampling, batch from the packed "
        "crops, augmentation, forward, backward, Adam) and of the network alone (the same "
        "batches prepared beforehand), for every --net x --runs, with the loop/network ratio. "
        "Crops are rendered once before timing (--cache-dir keeps them); the teacher task gets "
        "random unit targets, the same cost as a teacher's.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch bench train bitmap                         small + large, every run
              mathsearch bench train bitmap --net small --runs teacher,context/info-nce --augment
              mathsearch bench train bitmap --cache-dir /var/tmp/crops --steps 16 --json
            """),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "sources", nargs="*", metavar="SRC", help="default: ../shared/data/hepth2003/*.txt"
    )
    parser.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    parser.add_argument("--limit", type=positive_int, default=1000, help="equations (1000)")
    parser.add_argument("--net", default="small,large", help="comma-separated (small,large)")
    parser.add_argument("--runs", type=_runs, default=list(_RUNS),
                        help=f"comma-separated among {','.join(_RUNS)} (all)")  # fmt: skip
    parser.add_argument("--augment", action="store_true", help="with the crop augmentation")
    parser.add_argument("--batch-size", type=positive_int, default=100, help="anchors (100)")
    parser.add_argument("--steps", type=positive_int, default=8, help="timed steps (8)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (2)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--workers", type=positive_int, default=1, help="render processes (1)")
    parser.add_argument("--cache-dir", help="rendered-crop cache (default: render every time)")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")


def run_bitmap(args: argparse.Namespace) -> int:
    """Handler of ``bench train bitmap``; 0, or 1 with a one-line reason."""
    try:
        from mathsearch.encoders.bench_train_bitmap import (
            bench_train_bitmap,
            format_bench_train_bitmap,
        )
        from mathsearch.encoders.bitmap_data import BitmapCorpus, BitmapCorpusError
        from mathsearch.encoders.bitmap_steps import BitmapTaskError
        from mathsearch.encoders.bitmap_training import BitmapTrainConfig, BitmapTrainingError
    except ImportError as exc:
        return fail(f"this command needs the train extra (torch): {exc}; pip install '.[train]'")
    from mathsearch.bench.corpus import default_bench_sources

    nets = [n.strip() for n in args.net.split(",") if n.strip()]
    if not nets or set(nets) - {"small", "large"}:
        return fail(f"--net must be small and/or large, not {args.net!r}")
    sources = args.sources or default_bench_sources()
    try:
        corpus = BitmapCorpus.cached(
            sources, args.format, args.cache_dir or None, args.limit, workers=args.workers
        )
        reports = []
        for net in nets:
            for run in args.runs:
                task, _, loss = run.partition("/")
                config = BitmapTrainConfig(
                    task=task,
                    loss=loss or "info-nce",
                    net=net,
                    batch_size=args.batch_size,
                    threads=args.threads,
                    augment=args.augment,
                    progress=False,
                )
                reports.append(
                    bench_train_bitmap(config, corpus, steps=args.steps, warmup=args.warmup)
                )
    except (BitmapCorpusError, BitmapTaskError, BitmapTrainingError, IndexerError, OSError) as exc:
        return fail(str(exc))
    emit(json.dumps(reports, indent=2) if args.json else format_bench_train_bitmap(reports))
    return 0
