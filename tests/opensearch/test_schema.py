"""mathsearch.opensearch.schema: the equation mapping - what an equation costs on disk
(docs/opensearch.md, "What an equation costs on disk"). Pure checks of the mapping, and the
live index built by the real code on the real node."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest
from opensearchpy import OpenSearch

from mathsearch.core.errors import ConfigurationError
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
from mathsearch.opensearch.documents import equation_actions
from mathsearch.opensearch.queries import knn_score_script
from mathsearch.opensearch.schema import VectorSpec, equation_properties, resolve_alias
from mathsearch.runtime.embedders import Embedder
from tests.conftest import DEFAULT_FIELD, DEFAULT_SPACE
from tests.opensearch.conftest import fill


def test_no_field_is_stored_a_second_time_beside_the_source() -> None:
    # every field is in _source already; a stored copy (e.g. mathml's former "store": true)
    # costs ~270 B per equation on disk
    properties = equation_properties()
    assert [name for name, spec in properties.items() if spec.get("store")] == []
    assert properties["mathml"] == {"type": "text", "index": False}


def test_token_fields_index_frequencies_but_no_positions() -> None:
    # BM25 needs freqs and norms; nothing phrase-matches, the highlight is client-side
    properties = equation_properties()
    for name in ("math_tokens", "canon_tokens"):
        assert properties[name]["index_options"] == "freqs"
        assert properties[name].get("norms", True) is True


def test_vector_fields_keep_no_doc_values_copy() -> None:
    mapping = VectorSpec("vec_x_v1", 128, "innerproduct").mapping(OpenSearchSettings())
    assert mapping["doc_values"] is False and mapping["method"]["engine"] == "lucene"


@pytest.mark.parametrize(
    ("variable", "attribute", "default", "other", "bad"),
    [
        ("MATHSEARCH_INDEX_CODEC", "index_codec", "default", "best_compression", "zip"),
        ("MATHSEARCH_VECTOR_SOURCE", "vector_source", "derived", "stored", "both"),
    ],
)
def test_the_storage_settings_are_read_and_checked(
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    attribute: str,
    default: str,
    other: str,
    bad: str,
) -> None:
    monkeypatch.delenv(variable, raising=False)
    assert getattr(OpenSearchSettings.from_env(), attribute) == default
    monkeypatch.setenv(variable, other)
    assert getattr(OpenSearchSettings.from_env(), attribute) == other
    monkeypatch.setenv(variable, bad)
    with pytest.raises(ConfigurationError, match=f"{variable} must be one of"):
        OpenSearchSettings.from_env()


def _exact_top(client: OpenSearch, alias: str, vector: list[float], k: int) -> list[str]:
    body = {
        "size": k,
        "query": {
            "script_score": {
                "query": {"match_all": {}},
                "script": knn_score_script(DEFAULT_FIELD, vector, DEFAULT_SPACE),
            }
        },
    }
    return [h["_id"] for h in client.search(index=alias, body=body)["hits"]["hits"]]


@pytest.mark.services
@pytest.mark.parametrize("codec", ["default", "best_compression"])
def test_a_live_index_without_vector_doc_values_still_answers_knn_and_exact_scripts(
    client: OpenSearch,
    settings: OpenSearchSettings,
    encoder: Embedder,
    demo_dicts: list[dict[str, Any]],
    demo_vectors: list[list[float]],
    fresh_alias: str,
    codec: str,
) -> None:
    fill(
        client,
        fresh_alias,
        dataclasses.replace(settings, index_codec=codec),
        encoder,
        demo_dicts,
        demo_vectors,
    )
    index = resolve_alias(client, fresh_alias)
    field = client.indices.get_mapping(index=index)[index]["mappings"]["properties"][DEFAULT_FIELD]
    if ClusterCapabilities.of(client).major >= 3:
        # 3.x leaves it out of the mapping: false is its default for knn_vector there (a value
        # other than the default would be echoed)
        assert field.get("doc_values", False) is False
    else:
        assert field["doc_values"] is False  # 2.19 echoes the false it was given
    tokens = client.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert tokens["math_tokens"]["index_options"] == "freqs"
    bm25 = client.search(
        index=fresh_alias,
        body={
            "size": 1,
            "query": {"match": {"math_tokens": " ".join(demo_dicts[40]["math_tokens"])}},
        },
    )
    assert bm25["hits"]["hits"][0]["_id"] == demo_dicts[40]["eq_id"]
    index_settings = client.indices.get_settings(index=index)[index]["settings"]["index"]
    assert index_settings.get("codec", "default") == codec
    # the written vectors are 6-decimal numbers: their JSON is the short form
    hit = client.get(index=fresh_alias, id=demo_dicts[40]["eq_id"])["_source"]
    assert hit[DEFAULT_FIELD] == demo_vectors[40]
    assert len(json.dumps(hit[DEFAULT_FIELD])) < 12 * len(demo_vectors[40])
    # HNSW search and the exact knn_score script (reads the .vec file, not doc values) agree
    query = (np.asarray(demo_vectors[40]) + 0.001).tolist()
    knn = client.search(
        index=fresh_alias,
        body={"size": 5, "query": {"knn": {DEFAULT_FIELD: {"vector": query, "k": 5}}}},
    )
    knn_ids = [h["_id"] for h in knn["hits"]["hits"]]
    exact_ids = _exact_top(client, fresh_alias, query, 5)
    assert knn_ids[0] == exact_ids[0] == demo_dicts[40]["eq_id"]
    assert len(set(knn_ids) & set(exact_ids)) >= 4


def _store_bytes(client: OpenSearch, alias: str) -> int:
    index = resolve_alias(client, alias)
    client.indices.forcemerge(index=index, max_num_segments=1, request_timeout=120)
    client.indices.refresh(index=index)
    stats = client.indices.stats(index=index, metric="store")
    return int(stats["indices"][index]["primaries"]["store"]["size_in_bytes"])


@pytest.mark.services
def test_derived_vectors_are_not_stored_twice_and_survive_updates_and_rewrites(
    client: OpenSearch,
    settings: OpenSearchSettings,
    encoder: Embedder,
    demo_dicts: list[dict[str, Any]],
    demo_vectors: list[list[float]],
    fresh_alias: str,
) -> None:
    """``MATHSEARCH_VECTOR_SOURCE=derived`` (the default): the vectors live in the vector files
    only, yet every read, partial update and re-write sees them as written."""
    if not ClusterCapabilities.of(client).derived_vector_source:
        pytest.skip("this cluster's k-NN has no derived source")
    stored_alias = fresh_alias + "-stored"
    try:
        fill(client, fresh_alias, settings, encoder, demo_dicts, demo_vectors)
        stored = dataclasses.replace(settings, vector_source="stored")
        fill(client, stored_alias, stored, encoder, demo_dicts, demo_vectors)
        for alias, expected in ((fresh_alias, "true"), (stored_alias, "false")):
            index = resolve_alias(client, alias)
            live = client.indices.get_settings(index=index, flat_settings=True)[index]["settings"]
            assert live["index.knn.derived_source.enabled"] == expected
        # read back exactly as written (6 decimals survive float32)
        some = range(0, len(demo_dicts), 7)
        for row in some:
            hit = client.get(index=fresh_alias, id=demo_dicts[row]["eq_id"])["_source"]
            assert hit[DEFAULT_FIELD] == demo_vectors[row]
        # writing the same documents again changes nothing: idempotent writes hold
        spec = VectorSpec.from_card(encoder.card)
        again = BulkWriter(client, settings, refresh="end").write(
            equation_actions(fresh_alias, demo_dicts, {spec.field: demo_vectors})
        )
        assert again.noop == len(demo_dicts) and again.created == again.updated == 0
        # a partial update of another field rebuilds the document with its vector
        eq_id = demo_dicts[3]["eq_id"]
        client.update(index=fresh_alias, id=eq_id, body={"doc": {"section": "moved"}})
        client.indices.refresh(index=fresh_alias)
        hit = client.get(index=fresh_alias, id=eq_id)["_source"]
        assert hit["section"] == "moved" and hit[DEFAULT_FIELD] == demo_vectors[3]
        query = {"knn": {DEFAULT_FIELD: {"vector": hit[DEFAULT_FIELD], "k": 1}}}
        knn = client.search(index=fresh_alias, body={"size": 1, "query": query})
        assert knn["hits"]["hits"][0]["_id"] == eq_id
        # and the point of it: each equation's vector JSON is no longer in the stored fields
        saved = _store_bytes(client, stored_alias) - _store_bytes(client, fresh_alias)
        per_equation = saved / len(demo_dicts)
        assert per_equation > 0.25 * len(json.dumps(demo_vectors[0])), per_equation
    finally:
        from tests.opensearch.conftest import drop_alias

        drop_alias(client, stored_alias)
