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
from pathlib import Path
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
            Members may also be shipped models (.onnx, card beside it): their weights are read
            from the file (checked against it on real equations) into --out/members/NAME/. An
            ensemble member joins with its towers, which share its weight.

            examples:
              mathsearch train ensemble runs/a/checkpoint.pt runs/b/checkpoint.pt \\
                  runs/c/checkpoint.pt --out runs/ens
              mathsearch train ensemble export/models/gcn-v7.onnx export/models/gcn-v9.onnx \\
                  --out runs/v7-v9                    # v7's 3 towers at 1/6 each, v9 at 1/2
              mathsearch eval ranking ../shared/data/hepth2003/equation.txt \\
                  ../shared/data/hepth2003/eqnarray.txt --format hepth \\
                  --checkpoint runs/ens/checkpoint.pt --json > eval.json
              mathsearch export runs/ens/checkpoint.pt -o gcn-v7.onnx --version 7 \\
                  --metrics eval.json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "checkpoints",
        nargs="+",
        metavar="CKPT",
        help="graph-CNN checkpoints (runs or ensembles) or shipped .onnx models",
    )
    parser.add_argument(
        "--weights",
        help="comma-separated weight of each member in the mean of cosines (default: equal)",
    )
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


#: Real equations a shipped member is checked on when its weights are read from the file.
_MEMBER_CHECK = 200


def _members(given: list[str], out: str, fit_data: list[str], cache_dir: str | None) -> list[str]:
    """The members as checkpoints: each ``.onnx`` one read into ``out/members/NAME/``."""
    models = [m for m in given if m.endswith(".onnx")]
    if not models:
        return list(given)
    from mathsearch.export.export_model import parity_sample
    from mathsearch.export.onnx_checkpoint import checkpoint_from_onnx

    graphs = parity_sample(fit_data, "hepth", _MEMBER_CHECK, cache_dir)
    members = []
    for member in given:
        if not member.endswith(".onnx"):
            members.append(member)
            continue
        target = Path(out) / "members" / Path(member).stem / "checkpoint.pt"
        logger.info("reading the weights of %s into %s", member, target)
        members.append(str(checkpoint_from_onnx(member, target, graphs)))
    return members


def run(args: argparse.Namespace) -> int:
    """Handler of ``train ensemble``; 0 on success, 1 with a one-line reason otherwise."""
    try:
        from mathsearch.encoders.checkpoints import CheckpointError
        from mathsearch.encoders.ensemble_checkpoint import ensemble_checkpoints
        from mathsearch.export.errors import ExportError
    except ImportError as exc:
        return fail(
            f"train ensemble needs the train extra (torch): {exc}; pip install 'mathsearch[train]'"
        )
    try:
        weights = [float(w) for w in args.weights.split(",")] if args.weights else None
    except ValueError:
        return fail(f"--weights {args.weights!r} is not a comma-separated list of numbers")
    try:
        members = _members(args.checkpoints, args.out, args.fit_data, args.cache_dir)
        written = ensemble_checkpoints(
            members,
            args.out,
            fit_sources=args.fit_data,
            out_dim=args.out_dim,
            fit_equations=args.fit_equations,
            cache_dir=args.cache_dir,
            weights=weights,
        )
    except (CheckpointError, ExportError, OSError) as exc:
        return fail(str(exc))
    summary = {"checkpoint": str(written), "members": list(args.checkpoints)}
    if args.json:
        emit(json.dumps(summary, indent=2))
    else:
        emit(f"ensemble of {len(args.checkpoints)} members: {written}")
    return 0
