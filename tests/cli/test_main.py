"""The `mathsearch` command against the real stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mathsearch.export.embedders import MODELS_DIR
from tests.conftest import DEFAULT_DIM, DEFAULT_FIELD


def _mathsearch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mathsearch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_help_lists_commands_with_examples() -> None:
    result = _mathsearch("--help")
    assert result.returncode == 0
    for word in ("stack", "demo", "worker", "examples:"):
        assert word in result.stdout


def test_unknown_command_fails_with_usage() -> None:
    result = _mathsearch("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


@pytest.mark.services
def test_stack_status_json_shows_green_and_plugins() -> None:
    result = _mathsearch("stack", "status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["health"] == "green"
    assert {"opensearch-knn", "opensearch-neural-search"} <= set(status["plugins"])
    assert status["redis"]["ok"] is True


@pytest.mark.services
def test_status_of_an_unreachable_cluster_is_one_line_and_nonzero() -> None:
    import os

    env = {**os.environ, "MATHSEARCH_OPENSEARCH_URL": "http://127.0.0.1:9"}
    result = subprocess.run(
        [sys.executable, "-m", "mathsearch.cli.main", "stack", "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("mathsearch: error: OpenSearch at http://127.0.0.1:9")
    assert "Traceback" not in result.stderr


@pytest.mark.services
def test_demo_indexes_real_equations_and_answers_hybrid_queries() -> None:
    result = _mathsearch("demo", "--no-stack-up", "--json", "--k", "3")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    first_latex = report["queries"][0]["latex"]
    assert report["indexed"] > 150
    assert sum(report["rejected"].values()) > 0
    # the vectors come from the shipped models through the ONNX runtime, one field each
    fields = [m["field"] for m in report["models"]]
    assert fields[0] == DEFAULT_FIELD and report["models"][0]["dim"] == DEFAULT_DIM
    assert len(fields) == len(set(fields)) >= 1
    if report["workers"].startswith("started") and (MODELS_DIR / "gcn-v8.onnx").is_file():
        # the demo's own workers serve the shipped second graph CNN too (running ones serve
        # what MATHSEARCH_ENCODERS says)
        assert fields == [DEFAULT_FIELD, "vec_gcn_v8"]
    modes = {q["mode"] for q in report["queries"]}
    fused = {m for m in modes if m.startswith("rrf: bm25")}
    assert modes - fused == {"fusion", "rrf", "rescore", "knn-rescore", "knn", "bm25"}
    # the ranking parameters come from the shipped default profile, named in the report
    profile = report["profile"]
    assert profile["label"] and profile["format"].startswith("mathsearch-search-profile")
    assert report["queries"][0]["mode"] == profile["mode"]  # the profile's mode first
    if len(fields) > 1:  # BM25 + every encoder's kNN fused in one hybrid query
        assert fused == {"rrf: bm25 + " + " + ".join(fields)}
        by_mode = {q["mode"]: q for q in report["queries"] if q["latex"] == first_latex}
        single, multi = by_mode["rrf"]["hits"], by_mode[next(iter(fused))]["hits"]
        # three ranked lists give larger reciprocal-rank sums than two can reach (the
        # profile's rrf row re-ranks its window, so its scores are on another scale)
        assert multi[0]["score"] > 2 / (60 + 1) and single[0]["score"] > 0
    for query in report["queries"]:
        assert len(query["hits"]) == 3
    # each query retypes part of an equation of paper 0301004: every mode ranks that
    # near-identical equation first for every query (gcn-v7, towers trained with sub-formula
    # crops: docs/encoders.md), and so does the fused bm25 + gcn-v7 + gcn-v8 row
    for query in report["queries"]:
        assert query["expected"], query["mode"]
        assert query["expected_first"], (query["mode"], query["latex"])
        assert query["hits"][0]["eq_id"] in query["expected"]
    # an equivalent rewriting among near misses: first with canonical forms, missed without
    equivalence = report["equivalence"]
    assert equivalence["canonical_first"], equivalence["canonical"]
    assert equivalence["canonical"][0]["eq_id"] == equivalence["expected"] == "rewrite#0"
    assert not equivalence["structure_only_first"], equivalence["structure_only"]
