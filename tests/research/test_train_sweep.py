"""``research/train_sweep.py``, the repository's sweep script (a research prototype, not part of
the package): its grid, run names and commands, without training anything."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def sweep() -> ModuleType:
    return importlib.import_module("research.train_sweep")


def test_the_default_runs_are_the_issues_whole_grid(sweep: ModuleType) -> None:
    runs = [sweep.parse_run(name) for name in sweep.DEFAULT_RUNS]
    cells = {(r.loss, r.hidden, r.layers) for r in runs}
    assert len(runs) == len(cells) == 18
    assert cells == {
        (loss, hidden, layers)
        for loss in ("infonce", "histogram", "triplet")
        for hidden in (128, 256, 512)
        for layers in (2, 3)
    }
    assert not any(r.masking for r in runs)
    assert [r.name for r in runs] == list(sweep.DEFAULT_RUNS)


def test_a_mask_run_trains_with_the_masking_task(sweep: ModuleType, tmp_path: Path) -> None:
    masked = sweep.parse_run("histogram-128x2-mask")
    plain = sweep.parse_run("histogram-128x2")
    assert masked.masking and not plain.masking
    assert masked.name == "histogram-128x2-mask"
    assert masked.batch_size == plain.batch_size == 128

    def command(run: object) -> list[str]:
        return sweep.train_command(run, tmp_path, tmp_path / "out", tmp_path, 60, amp=False, seed=0)

    assert "--no-masking" not in command(masked)
    assert "--no-masking" in command(plain)
    assert [p for p in command(masked) if p != "--no-masking"] == [
        p for p in command(plain) if p != "--no-masking"
    ]


@pytest.mark.parametrize("name", ["histo-128x2", "infonce-128x2+mask", "infonce-128", "infonce-x2"])
def test_bad_run_names_are_refused(sweep: ModuleType, name: str) -> None:
    with pytest.raises(ValueError, match="LOSS-WIDTHxDEPTH"):
        sweep.parse_run(name)


def test_a_dry_run_writes_nothing(sweep: ModuleType, tmp_path: Path) -> None:
    run = sweep.parse_run("infonce-128x2-mask")
    out = tmp_path / "sweep"
    row = sweep.run_one(
        run, out, tmp_path, out / "cache", 60, amp=False, seed=0, triplets=10, dry_run=True
    )
    assert row == {"run": "infonce-128x2-mask"}
    assert not out.exists()


def test_every_training_seed_is_scored_on_the_same_triplets(
    sweep: ModuleType, tmp_path: Path
) -> None:
    score = sweep.score_command(tmp_path / "run" / "checkpoint.pt", tmp_path, tmp_path, 2000)
    assert score[score.index("--seed") + 1] == str(sweep.TRIPLET_SEED)
    assert score[score.index("--triplets") + 1] == "2000"
    run = sweep.parse_run("infonce-128x2")
    train = sweep.train_command(run, tmp_path, tmp_path / "out", tmp_path, 60, amp=False, seed=3)
    assert train[train.index("--seed") + 1] == "3"  # the training seed is the run's own
