"""``mathsearch eval retrieval --task wildcard`` end to end: a few real hep-th papers, the real
node (every mode a wildcard search), Approach Zero with ``\\qvar`` patterns, the report."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.cli.main import main
from mathsearch.evaluation.eval_index import drop_eval_index
from mathsearch.evaluation.trec_files import read_qrels, read_run, read_topics
from mathsearch.opensearch import OpenSearchSettings

pytest.importorskip("pya0")

SAMPLE = Path(str(resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt")))
SYSTEMS = {
    "bm25", "knn", "rescore", "knn-rescore", "fusion", "rrf", "default", "tuned", "pya0", "random"
}  # fmt: skip


@pytest.fixture
def eval_alias(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[str]:
    alias = f"{settings.index_prefix}-test-eval-{uuid.uuid4().hex[:8]}"
    yield alias
    drop_eval_index(client, alias)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["eval", "retrieval", *argv, "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


@pytest.mark.services
def test_wildcard_index_form(
    tmp_path: Path, eval_alias: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "wild"
    argv = ["--task", "wildcard", "-o", str(out), "--source", str(SAMPLE), "--papers", "4"]
    argv += ["--topics", "16", "--seed", "1", "--index", eval_alias]
    argv += ["--grid", "mode=rrf,fusion", "alpha=0.5"]
    report = run_cli(argv, capsys)
    assert report["task"] == "wildcard" and report["metric"] == "R@10"
    assert set(report["systems"]) == SYSTEMS
    for name in ("collection.jsonl", "topics.jsonl", "topics-test.jsonl", "qrels.txt"):
        assert (out / name).is_file()
    topics = read_topics(out / "topics.jsonl")
    qrels = read_qrels(out / "qrels.txt")
    details = {
        row["qid"]: row
        for row in map(json.loads, (out / "topic-details.jsonl").read_text().splitlines())
    }
    assert set(qrels) == {t.qid for t in topics} == set(details)
    for topic in topics:
        # a pattern with variables; its source is relevant and never excluded
        assert "?" in topic.latex and topic.exclude == ()
        assert details[topic.qid]["source"] in qrels[topic.qid]
    means = {name: entry["means"] for name, entry in report["systems"].items()}
    assert all("R@10" in values and "nDCG@10" in values for values in means.values())
    # the structural check puts the source (an exact match) first for most patterns
    known = report["known_item"]["systems"]
    assert set(known) == SYSTEMS
    assert known["rrf"]["S@10"] >= 0.5 and known["rrf"]["found"] >= known["random"]["found"]
    assert means["rrf"]["R@10"] > means["random"]["R@10"]
    # pya0 was asked the \qvar form and read most of it
    assert report["pya0"]["unparsed_topics"] < report["split"]["test"]
    pya0_run = read_run(out / report["systems"]["pya0"]["run"])
    assert any(pya0_run.values())
    table = (out / "report.md").read_text(encoding="utf-8")
    assert "| system | R@10 | nDCG@10 |" in table and "| system | ranked | MRR |" in table
