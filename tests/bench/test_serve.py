"""``mathsearch bench serve`` / ``bench fuzz-api``: the figures (pure), the request generator,
the command line, and one short real run against a spawned ``mathsearch serve``."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.bench.fuzz_api import fuzz_requests, is_crash
from mathsearch.bench.serve import (
    DEFAULT,
    HYBRID,
    LoadResult,
    _search_body,
    bench_queries,
    bench_serve,
    capacity,
    ensure_bench_index,
    equation_queries,
    iter_modes,
    meets,
    summarize,
)
from mathsearch.cli.bench_serve import format_bench_serve
from mathsearch.cli.main import main
from mathsearch.core.paths import SOURCE_ROOT
from mathsearch.opensearch import OpenSearchSettings
from tests.opensearch.conftest import drop_alias


def test_summary_counts_statuses_rates_and_latency_of_the_200s() -> None:
    answers = [(200, 0.010)] * 6 + [(429, 0.001)] * 2 + [(503, 0.002), (500, 0.5), (0, 0.0)]
    answers += [(-1, 30.0)]
    result = LoadResult(answers=answers, wall_s=2.0, clients=3, modes=("bm25",))
    result.errors.update({"ConnectError": 1, "ReadTimeout": 1})
    report = summarize(result)
    assert (report["sent"], report["completed"], report["ok"]) == (12, 10, 6)
    assert report["queries_per_s"] == 3.0 and report["answers_per_s"] == 5.0
    assert report["by_status"] == {"200": 6, "429": 2, "500": 1, "503": 1}
    assert (report["status_5xx"], report["connection_errors"], report["timeouts"]) == (1, 1, 1)
    assert report["error_rate"] == round(3 / 12, 4) and report["shed_rate"] == 0.25
    assert report["latency_ms_ok"]["p99"] == pytest.approx(10.0)
    assert report["latency_ms_all"]["max"] == pytest.approx(500.0)
    assert summarize(LoadResult())["error_rate"] is None


def _row(offered: float, qps: float, p99: float, errors: float = 0.0) -> dict:
    return {"offered_per_s": offered, "queries_per_s": qps, "latency_ms_all": {"p99": p99},
            "error_rate": errors, "shed_rate": 0.0}  # fmt: skip


def test_capacity_is_the_highest_rate_held_with_every_lower_one() -> None:
    rows = [_row(10, 10, 20), _row(20, 19.5, 60), _row(40, 39, 150), _row(80, 79, 40)]
    assert [meets(row, p99_ms=100) for row in rows] == [True, True, False, True]
    assert capacity(rows, p99_ms=100) == 20  # 80 came after a miss: the server fell behind
    assert capacity(rows, p99_ms=200) == 80
    assert not meets(_row(10, 9.0, 20), p99_ms=100)  # below 95% of the offered rate
    assert not meets(_row(10, 10, 20, errors=0.01), p99_ms=100)
    assert capacity([_row(10, 10, 500)], p99_ms=100) is None
    assert set(HYBRID) == {"rescore", "knn-rescore", "fusion", "rrf"}


def test_fuzz_requests_are_reproducible_and_varied() -> None:
    seeds = bench_queries(limit=20)  # the bundled queries when ../shared/data is not there
    assert 3 <= len(seeds) <= 20 and all(seeds)
    first = list(fuzz_requests(seeds, 300, seed=3))
    assert first == list(fuzz_requests(seeds, 300, seed=3))
    assert first != list(fuzz_requests(seeds, 300, seed=4))
    kinds = Counter(r.kind for r in first)
    assert set(kinds) == {"search", "render", "raw", "equation", "get", "method"}
    assert any(len(r.body) > 2000 for r in first)  # huge inputs
    assert any(b"\xff" in r.body or b"\xed" in r.body for r in first)  # invalid UTF-8


def test_is_crash_wants_json_reasons_and_no_5xx_but_503() -> None:
    good = json.dumps({"error": {"status": 422, "reason": "k: too big"}}).encode()
    assert is_crash(422, "application/json", good) is None
    assert is_crash(503, "application/json", good) is None
    assert is_crash(200, "text/html", b"<html>") is None
    assert is_crash(500, "application/json", good) == "status 500"
    assert "without JSON" in str(is_crash(404, "text/plain", b"Not Found"))
    assert "without error.reason" in str(is_crash(400, "application/json", b"{}"))


def test_bad_input_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["bench", "serve", "--duration", "0"]) == 1
    assert "--duration must be positive" in capsys.readouterr().err
    empty = tmp_path / "topics.txt"
    empty.write_text("no tabs here\n")
    assert main(["bench", "serve", "--queries", str(empty)]) == 1
    assert "no queries in" in capsys.readouterr().err
    assert main(["bench", "serve", "--equations", str(empty), "--format", "nope"]) == 1
    assert "unknown format 'nope'" in capsys.readouterr().err


def test_requests_run_the_servers_profile_and_draw_each_query_once() -> None:
    queries = ["a", "b", "c", "d"]
    bodies = [_search_body(queries, (DEFAULT,), spot, 10) for spot in range(6)]
    assert all("mode" not in body for body in bodies)  # the server's profile decides
    assert [b["latex"] for b in bodies] == ["a", "b", "c", "d", "a", "b"]
    mixed = [_search_body(queries, ("knn", "bm25"), spot, 5) for spot in range(2)]
    assert [b.get("mode") for b in mixed] == ["knn", "bm25"]
    assert list(iter_modes("default")) == [DEFAULT]


SAMPLE = str(SOURCE_ROOT / "indexer" / "resources" / "hepth2003-sample.txt")


def _sample_queries(count: int) -> list[str]:
    """``count`` distinct queries from the bundled hep-th sample (no ../shared/data needed)."""
    return bench_queries([], count, equations=[SAMPLE], fmt="hepth")


def test_equation_queries_are_unique_and_in_a_fixed_random_order() -> None:
    sample = SAMPLE
    first = equation_queries([sample], "hepth", seed=1)
    assert len(first) > 20 and len(set(first)) == len(first)
    assert first == equation_queries([sample], "hepth", seed=1)
    assert first != equation_queries([sample], "hepth", seed=2)
    assert sorted(first) == sorted(equation_queries([sample], "hepth", seed=2))
    pool = bench_queries([], equations=[sample], fmt="hepth", seed=1)
    assert pool == first  # no topic files given: the equations alone


@pytest.mark.services
def test_a_short_run_against_a_spawned_server(equation_alias: str) -> None:
    report = bench_serve(
        index=equation_alias, clients=3, duration=2.0, mode="bm25", rate=0.5, burst=1,
        inflight=4, queries=bench_queries(limit=30),
    )  # fmt: skip
    load = report["load"]
    assert report["server"]["spawned"] and report["server"]["alive_after"]
    assert report["health_before"]["http_status"] == report["health_after"]["http_status"] == 200
    assert report["health_after"]["load"]["in_flight"] == 0
    assert report["settings"]["max_inflight"] == 4 and report["settings"]["api_keys"] is True
    assert load["sent"] == load["completed"] > 0 and load["error_rate"] == 0.0
    # one key per client: each client got its own burst of 1 before its 429s
    assert load["by_status"].get("200", 0) >= 3 and load["by_status"].get("429", 0) > 0
    assert report["machine"]["cpu_count"] >= 1
    assert report["load"]["cpu"]["ms"]["server"] > 0  # the closed loop is metered too


@pytest.mark.services
def test_an_open_loop_ladder_sends_each_rate_and_reports_the_capacity(
    equation_alias: str,
) -> None:
    report = bench_serve(
        index=equation_alias, duration=2.0, mode="bm25", rates=[4, 8], p99_ms=10_000,
        queries=_sample_queries(30),
    )  # fmt: skip
    ladder = report["ladder"]
    # open loop: every due request was sent, whatever the answers took
    assert [(row["offered_per_s"], row["sent"]) for row in ladder] == [(4, 8), (8, 16)]
    assert all(row["error_rate"] == 0 and row["shed_rate"] == 0 for row in ladder)
    assert report["server"]["env"]["MATHSEARCH_SERVE_RATE"] == "0.0"  # the limiter is off
    held = [row["offered_per_s"] for row in ladder if row["meets"]]
    assert report["capacity_per_s"] == (max(held) if held else None)
    assert "capacity" in format_bench_serve(report)
    assert [row["repeated"] for row in ladder] == [0, 0]  # 24 requests, 30 queries
    # each rate's CPU per answered query: the spawned server's processes and the stack's node
    # both worked for every query, and the ceiling follows from them
    for row in ladder:
        ms = row["cpu"]["ms"]
        assert ms["server"] > 0 and ms["opensearch"] > 0 and ms["load"] >= 0
        cores = report["machine"]["cpu_count"]
        ceiling = cores * 1000 / (ms["server"] + ms["opensearch"])
        assert row["cpu"]["ceiling_per_s"] == pytest.approx(ceiling, rel=0.01)
    assert "cpu      a query: server" in format_bench_serve(report)


@pytest.mark.services
def test_by_default_the_load_runs_the_servers_profile_without_repeating_a_query(
    equation_alias: str,
) -> None:
    queries = _sample_queries(8)
    # the sample index has no second-stage fields: the server embeds each query's candidates,
    # which on a busy machine outlasts the default 1 s queue wait; this test is about what is
    # sent and run, not about shedding load
    report = bench_serve(
        index=equation_alias, duration=2.0, rates=[6], p99_ms=60_000, queries=queries,
        queue_timeout=60,
    )  # fmt: skip
    row = report["ladder"][0]
    assert row["modes"] == [DEFAULT] and row["sent"] == 12
    assert row["by_status"] == {"200": 12}  # the shipped profile, second stage included
    assert row["queries_pool"] == len(queries) == 8 and row["repeated"] == 4
    assert "4 requests repeated a query" in format_bench_serve(report)


@pytest.mark.services
def test_without_an_index_the_demo_corpus_is_indexed_first(
    client: OpenSearch, settings: OpenSearchSettings, equation_alias: str
) -> None:
    prefix = f"{settings.index_prefix}-test-bs{uuid.uuid4().hex[:6]}"
    local = replace(settings, index_prefix=prefix)
    alias = f"{prefix}-bench-serve-equations"
    try:
        assert ensure_bench_index(client, local, equation_alias) == (equation_alias, "given")
        found, how = ensure_bench_index(client, local)
        assert found == alias and "bundled demo corpus" in how
        assert int(client.count(index=alias)["count"]) >= 200
        assert ensure_bench_index(client, local) == (alias, "existing")  # reused, not rebuilt
    finally:
        drop_alias(client, alias)
