"""The wildcard row of ``mathsearch bench query``: its patterns, its ratio to rrf-client and its
option. No cluster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from mathsearch.bench.query import (
    WILDCARD_ROW,
    _QueryPool,
    _wildcard_note,
    _wildcard_pool,
    wildcard_ratio,
)
from mathsearch.bench.timing import BenchQuery
from mathsearch.cli.bench_query import _check, run_bench_query
from mathsearch.cli.main import _parser
from mathsearch.indexer.query_variables import find_variables


def _row(mode: str, e2e: float, cluster: float) -> dict[str, Any]:
    def stats(p50: float) -> dict[str, Any]:
        return {"n": 10, "p50": p50, "p95": p50 * 1.5, "p99": p50 * 2}

    return {"mode": mode, "end_to_end": stats(e2e), "cluster": stats(cluster)}


def test_the_wildcard_row_is_measured_against_plain_rrf_client() -> None:
    rows = [_row("knn", 5, 4), _row("rrf-client", 10, 8), _row(WILDCARD_ROW, 18, 16)]
    verdict = wildcard_ratio(rows)
    assert verdict["against"] == "rrf-client" and verdict["met"] is True
    assert verdict["end_to_end"] == {
        "p50": 18, "p99": 36, "plain_p50": 10, "plain_p99": 20, "ratio_p50": 1.8
    }  # fmt: skip
    assert verdict["cluster"]["ratio_p50"] == 2.0
    note = _wildcard_note(100_000, verdict)
    assert note.startswith("100,000: wildcard p50 18.0 ms / p99 36.0 ms end to end = 1.80x")
    assert "(goal <= 2x: met)" in note
    slow = wildcard_ratio([_row("rrf-client", 10, 8), _row(WILDCARD_ROW, 25, 20)])
    assert slow["met"] is False and "NOT met" in _wildcard_note(10_000, slow)
    assert wildcard_ratio([_row("rrf-client", 10, 8)]) == {}
    assert wildcard_ratio([_row(WILDCARD_ROW, 10, 8)]) == {}


class _Encoder:
    """A query encoder that featurises without a model (tokens from the LaTeX)."""

    def features(self, latex: str, **_: Any) -> Any:
        return SimpleNamespace(tokens=latex.split(), vector=None)


def test_wildcard_patterns_come_from_the_pool_end() -> None:
    held = [
        BenchQuery(f"h{i}", latex, "held")
        for i, latex in enumerate(
            [r"x^2 + y^2 = z^2", r"\frac{a+b}{2m} = E", r"\sqrt{a+b} + \sqrt{a+b} = c_1",
             r"\sin(x) \cos(y) = \tan(z) + 1", r"E = m c^2 + p^2 c^2", r"\alpha_1 + \beta_2 = 0"]
        )
    ]  # fmt: skip
    pool = _QueryPool(
        model_encoder=_Encoder(), topics=[], topics_ok=[], topics_failed=0, held=held,
        held_ok=held, held_failed=0, features={}, pool=held, features_ms=[],
    )  # fmt: skip
    wild = _wildcard_pool(pool, 4)
    assert 1 <= len(wild.pool) <= 4 and wild.info["patterns"] == len(wild.pool)
    for query in wild.pool:
        assert find_variables(query.latex) and query.kind == "held"
    # the cluster side's encoder is asked the neutral LaTeX of each pattern
    assert len(wild.features) >= 1
    assert all("?" not in latex for latex in wild.features)
    again = _wildcard_pool(pool, 4)
    assert [q.latex for q in again.pool] == [q.latex for q in wild.pool]


def test_the_wildcards_option() -> None:
    args = _parser().parse_args(["bench", "query", "--sizes", "1000", "--wildcards", "50"])
    assert args.wildcards == 50 and _check(args) == ([1000], list(args.modes.split(",")))
    assert _parser().parse_args(["bench", "query"]).wildcards == 0


def test_a_negative_wildcard_count_fails_before_any_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = _parser().parse_args(["bench", "query", "--wildcards", "-1"])
    assert run_bench_query(args) == 1
    assert "--wildcards must be >= 0" in capsys.readouterr().err


class _FakeSearcher:
    """Answers every search at once; records what it was asked (no cluster)."""

    made: ClassVar[list[str]] = []
    asked: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, client: Any, alias: str, encoder: Any = None) -> None:
        self.encoder = encoder
        self.side = "cluster" if encoder.__class__.__name__ == "_CachedEncoder" else "e2e"

    def default_field(self) -> str:
        return "vector"

    def pattern_featuriser(self) -> None:
        _FakeSearcher.made.append(self.side)

    def search(self, request: Any) -> Any:
        _FakeSearcher.asked.append((self.side, request.latex))
        stages = {"query": 1.0, "first_stage": 4.0, "structural": 2.0}
        return SimpleNamespace(hits=[1, 2], stages_ms=stages, fused="client")


def test_the_wildcard_row_is_timed_like_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from mathsearch.bench import query

    monkeypatch.setattr("mathsearch.opensearch.searcher.Searcher", _FakeSearcher)
    patterns = [BenchQuery(f"w{i}", f"?x^{i} + y", "held") for i in range(12)]
    wild = query._WildcardPool(patterns, {}, {})
    timing = query._Timing(
        modes=["rrf-client"], k=10, count=5, warmup=2, max_df=None, max_terms=None, depth=None,
        rerank=(), rerank_window=50, progress=False,
    )  # fmt: skip
    pool = SimpleNamespace(model_encoder=_Encoder())
    row = query._time_wildcards(object(), "alias", pool, wild, timing)  # type: ignore[arg-type]
    assert row["mode"] == WILDCARD_ROW
    assert row["searched_as"] == "rrf-client request, bm25 first stage"
    assert row["end_to_end"]["n"] == 5 and row["cluster"]["n"] == 5 and row["errors"] == 0
    assert row["repeated_queries"] == 0 and row["fused"] == "client"
    assert row["wildcard_stages_ms"] == {"first_stage": 4.0, "query": 1.0, "structural": 2.0}
    # both featurisers made before the clock; warm-up and both passes send distinct patterns
    assert sorted(_FakeSearcher.made) == ["cluster", "e2e"]
    sent = [latex for _, latex in _FakeSearcher.asked]
    assert len(sent) == 12 and len(set(sent)) == 12
    assert [side for side, _ in _FakeSearcher.asked].count("e2e") == 5


@pytest.mark.services
def test_bench_query_times_a_wildcard_row_on_the_node(client: Any, settings: Any) -> None:
    from importlib import resources

    from mathsearch.bench.query import bench_query
    from mathsearch.bench.query_report import format_bench_query

    sample = str(resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt"))
    report = bench_query(
        client, settings, sizes=[120], modes=["knn"], queries=5, warmup=1, sources=[sample],
        held_out=40, wildcards=4, keep=False, progress=False,
    )  # fmt: skip
    assert report["modes"] == ["knn", "rrf-client"]  # the plain row the wildcard row needs
    assert report["wildcards"]["patterns"] >= 4 and report["wildcards"]["timed"] == 4
    size = report["sizes"][0]
    rows = {row["mode"]: row for row in size["modes"]}
    assert set(rows) == {"knn", "rrf-client", WILDCARD_ROW}
    wild = rows[WILDCARD_ROW]
    assert wild["end_to_end"]["n"] == 4 and wild["errors"] == 0
    assert "structural" in wild["wildcard_stages_ms"]
    verdict = size["wildcard"]
    assert verdict["end_to_end"]["ratio_p50"] > 0 and isinstance(verdict["met"], bool)
    text = format_bench_query(report)
    assert "wildcard" in text and "x rrf-client's p50" in text
