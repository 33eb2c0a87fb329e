"""The recommendation rule of ``mathsearch tune`` (``--select``): golden cases over plain results,
and the report files it changes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.ir_metrics import Evaluation
from mathsearch.evaluation.tune_report import write_report
from mathsearch.evaluation.tune_selection import Selection, choose
from mathsearch.evaluation.tuning import ConfigResult, TuneResult
from mathsearch.evaluation.tuning_grid import Configuration, config_name
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_profile import SearchProfile

METRIC = "nDCG@10"
BASELINE = [0.5, 0.6, 0.7, 0.8]
# best - baseline = 0.1, 0.2, 0.3, 0.4: mean 0.25, p 0.0305 (paired_test's docstring example)
CLEAR = [0.6, 0.8, 1.0, 1.2]
# best - baseline = 0.1, -0.1, 0.2, 0.0: mean 0.05, p 0.42
NOISY = [0.6, 0.5, 0.9, 0.8]


def result_of(profile: SearchProfile, values: list[float], out: Path) -> ConfigResult:
    config = Configuration(config_name(profile), profile)
    per_topic = {f"q{i}": {METRIC: v} for i, v in enumerate(values)}
    mean = sum(values) / len(values)
    evaluation = Evaluation((METRIC,), per_topic, {METRIC: mean}, {METRIC: 0.68}, delta=0.05)
    return ConfigResult(config, evaluation, out / "runs" / f"{config.name}.txt")


def tune_result(out: Path, best: list[float], *, with_baseline: bool = True) -> TuneResult:
    top = result_of(SearchProfile(mode=Mode.RRF, k=100), best, out)
    base = result_of(SearchProfile(mode=Mode.FUSION, alpha=0.4, k=100), BASELINE, out)
    ranked = sorted([top, base], key=lambda r: -r.score(METRIC))
    return TuneResult(
        metric=METRIC,
        results=ranked,
        topics=len(BASELINE),
        out_dir=out,
        baseline=base.config.name if with_baseline else None,
        baseline_label="the shipped profile (fusion, alpha 0.4)" if with_baseline else None,
    )


def test_best_wins_when_the_paired_test_says_it_is_above_the_baseline(tmp_path: Path) -> None:
    result = tune_result(tmp_path, CLEAR)
    choice = choose(result, Selection.SIGNIFICANT)
    assert choice.chosen is result.best and not choice.kept_baseline
    versus = choice.versus_baseline
    assert versus is not None
    assert versus.mean_difference == pytest.approx(0.25)
    assert versus.p_value == pytest.approx(0.0305, abs=1e-4)
    assert "p 0.0305 < 0.05" in choice.reason


def test_the_baseline_is_kept_when_the_best_is_within_the_noise(tmp_path: Path) -> None:
    result = tune_result(tmp_path, NOISY)
    assert result.best.config.name.startswith("rrf")  # the best by the mean...
    choice = choose(result, Selection.SIGNIFICANT)
    assert choice.chosen is result.baseline_result and choice.kept_baseline  # ...is not chosen
    assert choice.versus_baseline is not None and choice.versus_baseline.p_value > 0.05
    assert choice.reason.startswith("the best is not significantly above the baseline")
    # the default rule still takes the highest mean, with the same comparison on record
    plain = choose(result)
    assert plain.chosen is result.best and plain.selection is Selection.BEST
    assert plain.versus_baseline == choice.versus_baseline
    # a stricter level keeps the baseline even against the clear case
    assert choose(tune_result(tmp_path, CLEAR), Selection.SIGNIFICANT, level=0.01).kept_baseline


def test_a_baseline_that_is_the_best_is_chosen_without_a_test(tmp_path: Path) -> None:
    result = tune_result(tmp_path, [0.1, 0.2, 0.3, 0.4])
    assert result.best is result.baseline_result
    for selection in Selection:
        choice = choose(result, selection)
        assert choice.chosen is result.best and choice.versus_baseline is None
        assert not choice.kept_baseline


def test_significant_needs_a_baseline_and_a_level_in_range(tmp_path: Path) -> None:
    result = tune_result(tmp_path, CLEAR, with_baseline=False)
    assert result.baseline_result is None
    assert choose(result).chosen is result.best
    with pytest.raises(EvaluationError, match="needs a baseline"):
        choose(result, Selection.SIGNIFICANT)
    with pytest.raises(EvaluationError, match="level"):
        choose(tune_result(tmp_path, CLEAR), Selection.SIGNIFICANT, level=1.0)


def test_the_report_recommends_the_chosen_profile_and_marks_the_baseline(tmp_path: Path) -> None:
    result = tune_result(tmp_path, NOISY)
    choice = choose(result, Selection.SIGNIFICANT)
    files = write_report(result, topics_path="t.jsonl", qrels_path="q.txt", choice=choice)
    profile = SearchProfile.load(files["best_profile"])
    assert (profile.mode, profile.alpha) == (Mode.FUSION, 0.4)  # the baseline, not rrf
    assert profile.source["selection"] == "significant"
    assert profile.source["value"] == pytest.approx(sum(BASELINE) / 4)
    assert profile.source["baseline"]["best_minus_baseline"]["mean_difference"] == pytest.approx(
        0.05
    )
    report = json.loads(files["report"].read_text())
    assert report["best"]["configuration"] == result.best.config.name
    assert report["recommended"]["configuration"] == result.baseline
    assert report["baseline"]["label"] == "the shipped profile (fusion, alpha 0.4)"
    table = files["results_md"].read_text()
    assert f"`{result.baseline}` (baseline)" in table
    assert "within the noise of these topics" in table
    with files["results_csv"].open(encoding="utf-8") as handle:
        marked = [row["configuration"] for row in csv.DictReader(handle) if row["baseline"]]
    assert marked == [result.baseline]
    # the default rule recommends the best, as before
    files = write_report(result, topics_path="t.jsonl", qrels_path="q.txt")
    assert SearchProfile.load(files["best_profile"]).mode is Mode.RRF
