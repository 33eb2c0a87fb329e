"""Golden tests of client-side fusion: hand-computed values, and agreement with the real plugin."""

from __future__ import annotations

import math

import pytest

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import (
    Combination,
    Normalization,
    combine_scores,
    fuse,
    normalize_scores,
    rrf,
    rrf_score,
)
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.searcher import Searcher, SearchRequest

F32 = 1e-6


def test_min_max_maps_to_unit_interval_with_a_floor_for_the_minimum() -> None:
    assert normalize_scores([4.0, 2.0, 1.0], Normalization.MIN_MAX) == pytest.approx(
        [1.0, 1 / 3, 0.001], abs=F32
    )
    assert normalize_scores([7.0, 7.0], Normalization.MIN_MAX) == [1.0, 1.0]


def test_l2_divides_by_the_euclidean_norm() -> None:
    assert normalize_scores([3.0, 4.0], Normalization.L2) == pytest.approx([0.6, 0.8], abs=F32)
    assert normalize_scores([0.0, 0.0], Normalization.L2) == [0.0, 0.0]


def test_z_score_uses_the_sample_std_and_the_plugins_edge_cases() -> None:
    out = normalize_scores([1.0, 2.0, 3.0], Normalization.Z_SCORE)
    # below the mean -> 0.001; equal to the mean -> the list's max; above -> (s - mean) / std,
    # std the sample one (commons-math's): sqrt(2 / 2) = 1
    assert out == pytest.approx([0.001, 3.0, 1.0], abs=1e-5)
    std = math.sqrt(((1 - 2.5) ** 2 + (4 - 2.5) ** 2) / 1)
    assert normalize_scores([1.0, 4.0], Normalization.Z_SCORE) == pytest.approx(
        [0.001, 1.5 / std], abs=1e-5
    )
    assert normalize_scores([2.5], Normalization.Z_SCORE) == [2.5]  # one score: the mean


def test_combinations_with_weights_and_missing_scores() -> None:
    arith, geo, harm = (
        Combination.ARITHMETIC_MEAN,
        Combination.GEOMETRIC_MEAN,
        Combination.HARMONIC_MEAN,
    )
    assert combine_scores([1.0, 0.5], arith, [0.3, 0.7]) == pytest.approx(0.65, abs=F32)
    # a subquery that missed the document counts as 0 with its weight in the arithmetic mean
    assert combine_scores([1.0, None], arith, [0.3, 0.7]) == pytest.approx(0.3, abs=F32)
    assert combine_scores([0.25, 1.0], geo, [0.5, 0.5]) == pytest.approx(0.5, abs=F32)
    # ... and is skipped by the geometric and harmonic means
    assert combine_scores([0.25, None], geo, [0.5, 0.5]) == pytest.approx(0.25, abs=F32)
    assert combine_scores([1.0, 0.25], harm, [0.5, 0.5]) == pytest.approx(0.4, abs=F32)
    assert combine_scores([None, 0.25], harm, [0.5, 0.5]) == pytest.approx(0.25, abs=F32)


def test_rrf_sums_reciprocal_ranks_from_one() -> None:
    assert rrf_score(0, 60) == pytest.approx(1 / 61, abs=1e-9)
    fused = rrf([[("a", 9.0), ("b", 5.0)], [("b", 0.9), ("c", 0.1)]], rank_constant=60)
    assert [h.doc_id for h in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61, abs=1e-7)
    assert fused[0].normalized == pytest.approx((1 / 62, 1 / 61), abs=1e-7)


def test_fuse_keeps_the_longest_list_and_reports_raw_scores() -> None:
    fused = fuse([[("a", 12.0), ("b", 6.0)], [("b", 0.9), ("c", 0.8)]])
    assert [h.doc_id for h in fused] == ["b", "a"]
    assert fused[0].raw == (6.0, 0.9)
    assert fused[1].raw == (12.0, None) and fused[1].normalized == (1.0, None)


def test_bad_weights_are_refused() -> None:
    with pytest.raises(QueryError, match="sum to 1"):
        fuse([[("a", 1.0)], [("a", 1.0)]], weights=[0.5, 0.6])
    with pytest.raises(QueryError, match="2 subqueries"):
        fuse([[("a", 1.0)], [("a", 1.0)]], weights=[1.0])


QUERY_NUMBERS = (3, 40, 77, 120, 181)


def _same_ranking(server: list, client: list) -> None:
    assert len(server) == len(client)
    for a, b in zip(server, client, strict=True):
        assert a.score == pytest.approx(b.score, rel=1e-5, abs=1e-6)
    # the same document has the same score on both sides; ids differ only by the order inside
    # groups of equal scores (the plugin leaves it to a hash map), also at the cut-off
    on_server = {hit.eq_id: hit.score for hit in server}
    # the client fetches the fused hits' stored fields afterwards: the same as the server's
    shown = {hit.eq_id: (hit.doc_id, hit.latex, hit.position, hit.highlight) for hit in server}
    for hit in client:
        assert hit.latex and hit.doc_id
        assert shown.get(hit.eq_id, (hit.doc_id, hit.latex, hit.position, hit.highlight)) == (
            hit.doc_id,
            hit.latex,
            hit.position,
            hit.highlight,
        )
        if hit.eq_id in on_server:
            assert on_server[hit.eq_id] == pytest.approx(hit.score, rel=1e-5, abs=1e-6)
        else:
            assert hit.score == pytest.approx(server[-1].score, rel=1e-5, abs=1e-6)


@pytest.mark.services
@pytest.mark.parametrize("normalization", [Normalization.MIN_MAX, Normalization.L2])
@pytest.mark.parametrize("combination", list(Combination))
def test_client_fusion_ranks_exactly_as_the_normalization_processor(
    searcher: Searcher, demo_parsed: list, normalization: Normalization, combination: Combination
) -> None:
    for number in QUERY_NUMBERS:
        latex = demo_parsed[number].record.latex
        for alpha, max_df in ((0.3, None), (0.8, 0.2)):
            common = {
                "max_df": max_df,
                "mode": Mode.FUSION,
                "k": 20,
                "depth": 30,
                "alpha": alpha,
                "normalization": normalization,
                "combination": combination,
            }
            server = searcher.search(SearchRequest(latex, fusion_side="server", **common))
            client = searcher.search(SearchRequest(latex, fusion_side="client", **common))
            assert server.fused == "server" and client.fused == "client"
            assert len(server.hits) == 20
            _same_ranking(server.hits, client.hits)


@pytest.mark.services
def test_client_rrf_ranks_exactly_as_the_score_ranker_processor(
    searcher: Searcher, demo_parsed: list
) -> None:
    for number in QUERY_NUMBERS:
        latex = demo_parsed[number].record.latex
        for constant in (1, 60):
            common = {"mode": Mode.RRF, "k": 20, "depth": 30, "rank_constant": constant}
            server = searcher.search(SearchRequest(latex, fusion_side="server", **common))
            client = searcher.search(SearchRequest(latex, fusion_side="client", **common))
            _same_ranking(server.hits, client.hits)


@pytest.mark.services
def test_z_score_runs_client_side_and_server_side_where_the_plugin_takes_it(
    searcher: Searcher, demo_parsed: list
) -> None:
    latex = demo_parsed[3].record.latex
    request = SearchRequest(latex, mode=Mode.FUSION, normalization=Normalization.Z_SCORE, k=5)
    server = SearchRequest(**{**request.__dict__, "fusion_side": "server"})
    if searcher.capabilities().server_z_score:  # neural-search 3.x: the same ranking
        _same_ranking(searcher.search(server).hits, searcher.search(request).hits)
    else:  # 2.19 refuses it: only the client side offers z_score
        with pytest.raises(QueryError, match="normalization technique is not supported"):
            searcher.search(server)
    response = searcher.search(request)
    assert response.fused == "client" and len(response.hits) == 5
    assert response.hits[0].eq_id == demo_parsed[3].eq_id
