"""Approach Zero searches real hep-th equations in a child process; a crash costs one topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mathsearch.evaluation import pya0_search
from mathsearch.evaluation.pya0_peer import Pya0Error, index_with_pya0
from mathsearch.evaluation.pya0_search import search_with_pya0
from mathsearch.evaluation.trec_files import Topic
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.records import EquationRecord

pytest.importorskip("pya0")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pya0 index of the first 60 equations of the bundled hep-th sample."""
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    folder = tmp_path_factory.mktemp("pya0")
    index_with_pya0([(r.eq_id, r.latex or "") for r in records[:60]], folder)
    return folder


@pytest.fixture(scope="module")
def topics() -> list[Topic]:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    chosen = [r for r in records[:60] if len(r.latex or "") > 20][:4]
    found = [Topic(r.eq_id, r.latex or "", exclude=(r.eq_id,)) for r in chosen]
    return [*found, Topic("broken", r"\frac{a", exclude=())]


def test_searches_drop_the_query_and_count_unparsed(workdir: Path, topics: list[Topic]) -> None:
    answered: list[int] = []
    found = search_with_pya0(workdir, topics, k=5, progress=answered.append)
    assert set(found.run) == {t.qid for t in topics}
    assert sum(answered) == len(topics)
    assert found.unparsed == ["broken"] and found.run["broken"] == []
    assert not found.failures and found.crashes == 0
    for topic in topics[:-1]:
        ranking = [eq_id for eq_id, _ in found.run[topic.qid]]
        assert 0 < len(ranking) <= 5
        assert topic.qid not in ranking  # excluded, although it is its own best match
        scores = [score for _, score in found.run[topic.qid]]
        assert scores == sorted(scores, reverse=True)
    assert found.seconds > 0


def test_a_crash_costs_only_the_topic_being_searched(
    workdir: Path, topics: list[Topic], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_child = pya0_search._child
    calls: list[int] = []

    def crash_once(index_dir: Path, pending: list[Topic], **kwargs: Any) -> Any:
        calls.append(len(pending))
        rows, seconds, _ = real_child(index_dir, pending[:1], **kwargs)
        if len(calls) == 1:  # answered the first topic, then died on the second
            return rows, seconds, "pya0 child exited with -11: simulated segfault"
        return real_child(index_dir, pending, **kwargs)

    monkeypatch.setattr(pya0_search, "_child", crash_once)
    found = search_with_pya0(workdir, topics, k=5)
    assert calls == [len(topics), len(topics) - 2]
    assert found.crashes == 1
    lost = topics[1].qid
    assert found.run[lost] == [] and "simulated segfault" in found.failures[lost]
    assert set(found.run) == {t.qid for t in topics}
    assert found.run[topics[0].qid] and found.run[topics[2].qid]


def test_no_index_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(Pya0Error, match="no pya0 index"):
        search_with_pya0(tmp_path, [Topic("q", "x^2")])
