"""Exact cosine kNN runs (golden cases) and ``mathsearch eval exact-knn`` on real data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mathsearch.cli.main import main
from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.exact_knn import exact_knn_report, exact_knn_run
from mathsearch.evaluation.relevance_sets import SHARED_DATA, RelevanceSet
from mathsearch.evaluation.trec_files import Topic
from mathsearch.runtime.settings import DEFAULT_MODEL_PATH

IDS = ["a1", "a2", "b1", "b2"]
#: a1/a2 point one way, b1/b2 the other; a2 is a longer copy of a1 (cosine ignores length).
VECTORS = np.array([[1.0, 0.1], [3.0, 0.5], [0.1, 1.0], [0.0, 2.0]])
TOPICS = [Topic(qid="a1", latex="x", exclude=("a1",)), Topic(qid="b2", latex="y", exclude=("b2",))]
NEEDS_SHARED_DATA = pytest.mark.skipif(
    not (SHARED_DATA / "hepth2003" / "equation.txt").is_file(), reason="needs ../shared/data"
)
#: ``eval exact-knn`` on 6 real papers, 30 topics.
SIX_PAPERS = ["eval", "exact-knn", "--task", "same-document", "--papers", "6", "--topics", "30"]


def test_ranks_by_cosine_and_never_returns_the_excluded_query() -> None:
    run = exact_knn_run(IDS, VECTORS, TOPICS)
    assert [eq_id for eq_id, _ in run["a1"]] == ["a2", "b1", "b2"]
    assert [eq_id for eq_id, _ in run["b2"]] == ["b1", "a2", "a1"]
    assert run["a1"][0][1] == pytest.approx(float(np.dot([1, 0.1], [3, 0.5])) / (
        np.linalg.norm([1, 0.1]) * np.linalg.norm([3, 0.5])
    ), rel=1e-6)  # fmt: skip


def test_depth_ties_and_unknown_topics() -> None:
    tied = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    run = exact_knn_run(IDS, tied, [*TOPICS, Topic(qid="zz", latex="z")], depth=2)
    assert [eq_id for eq_id, _ in run["a1"]] == ["a2", "b1"]  # tie broken by row order
    assert "zz" not in run  # not in the collection: no ranking, not an error
    with pytest.raises(EvaluationError, match="do not match"):
        exact_knn_run(IDS[:3], VECTORS, TOPICS)
    with pytest.raises(EvaluationError, match="depth"):
        exact_knn_run(IDS, VECTORS, TOPICS, depth=0)


def test_report_separates_a_good_encoder_from_a_bad_one() -> None:
    qrels = {"a1": {"a2": 1}, "b2": {"b1": 1}}
    data = RelevanceSet("same-document", [], TOPICS, qrels)
    swapped = np.array([[0.1, 1.0], [1.0, 0.2], [1.0, 0.1], [0.0, 2.0]])
    report = exact_knn_report(data, IDS, {"good": VECTORS, "bad": swapped}, test_topics=TOPICS[:1])
    good, bad = report["systems"]["good"], report["systems"]["bad"]
    assert good["all"]["means"]["nDCG@10"] == pytest.approx(1.0)
    assert bad["all"]["means"]["nDCG@10"] < 0.75
    assert good["test"]["topics"] == 1 and report["test_topics"] == 1


@NEEDS_SHARED_DATA
def test_cli_scores_the_default_model_above_chance_on_real_papers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = SIX_PAPERS
    assert main([*argv, "--onnx", str(DEFAULT_MODEL_PATH), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    name = DEFAULT_MODEL_PATH.stem
    assert set(report["systems"]) == {"bow", name}
    assert report["topics"] == 30 and report["equations"] > 30
    # six papers: a random ranking finds a same-paper equation in ~1/6 of the top 10
    assert report["systems"][name]["all"]["means"]["P@10"] > 0.3
    assert report["systems"]["bow"]["all"]["means"]["P@10"] > 0.3
    assert main([*argv, "--onnx", "/nonexistent.onnx"]) == 1
    assert "does not exist" in capsys.readouterr().err


@NEEDS_SHARED_DATA
def test_cli_fragments_find_their_own_equation_on_real_papers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = SIX_PAPERS
    assert main([*argv, "--fragments", "--onnx", str(DEFAULT_MODEL_PATH), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    name = DEFAULT_MODEL_PATH.stem
    assert report["task"] == "same-document fragments"
    assert 20 <= report["fragments"] <= 30 and report["equations"] > 30
    assert all(m.startswith("<math") for m in report["examples"])
    # one right answer among > 30 equations: chance RR@10 is below 0.1
    for system in ("bow", name):
        means = report["systems"][system]["all"]["means"]
        assert means["RR@10"] > 0.3 and 0 < means["S@1"] <= 1
    assert main([*argv, "--fragments", "--no-bow"]) == 0
    assert "fragment queries over" in capsys.readouterr().out
