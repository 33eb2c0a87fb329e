"""``mathsearch train soup``: the uniform model soup of graph-CNN runs
(:mod:`mathsearch.encoders.model_soup`).

Registered on ``train``'s sub-parsers by :func:`mathsearch.cli.train.add_train`; torch is imported
only when the command runs. Output in ``--out DIR``: ``checkpoint.pt`` (the input of ``mathsearch
export`` and ``eval``; no optimiser state, so ``--init`` but not ``--resume``) and ``train.json``
(the ingredients and the first run's corpus counts).
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]


def register(kinds: Any) -> None:
    """Add ``soup`` to ``train``'s sub-parsers."""
    parser = kinds.add_parser(
        "soup",
        help="average the weights of graph-CNN runs fine-tuned from one checkpoint (model soup)",
        description="Write the uniform model soup (Wortsman et al., ICML 2022) of two or more "
        "graph-CNN checkpoints: the element-wise mean of their weights, one network as cheap to "
        "run as each. The runs must share the vocabulary and the network and have started from "
        "one checkpoint (train gcn --init, different --seed) or, for snapshots of one run, one "
        "seed.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch train soup runs/ft-s0/checkpoint.pt runs/ft-s1/checkpoint.pt \\
                  runs/ft-s2/checkpoint.pt --out runs/soup
              mathsearch export runs/soup/checkpoint.pt -o soup.onnx --version 9
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("checkpoints", nargs="+", metavar="CKPT", help="graph-CNN checkpoints")
    parser.add_argument("--out", required=True, help="output folder (checkpoint.pt, train.json)")
    parser.add_argument(
        "--any-start",
        action="store_true",
        help="average runs that did not start from one checkpoint or seed (usually useless)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``train soup``; 0 on success, 1 with a one-line reason otherwise."""
    try:
        from mathsearch.encoders.checkpoints import CheckpointError
        from mathsearch.encoders.model_soup import soup_checkpoints
    except ImportError as exc:
        return fail(
            f"train soup needs the train extra (torch): {exc}; pip install 'mathsearch[train]'"
        )
    try:
        written = soup_checkpoints(
            args.checkpoints, args.out, allow_different_starts=args.any_start
        )
    except (CheckpointError, OSError) as exc:
        return fail(str(exc))
    summary = {"checkpoint": str(written), "ingredients": list(args.checkpoints)}
    if args.json:
        emit(json.dumps(summary, indent=2))
    else:
        emit(f"soup of {len(args.checkpoints)} checkpoints: {written}")
    return 0
