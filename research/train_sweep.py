"""The fixed-budget sweep of issue 20 (width x depth x loss), one run after another, resumable.

Usage::

    python -m research.train_sweep --out /tmp/sweep --budget 480 \\
        [--runs infonce-128x2,histogram-512x3,histogram-128x2-mask ...] [--amp] [--dry-run]

Each run is ``LOSS-WIDTHxDEPTH``, with ``-mask`` for the seed's masking task beside the loss (on
its own forward pass, as in the seed; not ``+``, which ``compare_encoders.py`` reads as joined
models). Without ``--runs`` the sweep is issue 20's whole grid (infonce, histogram and triplet at
widths 128 / 256 / 512 and depths 2 / 3: 18 runs, no masking).
For every run not finished under ``--out`` it calls, in order:

1. ``mathsearch train gcn --shared-data DATA --time-budget BUDGET ...`` (every equation of the
   shared data, the hepth2003 held-out papers left out; ``--no-masking`` unless ``-mask``,
   ``--no-augmentation --normalisation l2 --out-dim 128 --lr 2e-3``, 256 pairs a step for
   ``infonce``, 128 triplets for ``histogram`` and ``triplet``; one featurised cache for all
   runs);
2. ``mathsearch export`` of its checkpoint to ``RUN/model.onnx``;
3. ``mathsearch eval ranking`` on the hepth2003 held-out papers (``--triplets``, 2,000 by
   default: issue 20's figure), the same triplets (seed 0) whatever the run's ``--seed``.

Each step's output lands in ``RUN/`` (``train.json``, ``model.onnx``, ``ranking.json``), so a run
that stopped half-way resumes at the step it lacks (a run stopped during training trains again from
the start: its budget is a few minutes), and a finished run is skipped. The summary
(``--out/sweep.json``) gives each run's steps, items per second of training, CPU seconds and ranking
score. Search quality and embed speed are measured afterwards over all the runs' models at once, so
that their figures come from one sitting: ``python -m research.compare_encoders`` and ``mathsearch
bench embed --onnx ...`` (docs/research/2026-12-06-gcn-training-record.md, "A sweep at a fixed CPU
budget").
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mathsearch.cli.common import emit
from mathsearch.encoders.train_config import LOSSES

logger = logging.getLogger(__name__)

#: issue 20's grid: the in-batch contrastive loss, the seed's histogram loss and the triplet loss
#: at every width (128, 256, 512) and depth (2, 3), 18 runs; the cheapest first
DEFAULT_RUNS = tuple(
    f"{loss}-{hidden}x{layers}"
    for hidden in (128, 256, 512)
    for layers in (2, 3)
    for loss in ("infonce", "histogram", "triplet")
)
HEPTH = ("hepth2003/equation.txt", "hepth2003/eqnarray.txt")
#: The CLI of the interpreter running this script (no reliance on PATH).
MATHSEARCH = (sys.executable, "-m", "mathsearch")
_RUN = re.compile(r"^(?P<loss>[a-z]+)-(?P<hidden>\d+)x(?P<layers>\d+)(?P<mask>-mask)?$")


@dataclass(frozen=True)
class Run:
    """One point of the sweep: a loss and a network size."""

    loss: str
    hidden: int
    layers: int
    #: the seed's masking task beside the loss (section 4.2), on its own forward pass
    masking: bool = False

    @property
    def name(self) -> str:
        return f"{self.loss}-{self.hidden}x{self.layers}" + ("-mask" if self.masking else "")

    @property
    def batch_size(self) -> int:
        """256 pairs (in-batch negatives) or 128 triplets: the batches of the first sweep."""
        return 256 if self.loss == "infonce" else 128


def parse_run(spec: str) -> Run:
    """``LOSS-WIDTHxDEPTH[-mask]`` as a :class:`Run`.

    Raises:
        ValueError: not of that form, or an unknown loss.
    """
    match = _RUN.match(spec.strip())
    if not match or match["loss"] not in LOSSES:
        raise ValueError(
            f"not LOSS-WIDTHxDEPTH[-mask] with LOSS one of {', '.join(LOSSES)}: {spec!r}"
        )
    return Run(match["loss"], int(match["hidden"]), int(match["layers"]), bool(match["mask"]))


def train_command(
    run: Run, data: Path, out: Path, cache: Path, budget: float, *, amp: bool, seed: int
) -> list[str]:
    """The ``mathsearch train gcn`` call of one run."""
    command = [
        *MATHSEARCH, "train", "gcn", "--shared-data", str(data), "--out", str(out),
        "--cache-dir", str(cache), "--loss", run.loss, "--hidden", str(run.hidden),
        "--layers", str(run.layers), "--out-dim", "128", "--batch-size", str(run.batch_size),
        "--lr", "2e-3", *(() if run.masking else ("--no-masking",)), "--no-augmentation",
        "--normalisation", "l2",
        "--epochs", "1000", "--time-budget", f"{budget:g}", "--threads", "2",
        "--eval-every", "1000000", "--seed", str(seed), "--no-progress", "--json",
    ]  # fmt: skip
    return [*command, "--amp"] if amp else command


#: the seed of the held-out triplets every run is scored on, whatever its training seed (``eval
#: ranking`` would otherwise draw them with the run's own seed: other triplets, another BoW score)
TRIPLET_SEED = 0


def score_command(checkpoint: Path, data: Path, cache: Path, triplets: int) -> list[str]:
    """The ``mathsearch eval ranking`` call of one run: the same ``triplets`` held-out triplets
    (seed :data:`TRIPLET_SEED`) for every run."""
    hepth = [str(data / part) for part in HEPTH]
    return [
        *MATHSEARCH, "eval", "ranking", *hepth, "--format", "hepth", "--cache-dir", str(cache),
        "--checkpoint", str(checkpoint), "--triplets", str(triplets),
        "--seed", str(TRIPLET_SEED), "--json",
    ]  # fmt: skip


def run_one(
    run: Run,
    out: Path,
    data: Path,
    cache: Path,
    budget: float,
    *,
    amp: bool,
    seed: int,
    triplets: int,
    dry_run: bool,
) -> dict[str, object]:
    """Train, export and score one run, skipping the steps whose output is already there."""
    folder = out / run.name
    checkpoint = folder / "checkpoint.pt"
    onnx = folder / "model.onnx"
    ranking = folder / "ranking.json"
    # export's parity sample and the scoring featurise hepth2003 once, in the shared cache
    shared = ["--cache-dir", str(cache)]
    score = score_command(checkpoint, data, cache, triplets)
    # (output, command, whether the output is the command's stdout)
    train = train_command(run, data, folder, cache, budget, amp=amp, seed=seed)
    steps = [
        (folder / "train.json", train, False),
        (onnx, [*MATHSEARCH, "export", str(checkpoint), "-o", str(onnx), *shared], False),
        (ranking, score, True),
    ]  # fmt: skip
    for target, command, is_stdout in steps:
        if target.exists():
            continue
        logger.info("%s: %s", run.name, " ".join(command))
        if dry_run:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(command, check=True, capture_output=is_stdout, text=True)
        if is_stdout:
            target.write_text(done.stdout)
    return summarise(run, folder) if not dry_run else {"run": run.name}


def summarise(run: Run, folder: Path) -> dict[str, object]:
    """One row of the sweep from a finished run's ``train.json`` and ``ranking.json``."""
    train = json.loads((folder / "train.json").read_text())
    ranking = json.loads((folder / "ranking.json").read_text())
    seconds = float(train.get("train_seconds") or 0.0)
    step = int(train.get("step", 0))
    items = step * run.batch_size
    return {
        "run": run.name,
        "loss": run.loss,
        "hidden": run.hidden,
        "layers": run.layers,
        "masking": run.masking,
        "batch_size": run.batch_size,
        "steps": step,
        "train_seconds": round(seconds, 1),
        "items_seen": items,
        "items_per_s": round(items / seconds, 1) if seconds else None,
        "ranking": ranking_score(ranking),
        "untrained": ranking_score(ranking, "untrained"),
        "bow": ranking_score(ranking, "bow"),
        "model": str(folder / "model.onnx"),
    }


def ranking_score(report: dict[str, object], name: str = "model") -> float | None:
    """``name``'s hold-out ranking score in an ``eval ranking --json`` report (``model``: the
    checkpoint; ``untrained``, ``bow``: its baselines on the same triplets)."""
    entry = report["scores"].get(name)  # type: ignore[attr-defined]
    return round(float(entry["ranking_score"]), 4) if entry else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", maxsplit=1)[0],
        epilog="example: python -m research.train_sweep --out /tmp/sweep --budget 480 --amp",
    )
    parser.add_argument("--out", required=True, type=Path, help="a folder per run, sweep.json")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="shared data")
    parser.add_argument("--cache-dir", type=Path, help="featurised corpus (default OUT/cache)")
    parser.add_argument("--budget", type=float, default=1200.0, help="seconds of steps (1200)")
    parser.add_argument("--runs", default=",".join(DEFAULT_RUNS), help="comma-separated")
    parser.add_argument("--amp", action="store_true", help="bf16 autocast (bf16 units only)")
    parser.add_argument(
        "--seed", type=int, default=0, help="training seed (0; the scoring triplets stay seed 0)"
    )
    parser.add_argument("--triplets", type=int, default=2000, help="ranking triplets (2000)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        runs = [parse_run(spec) for spec in args.runs.split(",") if spec.strip()]
    except ValueError as exc:
        parser.error(str(exc))
    cache = args.cache_dir or args.out / "cache"
    settings = {"amp": args.amp, "seed": args.seed, "triplets": args.triplets}
    rows = []
    for run in runs:
        try:
            rows.append(
                run_one(
                    run, args.out, args.data, cache, args.budget, **settings, dry_run=args.dry_run
                )
            )
        except subprocess.CalledProcessError as exc:
            command = " ".join(str(part) for part in exc.cmd)
            sys.stderr.write(f"train_sweep: {run.name} failed (exit {exc.returncode}): {command}\n")
            return 1
    if not args.dry_run:
        (args.out / "sweep.json").write_text(json.dumps(rows, indent=2) + "\n")
    emit(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
