"""Smoke tests against the real node: k-NN (lucene), BM25, hybrid + normalization, RRF.

Each test fails when a plugin is missing: the knn_vector type and the knn query come from
opensearch-knn, the hybrid query and both search-pipeline processors from neural-search.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from opensearchpy import OpenSearch, helpers

from mathsearch.stack import REQUIRED_PLUGINS, cluster_status
from mathsearch.stack.demo import demo_records

pytestmark = pytest.mark.services

DIM = 16


def _sample_equations(limit: int = 60) -> list[tuple[str, str, list[str]]]:
    kept, _ = demo_records()
    return [(p.eq_id, p.record.latex or "", p.math_tokens) for p in kept[:limit]]


@pytest.fixture
def equation_index(client: OpenSearch, index_name: str) -> tuple[str, list[dict]]:
    """An index of real equations with a lucene HNSW vector field and BM25 math tokens."""
    client.indices.create(
        index=index_name,
        body={
            "settings": {"index.knn": True, "number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {
                "properties": {
                    "eq_id": {"type": "keyword"},
                    "latex": {"type": "text", "index": False},
                    "math_tokens": {"type": "text", "analyzer": "whitespace"},
                    "vec": {
                        "type": "knn_vector",
                        "dimension": DIM,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                    },
                }
            },
        },
    )
    rng = np.random.default_rng(7)
    docs = []
    for eq_id, latex, tokens in _sample_equations():
        vec = rng.normal(size=DIM)
        docs.append(
            {
                "eq_id": eq_id,
                "latex": latex,
                "math_tokens": " ".join(tokens),
                "vec": (vec / np.linalg.norm(vec)).tolist(),
            }
        )
    ok, errors = helpers.bulk(
        client,
        ({"_index": index_name, "_id": d["eq_id"], "_source": d} for d in docs),
        refresh=True,
        raise_on_error=False,
    )
    assert errors == []
    assert ok == len(docs)
    return index_name, docs


@pytest.fixture
def pipeline(client: OpenSearch) -> Iterator[callable]:
    created = []

    def make(processor: dict) -> str:
        name = f"mathsearch-test-{uuid.uuid4().hex[:8]}"
        client.transport.perform_request(
            "PUT", f"/_search/pipeline/{name}", body={"phase_results_processors": [processor]}
        )
        created.append(name)
        return name

    yield make
    for name in created:
        client.transport.perform_request("DELETE", f"/_search/pipeline/{name}")


def test_required_plugins_are_installed(settings) -> None:
    status = cluster_status(settings)
    assert status["missing_plugins"] == []
    for name in REQUIRED_PLUGINS:
        assert name in status["plugins"]
        assert status["plugins"][name]["version"].startswith(status["opensearch_version"])


def test_knn_vector_field_uses_lucene_and_knn_finds_the_nearest(client, equation_index) -> None:
    index, docs = equation_index
    mapping = client.indices.get_mapping(index=index)[index]["mappings"]["properties"]["vec"]
    assert mapping["type"] == "knn_vector"
    assert mapping["method"]["engine"] == "lucene"
    target = docs[17]
    query = np.asarray(target["vec"]) + 0.01
    response = client.search(
        index=index, body={"size": 3, "query": {"knn": {"vec": {"vector": query.tolist(), "k": 3}}}}
    )
    hits = response["hits"]["hits"]
    assert hits[0]["_id"] == target["eq_id"]
    # lucene cosinesimil scores are (1 + cos) / 2: the nearest is almost 1
    assert hits[0]["_score"] > 0.99
    assert [h["_score"] for h in hits] == sorted((h["_score"] for h in hits), reverse=True)


def test_bm25_over_math_tokens_finds_the_equation(client, equation_index) -> None:
    index, docs = equation_index
    target = max(docs, key=lambda d: len(set(d["math_tokens"].split())))
    response = client.search(
        index=index,
        body={"size": 5, "query": {"match": {"math_tokens": target["math_tokens"]}}},
    )
    assert response["hits"]["hits"][0]["_id"] == target["eq_id"]
    assert response["hits"]["hits"][0]["_score"] > response["hits"]["hits"][1]["_score"]


def _hybrid_body(target: dict, k: int = 10) -> dict:
    return {
        "size": k,
        "query": {
            "hybrid": {
                "queries": [
                    {"match": {"math_tokens": target["math_tokens"]}},
                    {"knn": {"vec": {"vector": target["vec"], "k": k}}},
                ]
            }
        },
    }


def test_hybrid_query_through_normalization_pipeline(client, equation_index, pipeline) -> None:
    index, docs = equation_index
    name = pipeline(
        {
            "normalization-processor": {
                "normalization": {"technique": "min_max"},
                "combination": {
                    "technique": "arithmetic_mean",
                    "parameters": {"weights": [0.3, 0.7]},
                },
            }
        }
    )
    target = max(docs, key=lambda d: len(set(d["math_tokens"].split())))
    response = client.search(
        index=index, body=_hybrid_body(target), params={"search_pipeline": name}
    )
    hits = response["hits"]["hits"]
    # The target is first in both sub-queries: min-max maps it to 1 in each, so the mean is 1.
    assert hits[0]["_id"] == target["eq_id"]
    assert hits[0]["_score"] == pytest.approx(1.0, abs=1e-6)
    scores = [h["_score"] for h in hits]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert len(hits) > 1


def test_hybrid_query_through_rrf_pipeline(client, equation_index, pipeline) -> None:
    index, docs = equation_index
    name = pipeline(
        {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": 60}}}
    )
    target = max(docs, key=lambda d: len(set(d["math_tokens"].split())))
    response = client.search(
        index=index, body=_hybrid_body(target), params={"search_pipeline": name}
    )
    hits = response["hits"]["hits"]
    assert hits[0]["_id"] == target["eq_id"]
    # rank 1 in both sub-queries: 1/(60+1) + 1/(60+1)
    assert hits[0]["_score"] == pytest.approx(2 / 61, rel=1e-5)
    assert all(h["_score"] <= 2 / 61 + 1e-9 for h in hits)


def test_hybrid_query_without_a_pipeline_is_not_normalised(client, equation_index) -> None:
    """Guards the two tests above: without a processor the hybrid query returns neural-search's
    raw per-shard layout (negative delimiter scores), so normalised scores prove the pipeline ran.
    """
    index, docs = equation_index
    target = max(docs, key=lambda d: len(set(d["math_tokens"].split())))
    hits = client.search(index=index, body=_hybrid_body(target))["hits"]["hits"]
    assert any(h["_score"] < 0 for h in hits)
