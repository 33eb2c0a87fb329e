"""Paired comparison of two systems over the same topics: the two-tailed paired t-test.

The retrieval reports give every mean a Hoeffding width (KDD 2020 section 5), the same for every
system. That width bounds one mean; it says little about whether one system beats another on
the same topics, because the topics that are hard for BM25 are mostly hard for the hybrid too.
The figure-embeddings seed (section 5, "Statistically significant differences between
approaches were measured using the two-tailed paired t-test at a 95% confidence level") compares
systems by the per-topic differences instead:

    d_i = s_i - b_i            (system minus baseline on topic i, i = 1..n)
    mean = sum(d_i) / n,   sd = sqrt(sum((d_i - mean)^2) / (n - 1)),   se = sd / sqrt(n)
    t = mean / se,   df = n - 1
    p = P(|T_df| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2)
    confidence interval: mean -+ t*_{df} se,  with P(|T_df| <= t*_{df}) = confidence

``I_x(a, b)`` is the regularised incomplete beta function (continued fraction, Numerical Recipes
section 6.4); ``t*`` is found by bisection on it. Nothing here needs SciPy. Like the Hoeffding
width, the test takes the topics as independent. Topics drawn from the same paper (or SemVec
class) are not quite, so :func:`compare_per_topic` can also test by group: it averages each
group's differences first and runs the same test over the ``g`` group means (``df = g - 1``), a
cluster-level paired t-test whose interval does not count one paper's topics as independent
evidence.

Example::

    result = paired_t_test([0.6, 0.7, 0.9, 0.5], [0.5, 0.5, 0.6, 0.1])
    result.mean_difference      # 0.25 (differences 0.1, 0.2, 0.3, 0.4)
    result.ci_low, result.ci_high  # 0.25 -+ 3.1824 * 0.0645 = (0.0446, 0.4554)
    result.p_value              # 0.0305
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mathsearch.core.errors import EvaluationError

logger = logging.getLogger(__name__)

#: The seed's confidence level.
DEFAULT_CONFIDENCE = 0.95

_EPS = 1e-15
_TINY = 1e-300
_MAX_ITERATIONS = 500


@dataclass(frozen=True)
class PairedComparison:
    """A system against a baseline on the same ``n`` topics (differences system - baseline)."""

    n: int
    mean_difference: float
    sd_difference: float
    t: float
    df: int
    p_value: float
    ci_low: float
    ci_high: float
    confidence: float
    wins: int
    losses: int

    @property
    def significant(self) -> bool:
        """Whether the interval excludes 0 (equivalently ``p < 1 - confidence``)."""
        return self.ci_low > 0.0 or self.ci_high < 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "significant": self.significant}


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_ITERATIONS + 1):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise EvaluationError(f"the incomplete beta function did not converge (a={a}, b={b}, x={x})")


def regularized_incomplete_beta(x: float, a: float, b: float) -> float:
    """``I_x(a, b)`` for ``0 <= x <= 1`` and ``a, b > 0``.

    >>> round(regularized_incomplete_beta(0.5, 2.0, 2.0), 12)
    0.5
    """
    if not 0.0 <= x <= 1.0:
        raise EvaluationError(f"I_x(a, b) needs 0 <= x <= 1, not {x}")
    if a <= 0.0 or b <= 0.0:
        raise EvaluationError(f"I_x(a, b) needs a, b > 0, not a={a}, b={b}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_two_tailed_p(t: float, df: float) -> float:
    """``P(|T| >= |t|)`` for Student's t with ``df`` degrees of freedom.

    >>> round(t_two_tailed_p(1.0, 1), 12)  # Cauchy: P(|T| >= 1) = 1/2
    0.5
    """
    if df <= 0:
        raise EvaluationError(f"Student's t needs df > 0, not {df}")
    if math.isinf(t):
        return 0.0
    return regularized_incomplete_beta(df / (df + t * t), df / 2.0, 0.5)


def t_critical(df: float, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """``t*`` with ``P(|T_df| <= t*) = confidence`` (bisection on :func:`t_two_tailed_p`).

    >>> round(t_critical(10), 4)
    2.2281
    """
    if not 0.0 < confidence < 1.0:
        raise EvaluationError(f"confidence must lie in (0, 1), not {confidence}")
    alpha = 1.0 - confidence
    low, high = 0.0, 1.0
    while t_two_tailed_p(high, df) > alpha:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if t_two_tailed_p(middle, df) > alpha:
            low = middle
        else:
            high = middle
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


def paired_t_test(
    system: Sequence[float],
    baseline: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedComparison:
    """The two-tailed paired t-test of ``system`` against ``baseline`` (module docstring).

    Args:
        system: per-topic values of the system, shape ``(n,)``.
        baseline: per-topic values of the baseline on the same topics in the same order.
        confidence: level of the interval (default 0.95, the seed's).

    Raises:
        EvaluationError: lengths differ, fewer than two topics, or a value is not finite.
    """
    if len(system) != len(baseline):
        raise EvaluationError(
            f"a paired test needs the same topics: {len(system)} values against {len(baseline)}"
        )
    n = len(system)
    if n < 2:
        raise EvaluationError(f"a paired test needs at least two topics, not {n}")
    differences = [float(s) - float(b) for s, b in zip(system, baseline, strict=True)]
    if not all(math.isfinite(d) for d in differences):
        raise EvaluationError("a paired test needs finite per-topic values")
    mean = math.fsum(differences) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1))
    df = n - 1
    wins = sum(1 for d in differences if d > 0)
    losses = sum(1 for d in differences if d < 0)
    se = sd / math.sqrt(n)
    if se <= 1e-15 * max(1.0, abs(mean)):  # every difference equal: no spread to test against
        t = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
        p = 1.0 if mean == 0.0 else 0.0
        return PairedComparison(n, mean, sd, t, df, p, mean, mean, confidence, wins, losses)
    t = mean / se
    half = t_critical(df, confidence) * se
    p = t_two_tailed_p(t, df)
    return PairedComparison(
        n, mean, sd, t, df, p, mean - half, mean + half, confidence, wins, losses
    )


def compare_per_topic(
    system: Mapping[str, Mapping[str, float]],
    baseline: Mapping[str, Mapping[str, float]],
    measure: str,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    groups: Mapping[str, str] | None = None,
) -> PairedComparison:
    """:func:`paired_t_test` of two ``Evaluation.per_topic`` maps (topic -> measure -> value).

    With ``groups`` (topic -> paper or class; a topic missing from it is its own group), each
    group's topics are averaged first and the test runs over the group means: ``n``, ``wins``
    and ``losses`` then count groups.

    Raises:
        EvaluationError: the two were not evaluated on the same topics, or lack ``measure``.
    """
    if set(system) != set(baseline):
        only = sorted(set(system) ^ set(baseline))
        raise EvaluationError(
            f"a paired test needs the same topics; {len(only)} differ (e.g. {only[:3]})"
        )
    topics = sorted(system)
    try:
        values = [system[qid][measure] for qid in topics]
        base = [baseline[qid][measure] for qid in topics]
    except KeyError as exc:
        raise EvaluationError(f"measure {measure!r} missing from a per-topic evaluation") from exc
    if groups is not None:
        members: dict[str, list[int]] = {}
        for position, qid in enumerate(topics):
            members.setdefault(groups.get(qid, qid), []).append(position)
        order = sorted(members)
        values = [math.fsum(values[i] for i in members[g]) / len(members[g]) for g in order]
        base = [math.fsum(base[i] for i in members[g]) / len(members[g]) for g in order]
    return paired_t_test(values, base, confidence=confidence)
