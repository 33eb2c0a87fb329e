"""The paired t-test of mathsearch.evaluation.paired_test against closed forms of Student's t."""

from __future__ import annotations

import math

import pytest

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.paired_test import (
    compare_per_topic,
    paired_t_test,
    regularized_incomplete_beta,
    t_critical,
    t_two_tailed_p,
)


def two_tailed_df2(t: float) -> float:
    """P(|T| >= t) for df = 2: 1 - t / sqrt(2 + t^2)."""
    return 1.0 - t / math.sqrt(2.0 + t * t)


def two_tailed_df3(t: float) -> float:
    """P(|T| >= t) for df = 3 from its closed-form CDF."""
    s = t / math.sqrt(3.0)
    cdf = 0.5 + (s / (1.0 + s * s) + math.atan(s)) / math.pi
    return 2.0 * (1.0 - cdf)


@pytest.mark.parametrize("t", [0.1, 0.5, 1.0, 2.0, 3.873, 10.0])
def test_p_matches_closed_forms(t: float) -> None:
    assert t_two_tailed_p(t, 1) == pytest.approx(1.0 - 2.0 * math.atan(t) / math.pi, abs=1e-12)
    assert t_two_tailed_p(t, 2) == pytest.approx(two_tailed_df2(t), abs=1e-12)
    assert t_two_tailed_p(t, 3) == pytest.approx(two_tailed_df3(t), abs=1e-12)
    assert t_two_tailed_p(-t, 3) == t_two_tailed_p(t, 3)


def test_p_tends_to_the_normal_for_many_degrees_of_freedom() -> None:
    normal = math.erfc(1.959963984540054 / math.sqrt(2.0))  # 0.05
    assert t_two_tailed_p(1.959963984540054, 10**7) == pytest.approx(normal, abs=1e-6)
    assert t_two_tailed_p(0.0, 5) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("df", "expected"),
    # table values of the 97.5% quantile; df 1 and 2 from their closed forms
    [(1, math.tan(0.475 * math.pi)), (2, math.sqrt(2.0 * 0.95**2 / (1.0 - 0.95**2))),
     (10, 2.228139), (30, 2.042272), (99, 1.984217)],
)  # fmt: skip
def test_critical_values(df: int, expected: float) -> None:
    assert t_critical(df) == pytest.approx(expected, abs=2e-6)
    assert t_two_tailed_p(t_critical(df), df) == pytest.approx(0.05, abs=1e-10)


def test_incomplete_beta_symmetry_and_ends() -> None:
    for x in (0.1, 0.37, 0.5, 0.9):
        left = regularized_incomplete_beta(x, 2.5, 0.5)
        assert left + regularized_incomplete_beta(1.0 - x, 0.5, 2.5) == pytest.approx(1.0)
    assert regularized_incomplete_beta(0.0, 2.0, 3.0) == 0.0
    assert regularized_incomplete_beta(1.0, 2.0, 3.0) == 1.0
    # I_x(1, 1) = x and I_x(a, 1) = x^a
    assert regularized_incomplete_beta(0.3, 1.0, 1.0) == pytest.approx(0.3)
    assert regularized_incomplete_beta(0.3, 4.0, 1.0) == pytest.approx(0.3**4)


def test_paired_t_test_by_hand() -> None:
    # differences 0.1 0.2 0.3 0.4: mean 0.25, sd sqrt(0.05 / 3), t = 0.25 / (sd / 2)
    result = paired_t_test([0.6, 0.7, 0.9, 0.5], [0.5, 0.5, 0.6, 0.1])
    sd = math.sqrt(0.05 / 3.0)
    assert result.n == 4 and result.df == 3
    assert result.mean_difference == pytest.approx(0.25)
    assert result.sd_difference == pytest.approx(sd)
    assert result.t == pytest.approx(0.25 / (sd / 2.0))
    assert result.p_value == pytest.approx(two_tailed_df3(result.t), abs=1e-12)
    half = 3.182446 * sd / 2.0
    assert result.ci_low == pytest.approx(0.25 - half, abs=1e-6)
    assert result.ci_high == pytest.approx(0.25 + half, abs=1e-6)
    assert (result.wins, result.losses) == (4, 0) and result.significant


def test_swapping_the_systems_mirrors_the_result() -> None:
    a, b = [0.2, 0.9, 0.4, 0.4, 0.7], [0.3, 0.5, 0.5, 0.1, 0.6]
    forward, backward = paired_t_test(a, b), paired_t_test(b, a)
    assert backward.mean_difference == pytest.approx(-forward.mean_difference)
    assert backward.ci_low == pytest.approx(-forward.ci_high)
    assert backward.p_value == pytest.approx(forward.p_value)
    assert (backward.wins, backward.losses) == (forward.losses, forward.wins)
    assert not forward.significant  # mixed differences, p well above 0.05
    assert forward.p_value > 0.05


def test_constant_differences() -> None:
    same = paired_t_test([0.5, 0.5, 0.2], [0.5, 0.5, 0.2])
    assert same.p_value == 1.0 and same.ci_low == same.ci_high == 0.0 and not same.significant
    shifted = paired_t_test([0.6, 0.6, 0.3], [0.5, 0.5, 0.2])
    assert shifted.p_value == 0.0 and shifted.significant
    assert shifted.ci_low == pytest.approx(0.1) and shifted.ci_high == pytest.approx(0.1)


def test_compare_per_topic_pairs_by_topic_id() -> None:
    system = {"q2": {"nDCG@10": 0.9}, "q1": {"nDCG@10": 0.4}, "q3": {"nDCG@10": 0.5}}
    baseline = {"q1": {"nDCG@10": 0.2}, "q3": {"nDCG@10": 0.5}, "q2": {"nDCG@10": 0.6}}
    result = compare_per_topic(system, baseline, "nDCG@10")
    assert result.mean_difference == pytest.approx((0.2 + 0.3 + 0.0) / 3)
    assert (result.wins, result.losses) == (2, 0)


def test_compare_by_group_averages_each_group_first() -> None:
    # paper A: differences +0.3 and +0.1 (mean 0.2); paper B: 0.0; paper C: +0.4
    system = {"A#1": 0.8, "A#2": 0.5, "B#1": 0.3, "C#1": 0.9}
    baseline = {"A#1": 0.5, "A#2": 0.4, "B#1": 0.3, "C#1": 0.5}
    groups = {qid: qid.split("#")[0] for qid in system}
    wrap = lambda values: {qid: {"m": value} for qid, value in values.items()}  # noqa: E731
    by_group = compare_per_topic(wrap(system), wrap(baseline), "m", groups=groups)
    expected = paired_t_test([0.2, 0.0, 0.4], [0.0, 0.0, 0.0])
    assert by_group.n == 3 and by_group.df == 2
    assert by_group.mean_difference == pytest.approx(0.2)
    assert by_group.ci_low == pytest.approx(expected.ci_low)
    assert by_group.p_value == pytest.approx(expected.p_value)
    assert (by_group.wins, by_group.losses) == (2, 0)
    by_topic = compare_per_topic(wrap(system), wrap(baseline), "m")
    assert by_topic.n == 4 and by_topic.mean_difference == pytest.approx(0.2)
    # every topic its own group: the same as by topic
    alone = compare_per_topic(wrap(system), wrap(baseline), "m", groups={})
    assert alone == by_topic


@pytest.mark.parametrize(
    ("system", "baseline", "message"),
    [([0.1, 0.2], [0.1], "same topics"), ([0.1], [0.2], "at least two"),
     ([0.1, math.nan], [0.1, 0.2], "finite")],
)  # fmt: skip
def test_bad_input_raises(system: list[float], baseline: list[float], message: str) -> None:
    with pytest.raises(EvaluationError, match=message):
        paired_t_test(system, baseline)


def test_compare_per_topic_refuses_different_topics_or_measures() -> None:
    with pytest.raises(EvaluationError, match="same topics"):
        compare_per_topic({"a": {"m": 1.0}, "b": {"m": 0.0}}, {"a": {"m": 1.0}}, "m")
    with pytest.raises(EvaluationError, match="missing"):
        compare_per_topic({"a": {"m": 1.0}, "b": {"m": 0.0}}, {"a": {"m": 1.0}, "b": {}}, "m")
    with pytest.raises(EvaluationError, match="confidence"):
        t_critical(5, 1.5)
