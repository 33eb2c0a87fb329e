"""The bulk writer against the real node: idempotency, failures as data, real rejections."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.core.errors import WriteError
from mathsearch.indexer.records import Failure
from mathsearch.opensearch import OpenSearchSettings, connect
from mathsearch.opensearch.bulk_writer import BulkWriter, is_transient
from mathsearch.opensearch.documents import equation_actions, failure_actions
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index, resolve_alias
from mathsearch.runtime.embedders import Embedder

pytestmark = pytest.mark.services


def _snapshot(client: OpenSearch, alias: str) -> dict[str, tuple[Any, ...]]:
    """Every document's source, version, sequence number and primary term."""
    found = client.search(
        index=alias,
        body={
            "size": 1000,
            "version": True,
            "seq_no_primary_term": True,
            "query": {"match_all": {}},
        },
    )
    return {
        hit["_id"]: (hit["_source"], hit["_version"], hit["_seq_no"], hit["_primary_term"])
        for hit in found["hits"]["hits"]
    }


def _fast(settings: OpenSearchSettings, **changes: Any) -> OpenSearchSettings:
    return dataclasses.replace(
        settings, **{"bulk_backoff": 0.1, "bulk_max_backoff": 0.5, **changes}
    )


@dataclasses.dataclass
class Empty:
    """A new, empty equation index: its alias, concrete name and vector field."""

    alias: str
    concrete: str
    spec: VectorSpec


@pytest.fixture
def empty(
    client: OpenSearch, settings: OpenSearchSettings, fresh_alias: str, encoder: Embedder
) -> Empty:
    spec = VectorSpec.from_card(encoder.card)
    concrete = ensure_equation_index(client, fresh_alias, [spec], settings)
    return Empty(alias=fresh_alias, concrete=concrete, spec=spec)


@pytest.fixture
def blocked(client: OpenSearch, empty: Empty, no_disk_monitor: None) -> Iterator[Empty]:
    """The empty index under a read_only_allow_delete block: the node answers writes with 429."""
    client.indices.put_settings(
        index=empty.concrete, body={"index.blocks.read_only_allow_delete": True}
    )
    yield empty
    client.indices.put_settings(
        index=empty.concrete, body={"index.blocks.read_only_allow_delete": None}
    )


def test_transient_statuses() -> None:
    assert is_transient(429) and is_transient(503) and is_transient("N/A")
    assert not is_transient(400) and not is_transient(404) and not is_transient(409)


def test_rerunning_the_same_input_leaves_the_index_identical(
    client: OpenSearch,
    settings: OpenSearchSettings,
    empty: Empty,
    demo_dicts: list,
    demo_vectors: list,
) -> None:
    fresh_alias, spec = empty.alias, empty.spec
    # small chunks by count and by bytes: many bulk requests, same outcome
    writer = BulkWriter(client, _fast(settings, bulk_chunk_docs=37, bulk_chunk_bytes=64 * 1024))
    first = writer.write(equation_actions(fresh_alias, demo_dicts, {spec.field: demo_vectors}))
    assert first.created == len(demo_dicts) and not first.failures
    before = _snapshot(client, fresh_alias)
    assert len(before) == len(demo_dicts)
    assert ensure_equation_index(client, fresh_alias, [spec], settings) == resolve_alias(
        client, fresh_alias
    )
    second = writer.write(equation_actions(fresh_alias, demo_dicts, {spec.field: demo_vectors}))
    assert second.noop == len(demo_dicts) and second.created == second.updated == 0
    assert _snapshot(client, fresh_alias) == before
    sample = before[demo_dicts[0]["eq_id"]][0]
    assert sample["math_tokens"].split() == demo_dicts[0]["math_tokens"]
    assert len(sample[spec.field]) == spec.dimension and sample["model_versions"] == [spec.field]


def test_a_refused_item_is_a_failure_record_and_the_rest_is_written(
    client: OpenSearch,
    settings: OpenSearchSettings,
    empty: Empty,
    demo_dicts: list,
    demo_vectors: list,
) -> None:
    fresh_alias, spec = empty.alias, empty.spec
    vectors = [list(v) for v in demo_vectors[:20]]
    vectors[7] = vectors[7][:10]  # wrong dimension: the mapping refuses this one document
    report = BulkWriter(client, _fast(settings)).write(
        equation_actions(fresh_alias, demo_dicts[:20], {spec.field: vectors})
    )
    assert report.created == 19 and report.retries == 0
    assert [f.doc_id for f in report.failures] == [demo_dicts[7]["eq_id"]]
    assert report.failures[0].status == 400 and "dimension" in report.failures[0].reason
    assert client.count(index=fresh_alias)["count"] == 19


def test_a_real_429_is_retried_until_the_block_is_lifted(
    client: OpenSearch,
    settings: OpenSearchSettings,
    blocked: Empty,
    demo_dicts: list,
    demo_vectors: list,
) -> None:
    fresh_alias, spec, concrete = blocked.alias, blocked.spec, blocked.concrete
    sleeps: list[float] = []

    def lift() -> None:  # once the writer has been refused and has backed off twice
        deadline = time.monotonic() + 60
        while len(sleeps) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        client.indices.put_settings(
            index=concrete, body={"index.blocks.read_only_allow_delete": None}
        )

    lifter = threading.Thread(target=lift)
    lifter.start()
    writer = BulkWriter(
        client,
        _fast(settings, bulk_max_retries=30),
        sleep=lambda s: (sleeps.append(s), time.sleep(s)),
    )
    try:
        report = writer.write(
            equation_actions(fresh_alias, demo_dicts[:50], {spec.field: demo_vectors[:50]})
        )
    finally:
        lifter.join()
    assert sleeps and report.retries >= 50
    assert report.created == 50 and not report.failures
    assert client.count(index=fresh_alias)["count"] == 50


def test_a_write_still_refused_after_the_last_retry_raises(
    client: OpenSearch,
    settings: OpenSearchSettings,
    blocked: Empty,
    demo_dicts: list,
    demo_vectors: list,
) -> None:
    writer = BulkWriter(client, _fast(settings, bulk_max_retries=2, bulk_backoff=0.05))
    with pytest.raises(WriteError, match=r"after 2 retries .*429"):
        writer.write(
            equation_actions(blocked.alias, demo_dicts[:5], {blocked.spec.field: demo_vectors[:5]})
        )


def test_an_unreachable_cluster_is_retried_then_reported(
    settings: OpenSearchSettings, demo_dicts: list
) -> None:
    dead = dataclasses.replace(settings, url="http://127.0.0.1:9", bulk_max_retries=2)
    sleeps: list[float] = []
    writer = BulkWriter(connect(dead, max_retries=0, timeout=2), _fast(dead), sleep=sleeps.append)
    with pytest.raises(WriteError) as raised:
        writer.write(equation_actions("nowhere", demo_dicts[:3]))
    assert len(sleeps) == 2
    # one line naming the URL and the setting, the reason said once
    assert str(raised.value) == (
        "3 actions not written after 2 retries (first ids: 0301004#0, 0301004#1, 0301004#2): "
        "OpenSearch at http://127.0.0.1:9 does not answer (Connection refused): start it with "
        "`mathsearch stack up` or set MATHSEARCH_OPENSEARCH_URL"
    )


def test_failure_records_are_written_once_per_equation(
    client: OpenSearch, settings: OpenSearchSettings
) -> None:
    test_settings = dataclasses.replace(settings, index_prefix=f"{settings.index_prefix}-test-f")
    index = ensure_failures_index(client, test_settings)
    try:
        failures = [
            Failure(
                eq_id="d#1", doc_id="d", stage="convert", reason="unknown-macro", detail="\\foo"
            ),
            Failure(eq_id="d#2", doc_id="d", stage="graph", reason="too-large"),
        ]
        writer = BulkWriter(client, _fast(settings))
        assert writer.write(failure_actions(index, failures)).created == 2
        again = writer.write(failure_actions(index, failures))
        assert again.noop == 2
        stored = client.get(index=index, id="d#1")["_source"]
        assert stored["reason"] == "unknown-macro" and stored["stage"] == "convert"
        assert client.count(index=index)["count"] == 2
    finally:
        client.indices.delete(index=index, ignore_unavailable=True)
