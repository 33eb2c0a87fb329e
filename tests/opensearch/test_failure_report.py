"""The failure records of an equation index, counted and listed, on a real node."""

from __future__ import annotations

import uuid

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.records import Failure
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import failure_actions, failure_id
from mathsearch.opensearch.failure_report import failure_query, failure_summary
from mathsearch.opensearch.schema import ensure_failures_index


def test_the_query_filters_on_the_index_and_every_given_field() -> None:
    query = failure_query("eq", stage="convert", doc_id="d")
    assert query["bool"]["filter"] == [
        {"term": {"index": "eq"}},
        {"term": {"stage": "convert"}},
        {"term": {"doc_id": "d"}},
    ]


@pytest.fixture
def records(client: OpenSearch, settings: OpenSearchSettings):
    alias = f"{settings.index_prefix}-test-failreport-{uuid.uuid4().hex[:8]}"
    other = f"{alias}-other"
    failures = ensure_failures_index(client, settings)
    mine = [
        Failure("a#1", "a", "convert", "unbalanced-braces", "missing '}'", "a.tex", r"\frac{a}{"),
        Failure("a#4", "a", "convert", "unbalanced-braces", "missing '}'", "a.tex", r"x^{"),
        Failure("b#0", "b", "convert", "unknown-environment", "{foo}", "b.tex", "x"),
        Failure("b#*", "b", "extract", "unreadable-source", "bad bytes", "b.tex"),
    ]
    theirs = [Failure("c#0", "c", "embed", "invalid-graph", "", "c.tex")]
    writer = BulkWriter(client, settings, refresh="true")
    writer.write(failure_actions(failures, mine, target=alias))
    writer.write(failure_actions(failures, theirs, target=other))
    yield alias, failures
    for target, group in ((alias, mine), (other, theirs)):
        for record in group:
            client.delete(index=failures, id=failure_id(target, record.eq_id), ignore=404)


@pytest.mark.services
def test_counts_by_stage_and_reason_and_lists_the_records(client, records) -> None:
    alias, failures = records
    summary = failure_summary(client, failures, alias, limit=3)
    assert summary.total == 4  # the other index's record is not counted
    assert summary.by_stage == {
        "convert": {"unbalanced-braces": 2, "unknown-environment": 1},
        "extract": {"unreadable-source": 1},
    }
    assert len(summary.records) == 3
    assert {r["eq_id"] for r in summary.records} <= {"a#1", "a#4", "b#0", "b#*"}
    narrow = failure_summary(client, failures, alias, reason="unbalanced-braces", doc_id="a")
    assert narrow.total == 2 and {r["excerpt"] for r in narrow.records} == {r"\frac{a}{", "x^{"}
    counted = failure_summary(client, failures, alias, stage="extract", limit=0)
    assert counted.total == 1 and counted.records == []
    missing = failure_summary(client, f"{failures}-missing-{uuid.uuid4().hex[:6]}", alias)
    assert missing.total == 0 and missing.by_stage == {}
