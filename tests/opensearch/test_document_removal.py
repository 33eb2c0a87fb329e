"""Removing documents' equations: which ids go (pure) and the deletions on a real node."""

from __future__ import annotations

import uuid

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.records import EquationRecord, Failure, make_eq_id
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.document_removal import ProducedIds, remove_equations, stale_hits
from mathsearch.opensearch.documents import failure_actions, failure_id
from mathsearch.opensearch.schema import ensure_failures_index


def _record(doc: str, position: int) -> EquationRecord:
    return EquationRecord(make_eq_id(doc, position), doc, position, latex="x")


def test_produced_ids_keep_documents_read_and_mark_the_unreadable() -> None:
    produced = ProducedIds()
    for item in [
        _record("a", 0),
        Failure(make_eq_id("a", 1), "a", "extract", "too-large"),
        Failure(make_eq_id("b", "*"), "b", "extract", "unreadable-source"),
        # a document-level failure beside equations: the document was read
        Failure(make_eq_id("c", "*"), "c", "extract", "too-many-expansions"),
        _record("c", 3),
        Failure("missing.tex", "", "extract", "missing-source"),  # no document
        {"eq_id": "d#0", "doc_id": "d"},  # a record as the workers pass it
    ]:
        produced.add(item)
    assert produced.documents == ["a", "c", "d"]
    assert produced.ids["a"] == {"a#0", "a#1"} and produced.ids["c"] == {"c#3"}
    assert produced.unreadable == {"b"}


def test_stale_hits_are_the_ids_not_kept_for_their_document() -> None:
    hits = [
        {"_index": "i-1", "_id": f"{d}#{p}", "_source": {"doc_id": d, "eq_id": f"{d}#{p}"}}
        for d, p in [("a", 0), ("a", 1), ("a", 2), ("b", 0)]
    ]
    assert [h[1] for h in stale_hits(hits, {"a": {"a#0", "a#2"}, "b": {"b#0"}})] == ["a#1"]
    assert [h[1] for h in stale_hits(hits, {"a": {"a#0"}})] == ["a#1", "a#2", "b#0"]
    assert len(list(stale_hits(hits, None))) == 4  # no keep: everything of the documents
    # failure records: the equation id is the source's eq_id, not the record's own id
    record = {"_index": "f", "_id": "alias/a#1", "_source": {"doc_id": "a", "eq_id": "a#1"}}
    assert list(stale_hits([record], {"a": {"a#0"}})) == [("f", "alias/a#1", "a#1")]
    assert list(stale_hits([record], {"a": {"a#1"}})) == []


@pytest.fixture
def equations(client: OpenSearch, settings: OpenSearchSettings):
    """An index behind an alias with docs a (4 equations), b (2) and c (1); its failures."""
    alias = f"{settings.index_prefix}-test-removal-{uuid.uuid4().hex[:8]}"
    other = f"{alias}-other"
    concrete = f"{alias}-000001"
    client.indices.create(
        index=concrete,
        body={
            "mappings": {
                "properties": {"doc_id": {"type": "keyword"}, "eq_id": {"type": "keyword"}}
            },
            "aliases": {alias: {}},
        },
    )
    body = []
    for doc, n in [("a", 4), ("b", 2), ("c", 1)]:
        for position in range(n):
            eq_id = make_eq_id(doc, position)
            body += [{"index": {"_index": concrete, "_id": eq_id}}, {"doc_id": doc, "eq_id": eq_id}]
    client.bulk(body=body, refresh=True)
    failures = ensure_failures_index(client, settings)
    records = [Failure("a#9", "a", "convert", "old"), Failure("b#5", "b", "parse", "old")]
    actions = [
        *failure_actions(failures, records, target=alias),
        *failure_actions(failures, records, target=other),  # another index, same documents
    ]
    BulkWriter(client, settings, refresh="true").write(actions)
    yield alias, other, failures
    client.indices.delete(index=concrete, ignore_unavailable=True)
    for target in (alias, other):
        for record in records:
            client.delete(index=failures, id=failure_id(target, record.eq_id), ignore=404)


def _ids(client: OpenSearch, index: str) -> set[str]:
    answer = client.search(index=index, body={"query": {"match_all": {}}, "size": 100})
    return {hit["_id"] for hit in answer["hits"]["hits"]}


@pytest.mark.services
def test_pruning_removes_only_what_the_documents_no_longer_have(client, settings, equations):
    alias, other, failures = equations
    keep = {"a": {"a#0", "a#1"}, "b": {"b#0", "b#1", "b#5"}}
    report = remove_equations(client, alias, failures, ["a", "b"], keep=keep, settings=settings)
    assert (report.documents, report.equations, report.failure_records) == (2, 2, 1)
    assert sorted(report.removed_ids) == ["a#2", "a#3"]
    assert _ids(client, alias) == {"a#0", "a#1", "b#0", "b#1", "c#0"}
    # a's old failure record goes, b's is still produced; the other index's records stay
    assert not client.exists(index=failures, id=failure_id(alias, "a#9"))
    assert client.exists(index=failures, id=failure_id(alias, "b#5"))
    assert client.exists(index=failures, id=failure_id(other, "a#9"))
    # idempotent: a second run finds nothing more
    again = remove_equations(client, alias, failures, ["a", "b"], keep=keep, settings=settings)
    assert (again.equations, again.failure_records) == (0, 0)


@pytest.mark.services
def test_deleting_documents_removes_all_their_equations_and_records(client, settings, equations):
    alias, other, failures = equations
    report = remove_equations(client, alias, failures, ["b", "c", "unknown"], settings=settings)
    assert (report.documents, report.equations, report.failure_records) == (3, 3, 1)
    assert _ids(client, alias) == {"a#0", "a#1", "a#2", "a#3"}
    assert client.exists(index=failures, id=failure_id(other, "b#5"))
    assert remove_equations(client, alias, None, [], settings=settings).equations == 0


@pytest.mark.services
def test_a_missing_index_removes_nothing(client, settings) -> None:
    missing = f"{settings.index_prefix}-test-removal-missing-{uuid.uuid4().hex[:8]}"
    report = remove_equations(client, missing, None, ["a"], settings=settings)
    assert (report.equations, report.failure_records) == (0, 0)
