"""Dropping an equation index: what a plan names (pure) and the drop on the real node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.core.errors import MappingError
from mathsearch.indexer.records import Failure
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import failure_actions
from mathsearch.opensearch.index_drop import (
    NAME,
    DropPlan,
    DropReport,
    drop_index,
    plan_drop,
    versioned_pattern,
)
from mathsearch.opensearch.schema import ensure_failures_index, failures_index_name
from mathsearch.runtime.embedder_base import Embedder
from tests.workers.conftest import drop_failures

from .conftest import drop_alias, fill, new_alias


def test_a_plan_says_in_one_line_what_goes() -> None:
    plan = DropPlan("p", True, ["p-000001", "p-000002"], "p-template", "f", 3)
    assert plan.describe() == (
        "p: alias p, 2 versioned indexes (p-000001, p-000002), index template p-template, "
        "3 failure records in f"
    )
    assert plan.targets == ["p", "p-000001", "p-000002"] and not plan.empty
    assert DropPlan("p", failures_index="f").empty
    assert DropPlan("p", failures_index="f", failure_records=1).describe() == (
        "p: 1 failure record in f"
    )
    report = DropReport("p", ["p-000001"], None, 0)
    assert report.describe() == "p: 1 versioned index (p-000001) with the alias, 0 failure records"


def test_names_and_versions() -> None:
    assert versioned_pattern("p.q").fullmatch("p.q-000012")
    assert not versioned_pattern("p.q").fullmatch("pxq-000012")
    assert not versioned_pattern("p").fullmatch("p-other-000001")
    for bad in ("*", "papers*", "a,b", "_all", "-x", "Papers", ""):
        assert not NAME.fullmatch(bad), bad
    assert NAME.fullmatch("mathsearch-equations")


def _records(failures: str, target: str, *eq_ids: str) -> list[dict[str, Any]]:
    items = [Failure(e, e.split("#")[0], "convert", "unbalanced-braces") for e in eq_ids]
    return list(failure_actions(failures, items, target=target))


def _failure_ids(client: OpenSearch, failures: str, target: str) -> set[str]:
    client.indices.refresh(index=failures)
    body = {"query": {"term": {"index": target}}, "size": 100, "_source": ["eq_id"]}
    return {h["_source"]["eq_id"] for h in client.search(index=failures, body=body)["hits"]["hits"]}


@pytest.fixture
def two_indexes(
    client: OpenSearch,
    settings: OpenSearchSettings,
    encoder: Embedder,
    demo_dicts: list[dict[str, Any]],
    demo_vectors: list[list[float]],
) -> Iterator[tuple[str, str]]:
    """Two equation indexes with a few equations and failure records each; the first also has a
    second version (a rebuild's) and a record written against its versioned name."""
    alias, other = new_alias(settings), new_alias(settings)
    try:
        for name in (alias, other):
            fill(client, name, settings, encoder, demo_dicts[:4], demo_vectors[:4])
        client.indices.create(index=f"{alias}-000002")  # from the template: a rebuild's version
        failures = ensure_failures_index(client, settings)
        actions = _records(failures, alias, "a#1", "a#2") + _records(failures, other, "a#1")
        actions += _records(failures, f"{alias}-000001", "b#0")
        report = BulkWriter(client, settings, refresh="end").write(actions)
        assert report.written == 4 and not report.failures
        yield alias, other
    finally:
        for name in (alias, other):
            drop_alias(client, name)
            drop_failures(client, settings, name)
        drop_failures(client, settings, f"{alias}-000001")


@pytest.mark.services
def test_drop_removes_alias_versions_template_and_failure_records(
    client: OpenSearch, settings: OpenSearchSettings, two_indexes: tuple[str, str]
) -> None:
    alias, other = two_indexes
    failures = failures_index_name(settings)
    plan = plan_drop(client, alias, failures)
    assert plan.alias_exists and plan.template == f"{alias}-template"
    assert plan.indexes == [f"{alias}-000001", f"{alias}-000002"]
    assert plan.failure_records == 3
    assert client.indices.exists(index=alias)  # planning changed nothing

    report = drop_index(client, plan, settings)
    assert report.indexes == plan.indexes and report.failure_records == 3
    assert not client.indices.exists_alias(name=alias)
    assert not client.indices.exists(index=f"{alias}-000001,{alias}-000002")
    assert not client.indices.exists_index_template(name=f"{alias}-template")
    assert _failure_ids(client, failures, alias) == set()
    assert _failure_ids(client, failures, f"{alias}-000001") == set()
    # the other index keeps everything: its alias, template, equations and failure records
    assert client.indices.exists_alias(name=other)
    assert client.indices.exists_index_template(name=f"{other}-template")
    assert client.count(index=other)["count"] == 4
    assert _failure_ids(client, failures, other) == {"a#1"}
    # nothing is left to drop; dropping again finds nothing
    assert plan_drop(client, alias, failures).empty


@pytest.mark.services
def test_drop_refuses_what_is_not_an_equation_index(
    client: OpenSearch, settings: OpenSearchSettings
) -> None:
    failures = failures_index_name(settings)
    name = new_alias(settings)
    client.indices.create(index=f"{name}-000001", body={"aliases": {name: {}}})
    client.indices.create(index=f"{name}-plain")
    try:
        with pytest.raises(MappingError, match="not a mathsearch equation index"):
            plan_drop(client, name, failures)  # an alias over a library's own index
        with pytest.raises(MappingError, match="is an index, not"):
            plan_drop(client, f"{name}-plain", failures)
        with pytest.raises(MappingError, match="not an equation index name"):
            plan_drop(client, f"{name}*", failures)
        assert client.indices.exists(index=f"{name}-000001,{name}-plain")
    finally:
        client.indices.delete(index=f"{name}-000001,{name}-plain", ignore_unavailable=True)
