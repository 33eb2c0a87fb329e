"""``mathsearch eval retrieval --task``: real hep-th papers and SemVec classes, the real node, pya0.

A small real slice (a few papers of the bundled hep-th sample, the SemVec fixture classes) goes
through the whole index form: relevance data, the eval index, a small tuning grid, every mode,
the tuned best, Approach Zero and the random baseline, and the report files.
"""

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
from mathsearch.core.errors import MappingError
from mathsearch.evaluation.eval_index import drop_eval_index, ensure_eval_index
from mathsearch.evaluation.relevance_sets import CollectionEquation
from mathsearch.evaluation.retrieval_eval import split_topics
from mathsearch.evaluation.trec_files import read_qrels, read_run, read_topics
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.runtime.model_card import load_card
from mathsearch.runtime.settings import RuntimeSettings

pytest.importorskip("pya0")

SAMPLE = Path(str(resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt")))
SEMVEC = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "semvec"
SYSTEMS = {
    "bm25", "knn", "rescore", "knn-rescore", "fusion", "rrf", "default", "tuned", "pya0", "random"
}  # fmt: skip
GRID = ["--grid", "mode=fusion,rescore", "alpha=0.3,0.7"]


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


def read_per_topic(out: Path) -> dict[str, dict[str, dict[str, float]]]:
    """System -> topic -> measure -> value, from report.json (``--json`` leaves them out)."""
    full = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return {name: entry["per_topic"] for name, entry in full["systems"].items()}


def check_files(out: Path, report: dict[str, Any]) -> None:
    """Every file is there; neither qrels nor runs ever hold the query itself."""
    for name in ("collection.jsonl", "topics.jsonl", "topics-tune.jsonl", "topics-test.jsonl"):
        assert (out / name).is_file()
    for name in ("qrels.txt", "report.json", "report.md", "tune/best_profile.json"):
        assert (out / name).is_file()
    assert set(report["systems"]) == SYSTEMS
    topics = read_topics(out / "topics.jsonl")
    qrels = read_qrels(out / "qrels.txt")
    assert set(qrels) == {t.qid for t in topics}
    for topic in topics:
        assert topic.exclude == (topic.qid,)
        assert qrels[topic.qid] and topic.qid not in qrels[topic.qid]
    test_ids = {t.qid for t in read_topics(out / "topics-test.jsonl")}
    tune_ids = {t.qid for t in read_topics(out / "topics-tune.jsonl")}
    assert test_ids and tune_ids and not test_ids & tune_ids
    assert test_ids | tune_ids == {t.qid for t in topics}
    for name, entry in report["systems"].items():
        run = read_run(out / entry["run"])
        assert set(run) <= test_ids and entry["topics"] == len(test_ids)
        assert all(qid not in {doc for doc, _ in ranking} for qid, ranking in run.items())
        assert all(len(ranking) <= report["k"] for ranking in run.values()), name
    table = (out / "report.md").read_text(encoding="utf-8")
    assert "| system | P@5 | P@10 | P@100 | nDCG@10 | MAP | uMAP | ± | topics |" in table
    assert all(f"| {name} | " in table for name in SYSTEMS)
    # every other system is compared with BM25 topic by topic, from the per-topic values
    paired = report["paired"]
    assert paired["baseline"] == "bm25" and paired["measure"] == report["metric"]
    assert set(paired["systems"]) == SYSTEMS - {"bm25"}
    assert paired == json.loads((out / "report.json").read_text(encoding="utf-8"))["paired"]
    per_topic = read_per_topic(out)
    bm25 = per_topic["bm25"]
    for name, entry in paired["systems"].items():
        topics = per_topic[name]
        differences = [topics[qid][report["metric"]] - bm25[qid][report["metric"]] for qid in bm25]
        assert entry["n"] == len(test_ids)
        assert abs(entry["mean_difference"] - sum(differences) / len(differences)) < 1e-9
        assert entry["wins"] == sum(1 for d in differences if d > 0), name
        assert entry["ci_low"] <= entry["mean_difference"] <= entry["ci_high"]
        # by paper / class: one mean difference per group of the test half
        groups = {qid.split("#")[0] for qid in test_ids}
        assert entry["by_group"]["n"] == len(groups), name
    assert "| system | difference | 95% interval | p | wins / losses |" in table


@pytest.mark.services
def test_same_document_index_form(
    tmp_path: Path, eval_alias: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sd"
    argv = ["--task", "same-document", "-o", str(out), "--source", str(SAMPLE), "--papers", "4"]
    argv += ["--topics", "24", "--seed", "1", "--index", eval_alias, *GRID]
    report = run_cli(argv, capsys)
    check_files(out, report)
    assert report["data"]["papers"] == 4 and report["split"]["topics"] == 24
    assert report["index"]["reused"] is False
    assert report["index"]["written"] == report["data"]["equations"]
    assert report["tuned"]["configurations"] == 4  # fusion and rescore at alpha 0.3 and 0.7
    pya0 = report["pya0"]
    assert pya0["indexed"] + pya0["rejected"] == pya0["equations"] == report["data"]["equations"]
    assert pya0["indexed"] > 0.8 * pya0["equations"]
    means = {name: entry["means"] for name, entry in report["systems"].items()}
    # same-paper equations share notation and the model embeds it: the model-based rankings
    # (and BM25) beat a random order of the collection; pya0 returns only the formulas that
    # match structurally (short lists), so its MAP is no fair comparison here
    for name in ("bm25", "knn", "fusion", "rrf", "tuned"):
        assert means[name]["MAP"] > means["random"]["MAP"], name
        assert means[name]["nDCG@10"] > means["random"]["nDCG@10"], name

    again = run_cli(argv, capsys)  # the same collection and model: both indexes are reused
    assert again["index"]["reused"] is True and again["pya0"]["reused"] is True
    assert again["systems"]["knn"]["means"] == report["systems"]["knn"]["means"]


@pytest.mark.services
def test_equivalence_index_form(
    tmp_path: Path, eval_alias: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eq"
    argv = ["--task", "equivalence", "-o", str(out), "--semvec", str(SEMVEC), "--topics", "4"]
    argv += ["--sets", "boolean5,oneVarPoly10", "--index", eval_alias, *GRID]
    report = run_cli(argv, capsys)
    check_files(out, report)
    assert report["data"]["sets"] == ["boolean5", "oneVarPoly10"]
    assert report["data"]["equations"] == 43 and report["split"]["topics"] == 8
    assert report["pya0"]["equations"] == 43
    collection = [json.loads(line) for line in (out / "collection.jsonl").open()]
    class_of = {row["eq_id"]: row["doc_id"] for row in collection}
    for qid, relevant in read_qrels(out / "qrels.txt").items():
        assert {class_of[eq_id] for eq_id in relevant} == {class_of[qid]}


@pytest.mark.services
def test_equivalence_over_the_seq2seq_vectors(
    tmp_path: Path, eval_alias: str, capsys: pytest.CaptureFixture[str], client: Any
) -> None:
    from mathsearch.runtime.embedders import encoder_card

    out = tmp_path / "eq-s2s"
    argv = ["--task", "equivalence", "-o", str(out), "--semvec", str(SEMVEC), "--topics", "4"]
    argv += ["--sets", "boolean5,oneVarPoly10", "--index", eval_alias, "--no-pya0"]
    report = run_cli([*argv, "--encoders", "seq2seq", *GRID], capsys)
    field = encoder_card("seq2seq").vector_field
    assert report["index"]["reused"] is False
    assert report["index"]["written"] == report["data"]["equations"]  # refused ones too
    mapping = next(iter(client.indices.get_mapping(index=eval_alias).values()))["mappings"]
    assert field in mapping["properties"] and encoder_card("gcn").vector_field != field
    assert mapping["_meta"]["default_vector_field"] == encoder_card("gcn").vector_field
    # the report names the field kNN searched, not only the index's default one
    assert report["index"]["searched_field"] == field
    assert f"kNN searches `{field}`" in (out / "report.md").read_text(encoding="utf-8")
    # kNN ranks by the seq2seq vectors: its runs differ from the default model's below
    knn = read_run(out / report["systems"]["knn"]["run"])
    assert knn and all(ranking for ranking in knn.values())
    again = run_cli([*argv, "--encoders", "seq2seq", *GRID], capsys)
    assert again["index"]["reused"] is True
    # two encoders: every mode searches both fields (gcn is the default model's field, so the
    # index of the run above is reused)
    both = run_cli([*argv, "--encoders", "gcn,seq2seq", *GRID], capsys)
    assert both["index"]["reused"] is True
    assert both["index"]["searched_field"] == f"{encoder_card('gcn').vector_field} + {field}"
    both_knn = read_run(out / both["systems"]["knn"]["run"])
    assert both_knn and both_knn != knn
    # the tuned profile names both encoders, so serving it searches what was tuned
    tuned = SearchProfile.load(out / "tune" / "best_profile.json")
    assert tuned.encoders == ("gcn", "seq2seq")
    plain = run_cli([*argv, *GRID], capsys)  # the default model alone: another index
    assert plain["index"]["reused"] is False
    plain_knn = read_run(out / plain["systems"]["knn"]["run"])
    assert plain_knn not in (knn, both_knn)


def test_split_keeps_papers_together() -> None:
    from mathsearch.evaluation.relevance_sets import build_same_document

    data = build_same_document([SAMPLE], papers=6, topics=30, seed=0)
    tune, test = split_topics(data, seed=4)
    assert len(tune) + len(test) == 30 and tune and test
    assert not {data.groups[t.qid] for t in tune} & {data.groups[t.qid] for t in test}
    assert split_topics(data, seed=4) == (tune, test)


@pytest.mark.services
def test_foreign_index_is_never_overwritten(
    client: OpenSearch, settings: OpenSearchSettings, eval_alias: str
) -> None:
    spec = VectorSpec.from_card(load_card(RuntimeSettings.from_env().model))
    ensure_equation_index(client, eval_alias, [spec], settings)  # not built by eval: no marker
    with pytest.raises(MappingError, match="not built by `mathsearch eval retrieval`"):
        ensure_eval_index(client, eval_alias, [CollectionEquation("a#0", "a", "x^2")])


@pytest.mark.services
def test_cli_errors_are_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    field_twin: Path,
) -> None:
    sample = ["--task", "same-document", "-o", str(tmp_path), "--source", str(SAMPLE)]
    cases = {
        "needs -o DIR": ["--task", "same-document"],
        "--queries, --relevance, --corpus (in-memory form) or --task": [],
        "in-memory form only": ["--task", "equivalence", "-o", str(tmp_path), "--corpus", "x"],
        "unknown SemVec set(s) nope": [
            "--task", "equivalence", "-o", str(tmp_path), "--semvec", str(SEMVEC),
            "--sets", "nope", "--no-pya0",
        ],
    }  # fmt: skip
    for expected, argv in cases.items():
        assert_one_line_error(argv, expected, capsys)
    # before any featurisation or cluster: another model on the default model's field
    twin = [*sample, "--no-pya0", "--encoders", f"gcn,{field_twin}"]
    assert_one_line_error(twin, "different models that write the same field", capsys)
    monkeypatch.setattr("mathsearch.evaluation.retrieval_eval.pya0_available", lambda: False)
    assert_one_line_error(sample, "pip install pya0==0.3.7` (the `bench` extra) or pass", capsys)
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", "http://127.0.0.1:9")
    assert_one_line_error([*sample, "--no-pya0"], "does not answer", capsys)
    assert not (tmp_path / "report.json").exists()


def assert_one_line_error(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", "retrieval", *argv])
    captured = capsys.readouterr()
    assert code == 1 and not captured.out
    assert captured.err.startswith("mathsearch: error: ") and expected in captured.err
    assert captured.err.count("\n") == 1
