"""One training loop for every encoder family: steps, epochs, progress, validation, checkpoints,
a time budget and resume. Each family's trainer plugs in its optimisation step and its hooks, as
sentence-transformers' ``fit`` or a Lightning loop does; the loop owns the schedule.

Per step ``t`` (0-based, ``start_step <= t < total_steps``)::

    if t % steps_per_epoch == 0:      start_epoch(state)           # shuffle, freeze, ...
    loss = step(state)                                             # one optimisation step
    state.step = t + 1; the progress bar moves (postfix(state))
    if (t + 1) % steps_per_epoch == 0: end_epoch(state, losses of the epoch)
    if due or last step or out of time: evaluate(state)
    if checkpoint_every and (t + 1) % checkpoint_every == 0: checkpoint(state)

where ``due`` is ``(t + 1) % eval_every == 0``, or the end of an epoch when ``eval_every`` is 0
(or ``eval_each_epoch``).
The loop stops after ``total_steps`` or once ``time_budget`` seconds are spent (``clock="steps"``:
seconds inside :func:`step`, which a resumed run carries on from ``elapsed``; ``"wall"``: seconds
since the loop started, validation included). A run that made steps ends with a checkpoint unless
the last step already wrote one.

>>> seen = []
>>> result = run_loop(
...     LoopSchedule(total_steps=4, steps_per_epoch=2, progress=False),
...     lambda state: float(state.step),
...     end_epoch=lambda state, losses: seen.append((state.step, losses)),
... )
>>> seen, result.step, result.stopped_by
([(2, [0.0, 1.0]), (4, [2.0, 3.0])], 4, 'steps')
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

__all__ = ["LoopResult", "LoopSchedule", "LoopState", "run_loop"]

CLOCKS = ("steps", "wall")


@dataclass(frozen=True)
class LoopSchedule:
    """When the loop steps, evaluates, saves and stops.

    Attributes:
        total_steps: the run's steps (a resumed run's included).
        steps_per_epoch: steps of one pass over the data (>= 1).
        start_step: the first step to make (a resumed run's step).
        elapsed: seconds already spent in steps (a resumed run's; ``clock="steps"``).
        time_budget: stop after so many seconds (None or 0: no budget).
        clock: what the budget counts: ``steps`` (seconds in steps) or ``wall`` (since start).
        eval_every: evaluate every so many steps; 0: at each epoch's end.
        eval_each_epoch: evaluate at each epoch's end as well as every ``eval_every`` steps.
        checkpoint_every: save every so many steps; 0: only at the end.
        final_checkpoint: save at the end when the last step did not (the family may save its
            final checkpoint itself instead).
        progress: show a progress bar (when on a terminal).
        desc: the bar's label.
    """

    total_steps: int
    steps_per_epoch: int
    start_step: int = 0
    elapsed: float = 0.0
    time_budget: float | None = None
    clock: str = "steps"
    eval_every: int = 0
    eval_each_epoch: bool = False
    checkpoint_every: int = 0
    final_checkpoint: bool = True
    progress: bool = True
    desc: str = "train"

    def __post_init__(self) -> None:
        if self.steps_per_epoch < 1 or self.total_steps < 0 or self.start_step < 0:
            raise ValueError("steps_per_epoch must be >= 1, total and start steps >= 0")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock must be one of {CLOCKS}, not {self.clock!r}")


@dataclass
class LoopState:
    """What the hooks see: the steps made so far, seconds spent, this run's losses."""

    step: int
    elapsed: float
    started: float
    losses: list[Any] = field(default_factory=list)
    last_seconds: float = 0.0
    epoch: int = 1  # the epoch of the step being made, counted from 1


@dataclass
class LoopResult:
    """The loop's outcome: final step, this run's losses, seconds, what stopped it, the last
    checkpoint written (None when no hook wrote one)."""

    step: int
    losses: list[Any]
    seconds: float
    elapsed: float
    stopped_by: str
    checkpoint: Path | None


def run_loop(
    schedule: LoopSchedule,
    step: Callable[[LoopState], Any],
    *,
    start_epoch: Callable[[LoopState], None] | None = None,
    end_epoch: Callable[[LoopState, list[Any]], None] | None = None,
    evaluate: Callable[[LoopState], None] | None = None,
    checkpoint: Callable[[LoopState], Path | None] | None = None,
    postfix: Callable[[LoopState], dict[str, Any]] | None = None,
    bar: Any = None,
) -> LoopResult:
    """Run ``step`` on the schedule (module docstring), calling the hooks.

    Args:
        schedule: steps, epochs, budget, evaluation and checkpoint intervals.
        step: one optimisation step; returns its loss (a float or a dict of them).
        start_epoch: called before an epoch's first step (``state.epoch`` is that epoch).
        end_epoch: called after an epoch's last step with that epoch's losses (of this run).
        evaluate: validation / hold-out metrics.
        checkpoint: writes a checkpoint and returns its path.
        postfix: the progress bar's postfix; default the last loss when it is a float.
        bar: a progress bar to move instead of the loop's own (several loops, one bar).

    Returns:
        :class:`LoopResult`.
    """
    per_epoch, total, budget = schedule.steps_per_epoch, schedule.total_steps, schedule.time_budget
    state = LoopState(
        step=schedule.start_step, elapsed=schedule.elapsed, started=time.perf_counter()
    )
    own_bar = bar is None
    if own_bar:
        bar = tqdm(
            total=total,
            initial=schedule.start_step,
            disable=None if schedule.progress else True,  # None: off when not a tty
            desc=schedule.desc,
            unit="step",
            dynamic_ncols=True,
        )
    saved: Path | None = None
    saved_at = -1
    stopped_by = "steps"

    def spent() -> float:
        if schedule.clock == "wall":
            return time.perf_counter() - state.started
        return state.elapsed

    try:
        while state.step < total:
            if budget and spent() >= budget:
                stopped_by = "time budget"
                break
            state.epoch = state.step // per_epoch + 1
            if start_epoch is not None and state.step % per_epoch == 0:
                start_epoch(state)
            tick = time.perf_counter()
            loss = step(state)
            state.last_seconds = time.perf_counter() - tick
            state.elapsed += state.last_seconds
            state.step += 1
            state.losses.append(loss)
            bar.update(1)
            if postfix is not None:
                bar.set_postfix(**postfix(state))
            elif isinstance(loss, float):
                bar.set_postfix(loss=f"{loss:.4f}")
            end_of_epoch = state.step % per_epoch == 0
            if end_of_epoch and end_epoch is not None:
                done = state.step - schedule.start_step
                end_epoch(state, state.losses[-min(per_epoch, done) :])
            every = schedule.eval_every
            at_epoch = end_of_epoch and (schedule.eval_each_epoch or not every)
            due = (every and state.step % every == 0) or at_epoch
            out_of_time = bool(budget and spent() >= budget)
            if evaluate is not None and (due or state.step == total or out_of_time):
                evaluate(state)
            every_save = schedule.checkpoint_every
            if checkpoint is not None and every_save and state.step % every_save == 0:
                saved, saved_at = checkpoint(state), state.step
    finally:
        if own_bar:
            bar.close()
    final = schedule.final_checkpoint and state.losses and saved_at != state.step
    if checkpoint is not None and final:
        saved = checkpoint(state)
    return LoopResult(
        step=state.step,
        losses=state.losses,
        seconds=time.perf_counter() - state.started,
        elapsed=state.elapsed,
        stopped_by=stopped_by,
        checkpoint=saved,
    )
