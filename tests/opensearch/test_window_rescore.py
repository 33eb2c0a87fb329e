"""mathsearch.opensearch.window_rescore: golden values of the window-normalised rescore (pure)."""

from __future__ import annotations

import pytest

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import Normalization
from mathsearch.opensearch.window_rescore import cosine01, rank_window, rescore_window


def test_min_max_golden_values() -> None:
    # BM25 10 / 5 / 0 -> 1, 0.5, 0.001 (the plugin's floor); cos01 .5 / 1 / .75 -> .001, 1, .5
    scores = rescore_window([10.0, 5.0, 0.0], [[0.5, 1.0, 0.75]], [0.5, 0.5])
    assert [s.bm25_normalized for s in scores] == pytest.approx([1.0, 0.5, 0.001])
    assert [s.vectors_normalized[0] for s in scores] == pytest.approx([0.001, 1.0, 0.5])
    assert [s.score for s in scores] == pytest.approx([0.5005, 0.75, 0.2505])
    assert rank_window(scores) == [1, 0, 2]


def test_raw_bm25_scale_no_longer_decides() -> None:
    # the same window with BM25 scaled by 100: the ranking is the same
    small = rescore_window([3.0, 2.0, 1.0], [[0.6, 0.9, 0.7]], [0.5, 0.5])
    large = rescore_window([300.0, 200.0, 100.0], [[0.6, 0.9, 0.7]], [0.5, 0.5])
    assert rank_window(small) == rank_window(large) == [1, 0, 2]


def test_alpha_extremes_and_ties_keep_bm25_order() -> None:
    bm25, cos = [9.0, 9.0, 1.0], [[0.2, 0.9, 0.5]]
    assert rank_window(rescore_window(bm25, cos, [1.0, 0.0])) == [0, 1, 2]
    assert rank_window(rescore_window(bm25, cos, [0.0, 1.0])) == [1, 2, 0]


def test_several_fields_and_a_missing_vector() -> None:
    scores = rescore_window(
        [4.0, 2.0, 0.0], [[1.0, 0.5, None], [0.5, 1.0, 0.75]], [0.5, 0.25, 0.25]
    )
    assert scores[2].vectors_normalized[0] is None  # left out of field 1's normalisation
    assert scores[1].vectors_normalized[0] == pytest.approx(0.001)
    assert scores[2].score == pytest.approx(0.5 * 0.001 + 0.25 * 0.5)
    assert scores[0].score == pytest.approx(0.5 * 1.0 + 0.25 * 1.0 + 0.25 * 0.001)


def test_l2_normalisation_and_empty_window() -> None:
    scores = rescore_window([3.0, 4.0], [[0.6, 0.8]], [0.5, 0.5], Normalization.L2)
    assert [s.bm25_normalized for s in scores] == pytest.approx([0.6, 0.8])
    assert rescore_window([], [[]], [0.5, 0.5]) == []


def test_shapes_are_checked_and_cosine01() -> None:
    with pytest.raises(QueryError, match="weights"):
        rescore_window([1.0], [[0.5]], [1.0])
    with pytest.raises(QueryError, match="one value per window hit"):
        rescore_window([1.0, 2.0], [[0.5]], [0.5, 0.5])
    assert cosine01([1.0, 0.0], [0.0, 2.0]) == pytest.approx(0.5)
    assert cosine01([1.0, 0.0], [-3.0, 0.0]) == pytest.approx(0.0)
    assert cosine01([1.0, 0.0], None) is None
    with pytest.raises(QueryError, match="dimensions"):
        cosine01([1.0, 0.0], [1.0])
