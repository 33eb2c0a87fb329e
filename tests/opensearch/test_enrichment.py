"""Enrichment of an existing library index against the real node: math.* added, nothing else."""

from __future__ import annotations

import json
import urllib.request
from collections import OrderedDict
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.records import EquationRecord
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.enrichment import DocumentMath, math_mapping
from mathsearch.opensearch.schema import VectorSpec
from mathsearch.runtime.embedders import Embedder
from mathsearch.workers.enrich import enrich_index
from tests.conftest import DEFAULT_FIELD

pytestmark = pytest.mark.services


def _library_documents() -> list[dict[str, Any]]:
    """Documents as a library stores them: real hep-th equations in the body, varied metadata."""
    papers: dict[str, list[EquationRecord]] = {}
    for item in iter_hepth(bundled_sample_lines()):
        if isinstance(item, EquationRecord) and item.latex:
            papers.setdefault(item.doc_id, []).append(item)
    docs = []
    for number, (doc_id, records) in enumerate(list(papers.items())[:6]):
        body = "We study the model. " + " Hence ".join(
            f"\\begin{{equation}}{r.latex}\\end{{equation}}" for r in records[:8]
        )
        docs.append(
            {
                "_id": doc_id,
                "title": f"Caf\u00e9 th\u00e9orie \u2014 \u201cpaper\u201d {number} \U0001d4d7",
                "body": body,
                "year": 2003,
                "rating": 1.10 + number,
                "tiny": 1e-7,
                "big": 9007199254740993,
                "authors": [{"name": "A. N. Other", "orcid": None}, {"name": "\u00c9. Noether"}],
                "tags": ["hep-th", "strings"],
                "empty": {},
                "flag": number % 2 == 0,
                "missing": None,
            }
        )
    docs.append({"_id": "no-math", "title": "Errata", "body": "No equations here.", "year": 2004})
    return docs


def _raw_sources(settings: OpenSearchSettings, index: str) -> dict[str, OrderedDict]:
    """Each document's _source as stored, parsed in stored key order (raw HTTP, no client)."""
    url = f"{settings.urls[0]}/{index}/_search?size=100&version=true"
    with urllib.request.urlopen(url, timeout=30) as response:
        data = json.loads(response.read().decode("utf-8"), object_pairs_hook=OrderedDict)
    return {hit["_id"]: (hit["_source"], hit["_version"]) for hit in data["hits"]["hits"]}


def _canonical(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@pytest.fixture
def library_index(client: OpenSearch, index_name: str) -> str:
    docs = _library_documents()
    for doc in docs:
        body = {key: value for key, value in doc.items() if key != "_id"}
        client.index(index=index_name, id=doc["_id"], body=body)
    client.indices.refresh(index=index_name)
    return index_name


def test_enrichment_adds_math_and_leaves_every_existing_field_byte_for_byte(
    client: OpenSearch, settings: OpenSearchSettings, library_index: str, encoder: Embedder
) -> None:
    mapping_before = client.indices.get_mapping(index=library_index)[library_index]["mappings"]
    before = _raw_sources(settings, library_index)
    report = enrich_index(client, library_index, "body", mode="text", encoder=encoder)
    assert report.documents == 6 and report.equations >= 30 and not report.write_failures
    after = _raw_sources(settings, library_index)
    assert set(after) == set(before)
    for doc_id, (source, _) in before.items():
        new_source = after[doc_id][0]
        for key, value in source.items():
            # the same keys in the same order, each value serialised to the same bytes
            assert _canonical(new_source[key]) == _canonical(value), (doc_id, key)
        assert [k for k in new_source if k != "math"] == list(source)
    # the document without equations was not touched at all (same version)
    assert "math" not in after["no-math"][0] and after["no-math"][1] == before["no-math"][1]
    mapping_after = client.indices.get_mapping(index=library_index)[library_index]["mappings"]
    for name, field_mapping in mapping_before["properties"].items():
        assert mapping_after["properties"][name] == field_mapping
    math = after[next(iter(before))][0]["math"]
    assert math["equation_count"] == len(math["eq_ids"]) and math["equation_count"] > 0
    assert len(math["vector"]) == encoder.card.embedding_dim and math["model"] == DEFAULT_FIELD
    assert math["tokens"] and math["symbols"]
    # the new fields are searchable: BM25 on math.tokens, a keyword filter on math.symbols
    symbol = math["symbols"][0]
    found = client.search(
        index=library_index,
        body={"query": {"bool": {"must": {"match": {"math.tokens": math["tokens"].split()[0]}},
                                 "filter": {"term": {"math.symbols": symbol}}}}},
    )  # fmt: skip
    assert found["hits"]["total"]["value"] >= 1

    again = enrich_index(client, library_index, "body", mode="text", encoder=encoder)
    assert again.unchanged == again.documents == 6 and again.written == 0
    assert {k: v[1] for k, v in _raw_sources(settings, library_index).items()} == {
        k: v[1] for k, v in after.items()
    }


def test_math_mapping_uses_hnsw_only_where_the_index_allows_it() -> None:
    spec = VectorSpec("vec_gcn_v1", 64, "innerproduct")
    exact = math_mapping(spec, knn_index=False)["properties"]["math"]["properties"]["vector"]
    hnsw = math_mapping(spec, knn_index=True)["properties"]["math"]["properties"]["vector"]
    assert "method" not in exact and hnsw["method"]["engine"] == "lucene"


def test_document_vector_is_the_mean_of_its_equations() -> None:
    doc = DocumentMath(doc_id="d")
    doc.add({"eq_id": "d#0", "math_tokens": ["x"], "symbols": {"identifiers": ["x"]}}, [1.0, 0.0])
    doc.add({"eq_id": "d#1", "math_tokens": ["y"], "symbols": {"identifiers": ["y"]}}, [0.0, 1.0])
    math = doc.to_math("vec_gcn_v1")
    assert math["vector"] == [0.5, 0.5] and math["symbols"] == ["x", "y"]
    assert math["tokens"] == "x y" and math["equation_count"] == 2
