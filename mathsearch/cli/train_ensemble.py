"""``mathsearch train ensemble``: K graph-CNN runs as one encoder
(:mod:`mathsearch.encoders.gcn_ensemble`, :mod:`mathsearch.encoders.ensemble_checkpoint`).

Registered on ``train``'s sub-parsers by :func:`mathsearch.cli.train.add_train`; torch is imported
only when the command runs. Output in ``--out DIR``: ``checkpoint.pt`` (the input of ``mathsearch
export`` and ``eval``; not trainable further) and ``train.json`` (the towers and the first run's
corpus counts).
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail, positive_int
from mathsearch.core.paths import SHARED_DATA

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]

_HEPTH = [str(SHARED_DATA / "hepth2003" / name) for name in ("equation.txt", "eqnarray.txt")]


def register(kinds: Any) -> None:
    """Add ``ensemble`` to ``train``'s sub-parsers."""
    parser = kinds.add_parser(
        "ensemble",
        help="join graph-CNN runs into one encoder (mean of their cosines, one vector)",
        description="Write an ensemble of two or more L2-normalised graph-CNN checkpoints: the "
        "towers' unit vectors, concatenated (inner product = the mean of their cosines) and "
        "projected onto their principal directions over equations of the runs' training papers "
        "(never the held-out or validation ones), then L2-normalised. Embedding costs the sum "
        "of the towers; the vector is as wide as one tower's unless --out-dim says otherwise.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch train ensemble runs/a/checkpoint.pt runs/b/checkpoint.pt \\
                  runs/c/checkpoint.pt --out runs/ens
              mathsearch eval ranking ../shared/data/hepth2003/equation.txt \\
                  ../shared/data/hepth2003/eqnarray.txt --format hepth \\
                  --checkpoint runs/ens/checkpoint.pt --json > eval.json
              mathsearch export runs/ens/checkpoint.pt -o gcn-v7.onnx --version 7 \\
                  --metrics eval.json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("checkpoints", nargs="+", metavar="CKPT", help="graph-CNN checkpoints")
    parser.add_argument("--out", required=True, help="output folder (checkpoint.pt, train.json)")
    parser.add_argument(
        "--out-dim", type=positive_int, help="width of the ensemble's vector (default: a tower's)"
    )
    parser.add_argument(
        "--fit-data",
        nargs="+",
        metavar="SRC",
        default=_HEPTH,
        help="hep-th files the runs' paper split is of (default: ../shared/data/hepth2003)",
    )
    parser.add_argument(
        "--fit-equations",
        type=positive_int,
        default=4000,
        help="training-paper equations the projection is fitted on (default 4000)",
    )
    parser.add_argument("--cache-dir", help="featurised-corpus cache for --fit-data")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``train ensemble``; 0 on success, 1 with a one-line reason otherwise."""
    try:
        from mathsearch.encoders.checkpoints import CheckpointError
        from mathsearch.encoders.ensemble_checkpoint import ensemble_checkpoints
    except ImportError as exc:
        return fail(
            f"train ensemble needs the train extra (torch): {exc}; pip install 'mathsearch[train]'"
        )
    try:
        written = ensemble_checkpoints(
            args.checkpoints,
            args.out,
            fit_sources=args.fit_data,
            out_dim=args.out_dim,
            fit_equations=args.fit_equations,
            cache_dir=args.cache_dir,
        )
    except (CheckpointError, OSError) as exc:
        return fail(str(exc))
    summary = {"checkpoint": str(written), "towers": list(args.checkpoints)}
    if args.json:
        emit(json.dumps(summary, indent=2))
    else:
        emit(f"ensemble of {len(args.checkpoints)} checkpoints: {written}")
    return 0
