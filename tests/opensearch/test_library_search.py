"""Math search over a library's own enriched index: the query clause (golden, pure), the fusion
weights, and real searches of twelve hep-th papers enriched by an inline job."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from opensearchpy import OpenSearch

from mathsearch.cli.main import main
from mathsearch.core.errors import MappingError, QueryError
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.library_search import (
    _weights,
    describe_library,
    is_library_index,
    math_query,
    search_library,
)
from mathsearch.opensearch.query_encoder import ModelQueryEncoder, QueryFeatures

#: The paper the searches look for (BRST-anti-BRST Symmetric Conversion of Second-Class
#: Constraints) and its equation of the query: the longest of its first ten.
TARGET = "0301085"


def test_math_query_is_a_bool_of_the_bm25_match_and_the_knn_clause() -> None:
    features = QueryFeatures(["mi:E", "mo:=", "mi:m"], [0.25, -0.5, 1.0], "vec_gcn_v7")
    assert math_query(features=features, k=20, knn_boost=2.0) == {
        "bool": {
            "should": [
                {"match": {"math.tokens": {"query": "mi:E mo:= mi:m"}}},
                {"knn": {"math.vector": {"vector": [0.25, -0.5, 1.0], "k": 20, "boost": 2.0}}},
            ],
            "minimum_should_match": 1,
        }
    }
    bm25_only = math_query(features=features, vector=False, bm25_boost=0.5)
    assert bm25_only["bool"]["should"] == [
        {"match": {"math.tokens": {"query": "mi:E mo:= mi:m", "boost": 0.5}}}
    ]
    with pytest.raises(QueryError, match="no math tokens"):
        math_query(features=QueryFeatures([], None, None))
    with pytest.raises(QueryError, match="no vector"):
        math_query(features=QueryFeatures(["mi:x"], None, None, refusals={"f": "no vector"}))
    exact = math_query(features=features, exact=True)["bool"]["should"][1]["script_score"]
    assert exact["query"] == {"exists": {"field": "math.vector"}}
    assert exact["script"]["params"] == {
        "field": "math.vector", "query_value": [0.25, -0.5, 1.0], "space_type": "cosinesimil",
    }  # fmt: skip


def test_fusion_weights_give_the_text_its_share_and_keep_alpha_within_the_math() -> None:
    assert _weights("fusion", 0.4, 0.5, ["math_bm25", "math_knn"]) == [0.6, 0.4]
    assert _weights("fusion", 0.4, 0.5, ["math_bm25", "math_knn", "text"]) == [0.3, 0.2, 0.5]
    assert _weights("bm25", 0.4, 0.25, ["math_bm25", "text"]) == [0.75, 0.25]
    assert _weights("knn", 0.4, 0.5, ["math_knn"]) == [1.0]


def test_a_library_index_is_told_by_its_math_tokens() -> None:
    assert is_library_index({"title": {"type": "text"}, "math": {"properties": {"tokens": {}}}})
    assert not is_library_index({"math": {"properties": {"vector": {}}}})
    assert not is_library_index({"math_tokens": {"type": "text"}})


def _query(client: OpenSearch, alias: str) -> tuple[str, str]:
    """The target paper's query equation: ``(eq_id, LaTeX)``."""
    hits = client.search(
        index=alias,
        body={"size": 10, "query": {"term": {"doc_id": TARGET}}, "sort": [{"position": "asc"}]},
    )["hits"]["hits"]
    best = max(hits, key=lambda h: len(h["_source"]["latex"]))
    return best["_source"]["eq_id"], best["_source"]["latex"]


@pytest.mark.services
def test_the_paper_of_an_equation_comes_first_with_the_equations_that_matched(
    client: OpenSearch, library_index: tuple[str, str]
) -> None:
    library, alias = library_index
    described = describe_library(client, library)
    assert described.vector and described.equations_index == alias
    assert described.title_field == "title" and set(described.text_fields) == {"title", "body"}
    eq_id, latex = _query(client, alias)
    response = search_library(client, library, latex, k=5)
    top = response.hits[0]
    assert top.doc_id == TARGET and top.title.startswith("BRST-anti-BRST")
    assert top.scores["math_bm25"] is not None and top.scores["math_knn"] is not None
    assert eq_id in [equation.eq_id for equation in top.equations]  # the query's own equation
    assert all(e.eq_id.startswith(f"{TARGET}#") for e in top.equations)
    assert [h.rank for h in response.hits] == list(range(1, len(response.hits) + 1))
    assert response.model == described.model_field and not response.warnings
    # each list alone, and RRF, rank it first too; the text list joins as a third
    for mode in ("bm25", "knn", "rrf"):
        assert search_library(client, library, latex, mode=mode, k=3).hits[0].doc_id == TARGET
    texted = search_library(client, library, latex, text="constraints BRST", text_field="body")
    assert texted.hits[0].doc_id == TARGET and texted.hits[0].scores["text"] is not None
    with pytest.raises(QueryError, match="not rescore"):
        search_library(client, library, latex, mode="rescore")
    # two text fields (title, body) and none named: body
    assert search_library(client, library, latex, text="BRST").parameters["text_field"] == "body"
    with pytest.raises(QueryError, match="--text-field"):
        search_library(client, library, latex, text="BRST",
                       library=replace(described, text_fields=("title", "abstract")))  # fmt: skip


@pytest.mark.services
def test_math_query_in_a_plain_search_finds_the_same_first_document(
    client: OpenSearch, library_index: tuple[str, str]
) -> None:
    library, alias = library_index
    _, latex = _query(client, alias)
    library_info = describe_library(client, library)
    clause = math_query(latex, encoder=ModelQueryEncoder(), k=10, library=library_info)
    assert "script_score" in clause["bool"]["should"][1]  # no HNSW graph: exact scores
    hits = client.search(index=library, body={"size": 3, "query": clause})["hits"]["hits"]
    assert hits[0]["_id"] == search_library(client, library, latex).hits[0].doc_id == TARGET
    # beside the library's own text query, in its own bool
    mixed = {"bool": {"must": [{"match": {"body": "constraints"}}], "should": [clause]}}
    hits = client.search(index=library, body={"size": 3, "query": mixed})["hits"]["hits"]
    assert hits[0]["_id"] == TARGET


@pytest.mark.services
def test_the_search_command_ranks_a_library_index_by_its_math(
    client: OpenSearch, library_index: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    library, alias = library_index
    _, latex = _query(client, alias)
    assert main(["search", latex, "--index", library, "--json", "-k", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "library" and out["hits"][0]["doc_id"] == TARGET
    assert out["profile"] and out["model"] and out["equations_index"] == alias
    assert out["hits"][0]["equations"]
    assert main(["search", latex, "--index", library, "--text", "BRST", "--text-field",
                 "body"]) == 0  # fmt: skip
    first = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  1. "))
    assert TARGET in first and "BRST-anti-BRST" in first


@pytest.mark.services
def test_an_index_that_was_never_enriched_gets_the_command_that_enriches_it(
    client: OpenSearch, index_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    client.indices.create(index=index_name, body={"mappings": {"properties": {
        "body": {"type": "text"}}}})  # fmt: skip
    assert main(["search", "x^2", "--index", index_name]) == 1
    err = capsys.readouterr().err
    assert "enrich it first" in err and "--format opensearch" in err
    with pytest.raises(MappingError, match="enrich it first"):
        describe_library(client, index_name)


@pytest.mark.services
def test_post_search_names_a_served_library_index_and_refuses_any_other(
    client: OpenSearch, settings: OpenSearchSettings, library_index: tuple[str, str]
) -> None:
    from fastapi.testclient import TestClient

    from mathsearch.serve.http_api import create_app

    library, alias = library_index
    _, latex = _query(client, alias)
    served = replace(settings, serve_rate=0, serve_libraries=(library,))
    api = TestClient(create_app(served, alias, client=client))
    answer = api.post("/search", json={"latex": latex, "index": library, "k": 3})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["kind"] == "library" and data["hits"][0]["doc_id"] == TARGET
    assert data["hits"][0]["title"].startswith("BRST") and data["hits"][0]["equations"]
    texted = api.post("/search", json={"latex": latex, "index": library, "text": "BRST",
                                       "text_field": "body", "text_weight": 0.3})  # fmt: skip
    assert texted.json()["parameters"]["text_weight"] == 0.3
    assert texted.json()["hits"][0]["doc_id"] == TARGET
    refused = api.post("/search", json={"latex": latex, "index": f"{settings.index_prefix}-x"})
    assert refused.status_code == 422 and "is not served here" in refused.json()["error"]["reason"]
    assert api.get("/config").json()["libraries"] == [library]
    equations = api.post("/search", json={"latex": latex, "k": 3}).json()  # the equation index
    assert "kind" not in equations and equations["hits"][0]["doc_id"] == TARGET


@pytest.mark.services
def test_an_index_enriched_before_math_index_is_enriched_again_without_a_mapping_update(
    client: OpenSearch, settings: OpenSearchSettings
) -> None:
    """A library enriched by an older version (math.vector exact, no math.index): adding a field
    to it would fail its shards on k-NN 2.19, so the job leaves the mapping and the field out."""
    import uuid

    from mathsearch.indexer.opensearch_source import iter_opensearch_index
    from mathsearch.opensearch.enrichment import math_fields, math_mapping
    from mathsearch.opensearch.schema import VectorSpec
    from mathsearch.workers.index_job import run_index
    from tests.conftest import DEFAULT_CARD

    tag = uuid.uuid4().hex[:8]
    library = f"{settings.index_prefix}-test-oldlib-{tag}"
    alias = f"{settings.index_prefix}-test-oldlib-eq-{tag}"
    old = math_mapping(VectorSpec.from_card(DEFAULT_CARD), knn_index=False)
    old["properties"]["math"]["properties"].pop("index")
    old["properties"]["body"] = {"type": "text"}
    client.indices.create(index=library, body={"settings": {"number_of_replicas": 0},
                                               "mappings": old})  # fmt: skip
    try:
        body = r"We have \begin{equation} E = mc^2 + \frac{a}{b} \end{equation} here."
        client.index(index=library, id="p1", body={"body": body}, refresh=True)
        items = list(iter_opensearch_index(client, library, "body", mode="text"))
        report = run_index(items, alias, inline=True, enrich_index=library, rerank=(),
                           progress=False)  # fmt: skip
        assert report.complete and report.written == 1
        assert client.cluster.health(index=library)["status"] == "green"
        assert "index" not in math_fields(client, library)
        math = client.get(index=library, id="p1")["_source"]["math"]
        assert math["equation_count"] == 1 and "index" not in math and len(math["vector"]) > 0
        client.indices.refresh(index=library)
        response = search_library(client, library, "E = mc^2 + \\frac{a}{b}", k=1)
        assert response.hits[0].doc_id == "p1" and "math.index" in response.warnings[0]
    finally:
        client.indices.delete(index=library, ignore_unavailable=True)
        client.indices.delete(index=f"{alias}-0*", ignore_unavailable=True)
        client.indices.delete_index_template(name=f"{alias}-template", ignore=404)
