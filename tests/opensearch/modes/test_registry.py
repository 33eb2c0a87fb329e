"""The mode registry: every enum member has its module, and everything that lists modes or
their parameters reads it (the request's report, the API's /config, the CLI's help, the bench
variants, the tuning grid)."""

from __future__ import annotations

import pytest

from mathsearch.evaluation.tuning_grid import expand
from mathsearch.opensearch.modes import MODES, describe_modes, mode_spec
from mathsearch.opensearch.modes.base import SearchMode
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_request import SearchRequest


def test_every_mode_is_registered_by_its_own_enum_member() -> None:
    assert list(MODES) == list(Mode)
    for mode, spec in MODES.items():
        assert isinstance(spec, SearchMode)
        assert spec.mode is mode
        assert spec.summary.endswith(".")
        assert spec.uses_bm25 or spec.uses_vectors
    assert mode_spec("knn-rescore") is MODES[Mode.KNN_RESCORE]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("knn", {"k": 10, "weights": [0.5, 0.5]}),
        ("bm25", {"k": 10, "max_df": 0.2}),
        ("rescore", {"k": 10, "alpha": 0.5, "window": 100, "normalization": "min_max",
                     "max_df": 0.2, "weights": [0.5, 0.5]}),
        ("knn-rescore", {"k": 10, "alpha": 0.5, "window": 100, "max_df": 0.2,
                         "weights": [0.5, 0.5]}),
        ("fusion", {"k": 10, "alpha": 0.5, "depth": 100, "normalization": "min_max",
                    "combination": "arithmetic_mean", "max_df": 0.2, "weights": [0.5, 0.5]}),
        ("rrf", {"k": 10, "depth": 100, "rank_constant": 60, "max_df": 0.2,
                 "weights": [0.5, 0.5]}),
    ],
)  # fmt: skip
def test_a_request_reports_its_modes_parameters_in_order(mode: str, expected: dict) -> None:
    request = SearchRequest("x", mode=mode, max_df=0.2, weights=(0.5, 0.5))
    got = request.parameters()
    assert got == expected
    assert list(got) == list(expected)  # report order: config names depend on it


def test_the_tuning_grid_sweeps_only_what_shapes_a_modes_ranking() -> None:
    configs = expand({"mode": ("rrf", "knn"), "alpha": (0.2, 0.8), "rank_constant": (20, 60)})
    names = [config.name for config in configs]
    # rrf ignores alpha (one point per rank constant); knn ignores both
    assert names == ["rrf-d100-rc20-k100", "rrf-d100-rc60-k100", "knn-k100"]


def test_describe_modes_is_what_the_search_page_reads() -> None:
    described = describe_modes()
    assert list(described) == [mode.value for mode in Mode]
    assert described["fusion"]["parameters"] == ["alpha", "depth", "normalization", "combination"]
    assert described["knn"]["subqueries"] == ["knn"]
    assert described["bm25"]["subqueries"] == ["bm25"]
    assert described["rrf"]["fused"] is True and described["rescore"]["fused"] is False
