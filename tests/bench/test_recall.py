"""``mathsearch bench recall``: recall@k (pure) and a run against the real test index."""

from __future__ import annotations

import json

import pytest

from mathsearch.bench.recall import knn_recall, recall_at
from mathsearch.cli.main import main
from tests.conftest import DEFAULT_FIELD


def test_recall_at_counts_the_exact_top_k_found() -> None:
    assert recall_at(["a", "b", "c"], ["c", "b", "a"], 3) == 1.0
    assert recall_at(["a", "x", "y", "b"], ["a", "b", "c"], 3) == pytest.approx(1 / 3)
    assert recall_at([], [], 10) == 1.0


@pytest.mark.services
def test_asking_for_every_document_finds_the_exact_top_k(
    client: object, equation_alias: str, demo_vectors: list
) -> None:
    report = knn_recall(
        client, equation_alias, DEFAULT_FIELD, "cosinesimil", demo_vectors[:12],
        candidates=(5, len(demo_vectors)), k=5,
    )  # fmt: skip
    (few, every) = report["rows"]
    assert (few["candidates"], every["candidates"]) == (5, len(demo_vectors))
    assert every["recall@5"] == 1.0 and every["min_recall"] == 1.0  # the graph holds them all
    assert 0.0 < few["recall@5"] <= every["recall@5"]
    assert report["queries"] == 12 and report["exact_ms"]["p50"] > 0
    with pytest.raises(ValueError, match="candidate counts must be >= k"):
        knn_recall(client, equation_alias, DEFAULT_FIELD, "cosinesimil", demo_vectors[:1],
                   candidates=(3,), k=5)  # fmt: skip


@pytest.mark.services
def test_the_command_reports_a_row_per_candidate_count(
    equation_alias: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # 3: the demo's queries are the fallback where ../shared/data has no topic files
    code = main(["bench", "recall", "--index", equation_alias, "--queries", "3",
                 "--candidates", "10,40", "--json"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["candidates"] for row in report["rows"]] == [10, 40]
    assert report["queries"] == 3
    assert main(["bench", "recall", "--candidates", "5", "--k", "10"]) == 1
