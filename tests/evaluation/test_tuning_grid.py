"""``--grid`` parsing and expansion into the configurations each mode makes sense with."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mathsearch.core.errors import ConfigurationError
from mathsearch.evaluation.tuning_grid import (
    DEFAULT_GRID,
    baseline_configuration,
    expand,
    parse_grid,
    with_baseline,
)
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_profile import SearchProfile


def test_parses_lists_and_inclusive_ranges() -> None:
    grid = parse_grid(["mode=fusion,rrf alpha=0.1:0.9:0.1", "k=10,100", "window=50:150:50"])
    assert grid["mode"] == (Mode.FUSION, Mode.RRF)
    assert grid["alpha"] == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    assert grid["k"] == (10, 100)
    assert grid["window"] == (50, 100, 150)


def test_default_grid_has_every_mode_with_its_own_parameters() -> None:
    configs = expand(DEFAULT_GRID)
    counts = Counter(c.mode for c in configs)
    assert counts == {
        Mode.KNN: 1,
        Mode.BM25: 1,
        Mode.RRF: 1,
        Mode.RESCORE: 27,  # 9 alphas x the normalisation inside the window
        Mode.KNN_RESCORE: 9,
        Mode.FUSION: 27,  # 9 alphas x min_max, l2, z_score x arithmetic_mean
    }
    assert len({c.name for c in configs}) == len(configs) == 66
    fusion = {(c.profile.alpha, c.profile.normalization) for c in configs if c.mode is Mode.FUSION}
    assert (0.3, Normalization.Z_SCORE) in fusion
    assert all(c.profile.k == 100 for c in configs)


def test_each_mode_varies_only_what_it_uses() -> None:
    configs = expand(
        parse_grid(
            [
                "mode=all alpha=0.2,0.8 normalization=min_max,l2",
                "combination=arithmetic_mean,geometric_mean window=50,100 k=10",
                "depth=100 rank_constant=20,60",
            ]
        )
    )
    by_mode: dict[Mode, list[dict[str, object]]] = {}
    for config in configs:
        by_mode.setdefault(config.mode, []).append(config.parameters())
    assert by_mode[Mode.KNN] == [{"mode": "knn", "k": 10}]
    assert by_mode[Mode.BM25] == [{"mode": "bm25", "k": 10}]
    assert len(by_mode[Mode.RESCORE]) == 8  # alpha x window x normalization (in the window)
    assert {tuple(p) for p in by_mode[Mode.RESCORE]} == {
        ("mode", "k", "alpha", "window", "normalization")
    }
    assert len(by_mode[Mode.FUSION]) == 8  # alpha x normalization x combination
    assert {p["rank_constant"] for p in by_mode[Mode.RRF]} == {20, 60}
    assert all("alpha" not in p for p in by_mode[Mode.RRF])
    assert len({c.name for c in configs}) == len(configs)


def test_window_below_k_is_raised_and_duplicates_are_dropped() -> None:
    configs = expand(parse_grid(["mode=rescore alpha=0.5 window=50,100 k=100"]))
    assert [(c.profile.window, c.profile.k) for c in configs] == [(100, 100)]


def test_left_out_keys_take_one_default() -> None:
    (config,) = expand(parse_grid(["mode=fusion"]))
    profile = config.profile
    assert (profile.alpha, profile.normalization, profile.combination) == (
        0.5,
        Normalization.MIN_MAX,
        Combination.ARITHMETIC_MEAN,
    )
    assert (profile.k, profile.depth) == (100, 100)


def test_query_token_cuts_vary_only_the_modes_with_a_bm25_side() -> None:
    configs = expand(parse_grid(["mode=bm25,knn max_terms=0,32 max_df=1.0,0.2"]))
    names = [c.name for c in configs]
    assert names == [
        "bm25-df1-k100",
        "bm25-df1-mt32-k100",
        "bm25-df0.2-k100",
        "bm25-df0.2-mt32-k100",
        "knn-k100",
    ]
    assert [c.profile.max_terms for c in configs[:2]] == [0, 32]


def test_a_base_profile_gives_the_query_tokens_the_grid_leaves_out() -> None:
    shipped = SearchProfile(mode=Mode.RESCORE, alpha=0.7, max_terms=32, max_df=0.5)
    configs = expand(parse_grid(["mode=bm25,rescore,knn alpha=0.3"]), base=shipped)
    by_mode = {c.profile.mode: c.profile for c in configs}
    # BM25-side modes search with the shipped cut; kNN has no tokens to cut
    assert (by_mode[Mode.BM25].max_terms, by_mode[Mode.BM25].max_df) == (32, 0.5)
    assert (by_mode[Mode.RESCORE].max_terms, by_mode[Mode.RESCORE].alpha) == (32, 0.3)
    assert [c.name for c in configs] == [
        "bm25-df0.5-mt32-k100",
        "rescore-a0.3-w100-min_max-df0.5-mt32-k100",
        "knn-k100",  # carries the base's settings, but has no query tokens to cut
    ]
    # a grid that names the key wins over the base; no base: every token
    (named,) = expand(parse_grid(["mode=bm25 max_terms=0"]), base=shipped)
    assert named.profile.max_terms == 0 and named.profile.max_df == 0.5
    (plain,) = expand(parse_grid(["mode=bm25"]))
    assert plain.profile.max_terms is None and plain.profile.max_df is None


def test_reads_a_json_grid(tmp_path: Path) -> None:
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"mode": ["fusion"], "alpha": "0.2:0.4:0.1", "rank-constant": 60}))
    grid = parse_grid([str(path)])
    assert grid == {"mode": (Mode.FUSION,), "alpha": (0.2, 0.3, 0.4), "rank_constant": (60,)}
    assert [c.profile.alpha for c in expand(grid)] == [0.2, 0.3, 0.4]


@pytest.mark.parametrize(
    ("specs", "reason"),
    [
        (["speed=1"], "unknown grid key 'speed'"),
        (["mode=fusion,vector"], "mode 'vector' is not one of"),
        (["normalization=max"], "normalization 'max' is not one of"),
        (["alpha=1.5"], r"alpha '1.5' must lie in \[0, 1\]"),
        (["alpha=0.1:0.9"], "not a number or START:STOP:STEP"),
        (["alpha=0.9:0.1:0.1"], "not a number or START:STOP:STEP"),
        (["k=ten"], "k 'ten' is not an integer"),
        (["window=0"], "must be a positive integer"),
        (["max_terms=-1"], r"max_terms .* must be >= 0"),
        (["alpha=0.1 alpha=0.2"], "given twice"),
        (["alpha"], "neither KEY=VALUES nor a readable JSON file"),
        (["mode="], "must look like KEY=V1,V2"),
        ([], "empty grid"),
    ],
)
def test_bad_grids_raise_clear_errors(specs: list[str], reason: str) -> None:
    with pytest.raises(ConfigurationError, match=reason):
        parse_grid(specs)


def test_a_baseline_profile_becomes_a_grid_point_or_joins_its_twin() -> None:
    shipped = SearchProfile(mode=Mode.FUSION, k=10, alpha=0.4, max_terms=32, source={"name": "x"})
    point = baseline_configuration(shipped)
    # evaluated as deep as the grid (k 100), window and depth raised like expand() raises them
    assert (point.profile.k, point.profile.window, point.profile.depth) == (100, 100, 100)
    assert point.profile.source == {"name": "x"} and point.profile.label.startswith("x")
    configs = expand(DEFAULT_GRID, base=shipped)
    same, name = with_baseline(configs, point)
    assert same == configs and name == "fusion-a0.4-d100-min_max-arithmetic_mean-mt32-k100"
    other = baseline_configuration(SearchProfile(mode=Mode.RRF, rank_constant=20, depth=200))
    more, name = with_baseline(configs, other)
    assert more == [*configs, other] and name == other.name == "rrf-d200-rc20-k100"
    with pytest.raises(ConfigurationError, match="baseline profile"):
        baseline_configuration(SearchProfile(mode=Mode.FUSION, alpha=1.5))


def test_the_second_stage_is_a_grid_key_of_the_hybrid_modes_of_a_reranking_base() -> None:
    base = SearchProfile(rerank=("gcn-v8.onnx",), rerank_window=50, rerank_alpha=0.6)
    grid = parse_grid(["mode=bm25,fusion", "alpha=0.4", "rerank_alpha=0.5,0.7"])
    configs = expand(grid, base=base)
    names = [c.name for c in configs]
    assert names == [
        "bm25-k100",
        "fusion-a0.4-d100-min_max-arithmetic_mean-rw50-ra0.5-k100",
        "fusion-a0.4-d100-min_max-arithmetic_mean-rw50-ra0.7-k100",
    ]
    fused = [c for c in configs if c.mode is Mode.FUSION]
    assert [c.profile.rerank_alpha for c in fused] == [0.5, 0.7]
    assert all(c.profile.rerank == ("gcn-v8.onnx",) for c in configs)
    assert not configs[0].profile.request("x").reranks  # bm25 never re-ranks
    # without a reranking base the keys change nothing: one fusion point
    assert len([c for c in expand(grid) if c.mode is Mode.FUSION]) == 1
    with pytest.raises(ConfigurationError, match="rerank_window"):
        parse_grid(["rerank_window=2000"])
    with pytest.raises(ConfigurationError, match="rerank_alpha"):
        parse_grid(["rerank_alpha=1.5"])
