"""Topics (JSON Lines), qrels and runs (TREC): golden files, round trips, malformed input."""

from __future__ import annotations

from pathlib import Path

import pytest

from mathsearch.evaluation.trec_files import (
    Topic,
    TrecFileError,
    read_qrels,
    read_run,
    read_topics,
    write_qrels,
    write_run,
    write_topics,
)

RESOURCES = Path(__file__).parent.parent / "resources" / "opensearch"


def test_reads_the_golden_topics() -> None:
    topics = read_topics(RESOURCES / "topics.jsonl")
    assert topics == [
        Topic("q1", "E = mc^2", exclude=("eq-1",)),
        Topic("q2", r"\int_0^1 x^2 dx", text="area under a parabola"),
    ]


def test_reads_the_golden_qrels() -> None:
    assert read_qrels(RESOURCES / "qrels.txt") == {
        "q1": {"eq-2": 1, "eq-3": 2, "eq-4": 0},
        "q2": {"eq-9": 1},
    }


def test_reads_a_run_in_rank_order_not_file_order() -> None:
    run = read_run(RESOURCES / "run.txt")
    assert run == {"q1": [("eq-2", 0.9), ("eq-5", 0.5)], "q2": [("eq-9", 0.4), ("eq-8", 0.4)]}


def test_writes_the_trec_run_format(tmp_path: Path) -> None:
    path = write_run(tmp_path / "run.txt", {"q1": [("a", 2.5), ("b", 1.0)], "q2": []}, tag="t")
    assert path.read_text() == "q1 Q0 a 1 2.5 t\nq1 Q0 b 2 1 t\n"


def test_writes_the_trec_qrels_format(tmp_path: Path) -> None:
    path = write_qrels(tmp_path / "qrels.txt", {"q1": {"a": 1, "b": 0}})
    assert path.read_text() == "q1 0 a 1\nq1 0 b 0\n"


def test_round_trips(tmp_path: Path) -> None:
    topics = [Topic("t1", "x^2", exclude=("e1", "e2")), Topic("t2", "", text="words only")]
    qrels = {"t1": {"e3": 1, "e4": 0}, "t2": {"e5": 2}}
    run = {"t1": [("e3", 0.75), ("e9", 0.25)], "t2": [("e5", 3.0)]}
    assert read_topics(write_topics(tmp_path / "t.jsonl", topics)) == topics
    assert read_qrels(write_qrels(tmp_path / "q.txt", qrels)) == qrels
    assert read_run(write_run(tmp_path / "r.txt", run, tag="x")) == run


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"qid": "q1", "latex": "x"}\n{"qid": "q2", "latex": }\n', r"topics\.jsonl:2: not JSON"),
        ('{"qid": "q1", "latex": "x"}\n{"qid": "q1", "latex": "y"}\n', r":2: duplicate topic"),
        ('{"qid": "q1"}\n', r":1: topic 'q1' needs a 'latex' string"),
        ('{"qid": "q1", "latex": "x", "exclude": "e1"}\n', r":1: 'exclude' .* list of ids"),
        ('{"qid": "q 1", "latex": "x"}\n', r":1: topic id 'q 1' contains whitespace"),
        ('{"qid": "q1", "latex": " "}\n', r":1: topic 'q1' has neither LaTeX nor words"),
        ('{"qid": "q1", "latex": "x", "query": "y"}\n', r":1: unknown topic keys: query"),
        ('["q1", "x"]\n', r":1: a topic is a JSON object"),
    ],
)
def test_malformed_topics_name_the_line(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "topics.jsonl"
    path.write_text(text)
    with pytest.raises(TrecFileError, match=reason):
        read_topics(path)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("q1 0 a 1\nq1 0 b\n", r"qrels\.txt:2: .* got 3 fields"),
        ("q1 0 a 1\n\nq1 0 b yes\n", r"qrels\.txt:3: relevance 'yes' is not an integer"),
    ],
)
def test_malformed_qrels_name_the_line(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    with pytest.raises(TrecFileError, match=reason):
        read_qrels(path)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4\n", r"run\.txt:2: .* got 5 fields"),
        ("q1 Q0 a first 0.5 t\n", r"run\.txt:1: bad rank 'first'"),
        ("q1 Q0 a 1 nan t\n", r"run\.txt:1: score 'nan' is not finite"),
    ],
)
def test_malformed_runs_name_the_line(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "run.txt"
    path.write_text(text)
    with pytest.raises(TrecFileError, match=reason):
        read_run(path)


def test_refuses_ids_that_would_break_the_format(tmp_path: Path) -> None:
    with pytest.raises(TrecFileError, match="contains whitespace"):
        write_run(tmp_path / "r.txt", {"q1": [("two words", 1.0)]}, tag="t")
    with pytest.raises(TrecFileError, match="run tag"):
        write_run(tmp_path / "r.txt", {"q1": []}, tag="")


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(TrecFileError, match="cannot read"):
        read_qrels(tmp_path / "absent.txt")
