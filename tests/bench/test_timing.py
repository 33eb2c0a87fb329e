"""Timing the bench query searches: percentiles, the mode variants, one sequential run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from mathsearch.bench.timing import (
    DEFAULT,
    MODES,
    VARIANTS,
    BenchQuery,
    QueryDraw,
    _TookClient,
    interleave,
    latency_summary,
    percentile,
    stage_summary,
    time_searches,
)
from mathsearch.core.errors import QueryError
from mathsearch.opensearch.queries import Mode

# -- percentiles -------------------------------------------------------------------------------


@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 95, 99, 100])
def test_percentile_matches_numpy_linear(q: float) -> None:
    values = [float(v) for v in np.random.default_rng(7).exponential(5.0, size=137)]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_small_cases() -> None:
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0  # unsorted input
    assert percentile([10.0, 20.0], 95) == pytest.approx(19.5)
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_latency_summary() -> None:
    stats = latency_summary([1.0, 2.0, 3.0, 4.0, 100.0], wall_s=0.5)
    assert stats["n"] == 5
    assert stats["p50"] == 3.0
    assert stats["p99"] == pytest.approx(96.16)
    assert stats["mean"] == 22.0
    assert stats["max"] == 100.0
    assert stats["qps"] == 10.0
    assert latency_summary([], 1.0) == {"n": 0}


# -- renaming ----------------------------------------------------------------------------------


def test_variants_cover_every_mode_and_both_fusion_sides() -> None:
    assert MODES == (
        "knn", "bm25", "rescore", "knn-rescore", "fusion", "rrf", "fusion-client", "rrf-client",
        "default",
    )  # fmt: skip
    assert VARIANTS[DEFAULT].profile  # the shipped profile's request, not a bare mode
    assert {VARIANTS[name].mode for name in MODES} == set(Mode)
    for name, mode, side in [
        ("fusion", Mode.FUSION, "server"),
        ("rrf", Mode.RRF, "server"),
        ("fusion-client", Mode.FUSION, "client"),
        ("rrf-client", Mode.RRF, "client"),
    ]:
        request = VARIANTS[name].request("x^2", k=7)
        assert (request.mode, request.fusion_side, request.k) == (mode, side, 7)
        request.validate()
    assert VARIANTS["knn"].request("x", k=3).fusion_side == "auto"  # not a fusion mode


def test_variant_request_passes_max_df() -> None:
    request = VARIANTS["rrf-client"].request("x^2", k=10, max_df=0.25)
    assert request.max_df == 0.25
    assert VARIANTS["bm25"].request("x^2", k=10).max_df is None


def test_variant_request_passes_depth_raised_to_k() -> None:
    assert VARIANTS["fusion-client"].request("x^2", k=10, depth=30).depth == 30
    assert VARIANTS["rrf"].request("x^2", k=50, depth=30).depth == 50  # as a profile raises it
    assert VARIANTS["rrf"].request("x^2", k=10).depth == 100  # the request's own default


def test_interleave() -> None:
    a = [BenchQuery(f"a{i}", "x", "topic") for i in range(3)]
    b = [BenchQuery("b0", "y", "held")]
    assert [q.name for q in interleave(a, b)] == ["a0", "b0", "a1", "a2"]


class _Bar:
    def __init__(self) -> None:
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n


class _FakeSearcher:
    """Answers like a Searcher whose client is a _TookClient over a fake cluster."""

    def __init__(self, took: _TookClient) -> None:
        self.took = took

    def search(self, request: Any) -> Any:
        if request == "bad":
            raise QueryError("refused")
        self.took.msearch(index="i", body=[])
        self.took.mget(index="i", body={"ids": []})
        return SimpleNamespace(hits=[1, 2], fused="client", stages_ms={"query": 1.0})


def test_time_searches_sums_msearch_took_and_counts_fused_sides() -> None:
    cluster = SimpleNamespace(
        msearch=lambda **_: {"took": 4, "responses": []}, mget=lambda **_: {"docs": []}
    )
    took = _TookClient(cluster)
    bar = _Bar()
    run = time_searches(_FakeSearcher(took), took, lambda latex: latex, ["a", "bad", "c"], bar)
    assert bar.n == 3
    assert run.errors == 1 and len(run.ok) == 2
    assert run.tooks == [4.0, 4.0]  # one _msearch took per query; the mget has none
    assert run.hits == 4
    assert run.fused == {"client": 2}


def test_a_query_draw_never_repeats_until_the_pool_is_spent() -> None:
    pool = [BenchQuery(f"e{i}", f"q{i}", "held") for i in range(5)]
    draw = QueryDraw(pool)
    first, second = draw.take(3), draw.take(2)
    assert {q.latex for q in first} | {q.latex for q in second} == {f"q{i}" for i in range(5)}
    assert draw.repeats == 0
    again = draw.take(2)  # the pool is spent: the draw starts again and counts the repeats
    assert [q.latex for q in again] == ["q0", "q1"] and draw.repeats == 2
    with pytest.raises(ValueError):
        QueryDraw([])


def test_the_stage_summary_reads_only_searches_with_a_second_stage() -> None:
    assert stage_summary([{"query": 1.0, "first_stage": 4.0}]) is None
    rows = [
        {"query": 2.0, "first_stage": 6.0, "second_stage": 2.0},
        {"query": 1.0, "first_stage": 4.0, "second_stage": 5.0},
        {"query": 3.0, "first_stage": 8.0, "second_stage": 9.0},
        {"query": 1.0, "first_stage": 3.0},  # no second stage: left out
    ]
    summary = stage_summary(rows)
    assert summary is not None
    assert (summary["query"], summary["first_stage"], summary["second_stage"]) == (2.0, 6.0, 5.0)
    assert summary["second_stage_share"] == 0.45  # shares 0.2, 0.5, 0.45: the median
