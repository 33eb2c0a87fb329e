"""The one training loop (encoders/train_loop.py): its schedule, hooks, budget and resume, with a
plain step function (pure logic, no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mathsearch.encoders.train_loop import LoopSchedule, LoopState, run_loop


def _record(schedule: LoopSchedule, **hooks: bool) -> tuple[list[tuple[str, int]], object]:
    """Run the loop with every hook logging ``(hook, step)``; returns the log and the result."""
    log: list[tuple[str, int]] = []

    def step(state: LoopState) -> float:
        log.append(("step", state.step))
        return float(state.step)

    def checkpoint(state: LoopState) -> Path:
        log.append(("checkpoint", state.step))
        return Path(f"ckpt-{state.step}")

    result = run_loop(
        schedule,
        step,
        start_epoch=lambda state: log.append(("start", state.epoch)),
        end_epoch=lambda state, losses: log.append(("end", len(losses))),
        evaluate=lambda state: log.append(("eval", state.step)),
        checkpoint=checkpoint if hooks.get("checkpoint", True) else None,
    )
    return log, result


def test_epochs_evaluations_and_checkpoints_follow_the_schedule() -> None:
    log, result = _record(
        LoopSchedule(total_steps=6, steps_per_epoch=3, checkpoint_every=4, progress=False)
    )
    assert log == [
        ("start", 1), ("step", 0), ("step", 1), ("step", 2), ("end", 3), ("eval", 3),
        ("start", 2), ("step", 3), ("checkpoint", 4), ("step", 4), ("step", 5), ("end", 3),
        ("eval", 6), ("checkpoint", 6),
    ]  # fmt: skip
    assert result.step == 6 and result.losses == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert result.checkpoint == Path("ckpt-6") and result.stopped_by == "steps"


def test_eval_every_replaces_epoch_ends_unless_asked_for_both() -> None:
    log, _ = _record(LoopSchedule(total_steps=4, steps_per_epoch=4, eval_every=3, progress=False))
    assert [s for hook, s in log if hook == "eval"] == [3, 4]  # every 3, and the last step
    log, _ = _record(
        LoopSchedule(
            total_steps=8, steps_per_epoch=4, eval_every=3, eval_each_epoch=True, progress=False
        )
    )
    assert [s for hook, s in log if hook == "eval"] == [3, 4, 6, 8]


def test_a_resumed_run_starts_at_its_step_and_its_epoch() -> None:
    log, result = _record(
        LoopSchedule(total_steps=6, steps_per_epoch=3, start_step=4, progress=False)
    )
    assert log[:2] == [("step", 4), ("step", 5)]  # mid-epoch: no start-of-epoch hook
    assert ("end", 2) in log  # the epoch's losses of this run only
    assert result.losses == [4.0, 5.0] and result.step == 6


def test_the_time_budget_stops_the_run_and_the_last_step_is_evaluated_and_saved() -> None:
    log, result = _record(
        LoopSchedule(
            total_steps=100, steps_per_epoch=10, elapsed=5.0, time_budget=5.0, progress=False
        )
    )
    assert log == [] and result.step == 0 and result.stopped_by == "time budget"
    assert result.checkpoint is None  # no step, no checkpoint

    ticks = iter(range(1000))

    def slow(state: LoopState) -> float:
        next(ticks)
        return 0.0

    evaluated: list[int] = []
    result = run_loop(
        LoopSchedule(total_steps=10**6, steps_per_epoch=10**6, time_budget=1e-9, progress=False),
        slow,
        evaluate=lambda state: evaluated.append(state.step),
    )
    assert result.step == 1 and result.stopped_by == "time budget" and evaluated == [1]


def test_no_final_checkpoint_when_the_family_saves_its_own() -> None:
    log, result = _record(
        LoopSchedule(total_steps=3, steps_per_epoch=3, final_checkpoint=False, progress=False)
    )
    assert ("checkpoint", 3) not in log and result.checkpoint is None


def test_a_bad_schedule_is_refused() -> None:
    with pytest.raises(ValueError, match="steps_per_epoch"):
        LoopSchedule(total_steps=3, steps_per_epoch=0)
    with pytest.raises(ValueError, match="clock"):
        LoopSchedule(total_steps=3, steps_per_epoch=1, clock="cpu")
