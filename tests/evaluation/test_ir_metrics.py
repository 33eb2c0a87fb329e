"""Retrieval metrics against hand-computed values; uMAP against the seed's definition."""

from __future__ import annotations

import math
import random

import pytest

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.ir_metrics import evaluate, hoeffding_width, umap_direct

# q1: relevant a (1), c (2), d (1); ranked a b c e f -> relevant at ranks 1 and 3, d never found
# q2: relevant x, not in the run -> every measure 0
# q3: nothing relevant -> left out of the means
QRELS = {"q1": {"a": 1, "c": 2, "d": 1, "z": 0}, "q2": {"x": 1}, "q3": {"y": 0}}
RUN = {"q1": [("a", 5.0), ("b", 4.0), ("c", 3.0), ("e", 2.0), ("f", 1.0)], "q9": [("a", 1.0)]}


def test_per_topic_values_match_hand_computation() -> None:
    result = evaluate(QRELS, RUN)
    q1 = result.per_topic["q1"]
    assert q1["P@5"] == pytest.approx(2 / 5)
    assert q1["P@10"] == pytest.approx(2 / 10)
    assert q1["P@100"] == pytest.approx(2 / 100)
    assert q1["MAP"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert q1["uMAP"] == pytest.approx(1 / 1 + 2 / 3)
    # trec_eval nDCG: linear gains; DCG = 1/log2(2) + 2/log2(4), ideal = 2 + 1/log2(3) + 1/2
    ideal = 2 + 1 / math.log2(3) + 1 / 2
    assert q1["nDCG@10"] == pytest.approx(2.0 / ideal)
    assert result.per_topic["q2"] == {m: 0.0 for m in result.measures}


def test_means_skip_unjudged_topics_and_count_missing_ones_as_zero() -> None:
    result = evaluate(QRELS, RUN)
    assert result.topics == 2
    assert result.unjudged == ("q3",)
    assert result.missing == ("q2",)
    assert result.unknown == ("q9",)
    assert result.means["P@5"] == pytest.approx(0.2)
    assert result.means["MAP"] == pytest.approx((1 + 2 / 3) / 3 / 2)
    assert result.means["uMAP"] == pytest.approx((1 + 2 / 3) / 2)


def test_hoeffding_width_for_bounded_measures_and_none_for_umap() -> None:
    result = evaluate(QRELS, RUN, delta=0.05)
    width = math.sqrt(math.log(1 / 0.05) / (2 * 2))
    assert result.confidence["MAP"] == pytest.approx(width)
    assert result.confidence["P@5"] == pytest.approx(width)
    assert result.confidence["uMAP"] is None
    assert hoeffding_width(100, 0.05) == pytest.approx(0.12238, abs=1e-5)
    with pytest.raises(EvaluationError):
        hoeffding_width(0)


def test_umap_equals_the_seeds_definition() -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(60)]
    qrels, run = {}, {}
    for t in range(8):
        relevant = rng.sample(docs, rng.randint(1, 15))
        qrels[f"t{t}"] = {d: rng.choice((1, 2)) for d in relevant}
        ranking = rng.sample(docs, rng.randint(0, 60))
        run[f"t{t}"] = [(d, 1.0 / (i + 1)) for i, d in enumerate(ranking)]
    result = evaluate(qrels, run)
    for qid, ranking in run.items():
        expected = umap_direct(qrels[qid], [d for d, _ in ranking])
        assert result.per_topic[qid]["uMAP"] == pytest.approx(expected)


def test_umap_stops_at_rank_1000() -> None:
    ranking = [f"d{i}" for i in range(1, 1201)]
    relevant = {"d5": 1, "d1000": 1, "d1001": 1}
    result = evaluate({"q": relevant}, {"q": [(d, 0.0) for d in ranking]})
    expected = 1 / 5 + 2 / 1000  # d1001 lies beyond the seed's 1000 results
    assert umap_direct(relevant, ranking) == pytest.approx(expected)
    assert result.per_topic["q"]["uMAP"] == pytest.approx(expected)


def test_run_order_wins_over_tied_scores() -> None:
    # equal scores: the run's order (b before a), not trec_eval's docid tie-break
    result = evaluate({"q": {"a": 1}}, {"q": [("b", 1.0), ("a", 1.0)]})
    assert result.per_topic["q"]["MAP"] == pytest.approx(0.5)


def test_other_ir_measures_names_work() -> None:
    result = evaluate(QRELS, RUN, measures=("R@100", "P@1"))
    assert result.per_topic["q1"]["R@100"] == pytest.approx(2 / 3)
    assert result.per_topic["q1"]["P@1"] == 1.0


def test_bad_input_raises_typed_errors() -> None:
    with pytest.raises(EvaluationError, match="unknown measure 'P@five'"):
        evaluate(QRELS, RUN, measures=("P@five",))
    with pytest.raises(EvaluationError, match="no topic of the qrels has a relevant document"):
        evaluate({"q": {"a": 0}}, RUN)
