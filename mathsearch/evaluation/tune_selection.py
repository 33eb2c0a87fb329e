"""Which configuration a tuning run recommends: the best, or the baseline unless the best beats it.

A grid of 66 configurations tuned on a few hundred topics always has a best, but the best is often
within the noise of the profile users already search with: picking it then chases the topics, not
the collection (docs/research/2026-12-06-evaluation-record.md found 7 to 26 of 66 configurations
within p >= 0.05 of the
best). The rule is a pure function over a :class:`~mathsearch.evaluation.tuning.TuneResult`:

* :attr:`Selection.BEST` - the configuration with the highest mean of the metric (grid order breaks
  ties): ``mathsearch tune``'s choice since it was written.
* :attr:`Selection.SIGNIFICANT` - the best only when it beats the baseline on the same topics:
  the two-tailed paired t-test of the per-topic differences ``d_i = best_i - baseline_i``
  (:func:`~mathsearch.evaluation.paired_test.compare_per_topic`; the figure-embeddings seed,
  section 5, 95% level) has ``mean(d) > 0`` and ``p < level``; otherwise the baseline is kept.

Either way the choice records the best-minus-baseline comparison (when the run had a baseline), so
a report can say how far the best is from what users have now.

Example::

    result = tune(searcher, topics, qrels, configs, out_dir="r", baseline=baseline_configuration(
        SearchProfile.default()))
    choice = choose(result, Selection.SIGNIFICANT)
    choice.chosen.config.profile      # the baseline unless the best is significantly above it
    choice.versus_baseline.p_value    # p of best - baseline
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.paired_test import PairedComparison, compare_per_topic

if TYPE_CHECKING:  # the CLI imports Selection while parsing arguments: no searcher here
    from mathsearch.evaluation.tuning import ConfigResult, TuneResult

logger = logging.getLogger(__name__)

#: The significance level of :attr:`Selection.SIGNIFICANT` (the seed's 95% confidence).
DEFAULT_LEVEL = 0.05


class Selection(StrEnum):
    """How a tuning run picks the configuration it recommends (``mathsearch tune --select``)."""

    BEST = "best"
    SIGNIFICANT = "significant"


@dataclass(frozen=True)
class Choice:
    """The recommended configuration and why.

    ``versus_baseline`` is best - baseline over the same topics (None without a baseline, when
    the baseline is the best, or with fewer than two topics)."""

    chosen: ConfigResult
    best: ConfigResult
    baseline: ConfigResult | None
    selection: Selection
    versus_baseline: PairedComparison | None
    reason: str

    @property
    def kept_baseline(self) -> bool:
        """Whether the recommendation is the baseline although another configuration scored
        higher."""
        kept = self.baseline is not None and self.chosen is self.baseline
        return kept and self.best is not self.baseline


def choose(
    result: TuneResult, selection: Selection = Selection.BEST, *, level: float = DEFAULT_LEVEL
) -> Choice:
    """The configuration ``result`` recommends under ``selection`` (module docstring).

    Raises:
        EvaluationError: :attr:`Selection.SIGNIFICANT` without a baseline, or ``level`` outside
            (0, 1).
    """
    if not 0.0 < level < 1.0:
        raise EvaluationError(f"significance level {level} must lie in (0, 1)")
    best = result.best
    baseline = result.baseline_result
    if baseline is None:
        if selection is Selection.SIGNIFICANT:
            raise EvaluationError("--select significant needs a baseline configuration")
        return Choice(best, best, None, selection, None, f"the highest {result.metric}")
    versus = None
    if baseline is not best and result.topics >= 2:
        versus = compare_per_topic(
            best.evaluation.per_topic, baseline.evaluation.per_topic, result.metric
        )
    if baseline is best:
        reason = f"the baseline has the highest {result.metric}"
        chosen = best
    elif selection is Selection.BEST:
        reason = f"the highest {result.metric}"
        chosen = best
    elif versus is not None and versus.mean_difference > 0 and versus.p_value < level:
        reason = (
            f"the best is above the baseline by {versus.mean_difference:+.4f} "
            f"(p {versus.p_value:.3g} < {level:g})"
        )
        chosen = best
    else:
        shown = "no paired test" if versus is None else f"p {versus.p_value:.3g} >= {level:g}"
        reason = f"the best is not significantly above the baseline ({shown})"
        chosen = baseline
    return Choice(chosen, best, baseline, selection, versus, reason)
