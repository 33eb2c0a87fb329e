"""Relevance sets from real data: same-paper relevance on hep-th, class relevance on SemVec."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import pytest

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.relevance_sets import (
    CollectionEquation,
    RelevanceSet,
    build_equivalence,
    build_same_document,
)
from mathsearch.indexer.semvec import read_semvec, validation_sets

SAMPLE = Path(str(resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt")))
SEMVEC = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "semvec"


def check_consistent(data: RelevanceSet) -> None:
    """Invariants of every relevance set."""
    doc_of = {e.eq_id: e.doc_id for e in data.collection}
    assert len(doc_of) == len(data.collection)  # ids are unique
    assert len({t.qid for t in data.topics}) == len(data.topics)
    assert set(data.qrels) == {t.qid for t in data.topics}
    for topic in data.topics:
        assert topic.exclude == (topic.qid,)  # the query's own equation is never ranked
        assert topic.qid in doc_of
        relevant = data.qrels[topic.qid]
        assert topic.qid not in relevant
        assert relevant and set(relevant.values()) == {1}
        assert all(doc_of[eq_id] == doc_of[topic.qid] for eq_id in relevant)
        siblings = {e for e, d in doc_of.items() if d == doc_of[topic.qid]} - {topic.qid}
        assert set(relevant) == siblings  # every other equation of the paper / class
        assert data.groups[topic.qid] == doc_of[topic.qid]


def test_same_document_on_real_papers() -> None:
    data = build_same_document([SAMPLE], papers=5, topics=12, seed=3)
    check_consistent(data)
    papers = {e.doc_id for e in data.collection}
    assert len(papers) == 5 and data.info["papers"] == 5
    assert data.info["papers_available"] == 8
    assert data.info["equations"] == len(data.collection) > 40
    assert len(data.topics) == 12
    # round-robin: 12 topics over 5 papers take 2 or 3 from each
    per_paper = Counter(data.groups.values())
    assert set(per_paper) == papers and set(per_paper.values()) <= {2, 3}
    latex = {e.eq_id: e.latex for e in data.collection}
    assert all(t.latex == latex[t.qid] and t.latex for t in data.topics)


def test_same_document_is_deterministic_given_the_seed() -> None:
    one = build_same_document([SAMPLE], papers=4, topics=10, seed=7)
    two = build_same_document([SAMPLE], papers=4, topics=10, seed=7)
    other = build_same_document([SAMPLE], papers=4, topics=10, seed=8)
    assert (one.collection, one.topics, one.qrels) == (two.collection, two.topics, two.qrels)
    assert [t.qid for t in one.topics] != [t.qid for t in other.topics]


def test_unparseable_equations_leave_the_collection_and_topics() -> None:
    """Only one equation of paper 0301020 'parses': it is in the collection, never a topic."""
    refused: set[str] = set()

    def parseable(items: Sequence[CollectionEquation]) -> set[str]:
        ids = {e.eq_id for e in items}
        lonely = sorted(e.eq_id for e in items if e.doc_id == "0301020")
        refused.update(lonely[1:])
        return ids - refused

    data = build_same_document([SAMPLE], papers=8, topics=300, seed=0, parseable=parseable)
    check_consistent(data)
    ids = {e.eq_id for e in data.collection}
    assert refused and not refused & ids
    assert data.info["not_parseable"] == len(refused)
    assert "0301020" not in set(data.groups.values())  # one parseable equation: no topic
    assert data.info["papers_with_topics"] == 7
    assert len(data.topics) == len(ids) - 1  # every other equation became a topic
    assert not any(refused & set(rels) for rels in data.qrels.values())


def test_same_document_refuses_bad_sizes() -> None:
    with pytest.raises(EvaluationError, match="must be >= 1"):
        build_same_document([SAMPLE], papers=0, topics=5)


def test_equivalence_on_real_semvec_classes() -> None:
    files = validation_sets(SEMVEC)
    data = build_equivalence(files, topics_per_set=3, seed=1)
    check_consistent(data)
    members = [m for path in files for c in read_semvec(path) for m in c.members]
    assert [e.eq_id for e in data.collection] == [m.eq_id for m in members]  # every member
    assert data.info["topics_per_set"] == {"boolean5": 3, "oneVarPoly10": 3}
    # the single-member class of oneVarPoly10 ('-2*a**2 + 2*a') is never a topic
    assert "oneVarPoly10-c2" not in set(data.groups.values())
    biggest = max(data.qrels.values(), key=len)
    assert len(biggest) <= 18


def test_equivalence_picks_sets_and_refuses_unknown_ones() -> None:
    data = build_equivalence(validation_sets(SEMVEC), sets=["boolean5"], topics_per_set=50)
    check_consistent(data)
    assert {e.doc_id.split("-")[0] for e in data.collection} == {"boolean5"}
    assert len(data.topics) == 11  # every member of the four classes (all have >= 2)
    with pytest.raises(EvaluationError, match="unknown SemVec set"):
        build_equivalence(validation_sets(SEMVEC), sets=["boolean99"], topics_per_set=1)


def test_same_document_draws_only_the_allowed_papers() -> None:
    allowed = {"0301004", "0301012", "0301017", "not-a-paper"}
    data = build_same_document([SAMPLE], papers=10, topics=9, seed=2, only_papers=allowed)
    check_consistent(data)
    assert {e.doc_id for e in data.collection} == allowed - {"not-a-paper"}
    assert data.info["papers_available"] == 3 and data.info["papers_restricted_to"] == 4
    assert Counter(data.groups.values()) == {"0301004": 3, "0301012": 3, "0301017": 3}
