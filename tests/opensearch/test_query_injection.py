"""Crafted queries cannot change a search request's structure: user text only ever lands in leaf
values (``match`` queries, ``terms`` lists), never in keys, script source or query syntax.

Every mode's request bodies are captured (a recording client, the Searcher's own code path) for
a benign query and for crafted ones - the crafted text handed over as the query's *tokens* too,
the worst a featuriser could let through - and their shapes (key paths with leaf types) must be
identical. One service test sends crafted queries through ``POST /search`` to the real node."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.queries import Filters, Mode
from mathsearch.opensearch.query_encoder import QueryFeatures
from mathsearch.opensearch.searcher import Searcher, SearchRequest
from mathsearch.serve.http_api import create_app
from tests.conftest import DEFAULT_DIM, DEFAULT_FIELD

FIELD = DEFAULT_FIELD  # the field of the index the service test searches
BENIGN = "x ^ 2 + y ^ 2"
CRAFTED = [
    '"}},{"script":{"source":"System.exit(0)","lang":"painless"}},{"match_all":{',
    f"doc['{FIELD}'].value * 1000; return 1e9;",
    "* OR _id:*",
    'latex:* AND NOT doc_id:x~2 [* TO *] /.*/ +a -b && || ! ( ) { } [ ] ^ " ~ ? : \\ /',
    "\u0000\u0000 \\u0000",
    "x" * 5000,
    '{"$ref": "#/definitions/x"}',
    "\\frac{a}{b}}}}}} {{{{",
    "'; DROP TABLE equations; -- <script>alert(1)</script>",
    "params.query_value = [9]; ctx._source.latex = 'x'",
]


class _Recorder:
    """An OpenSearch client that records every request body and finds nothing."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.indices = self

    def get_mapping(self, index: str) -> dict[str, Any]:
        properties = {FIELD: {"type": "knn_vector"}, "math_tokens": {"type": "text"}}
        meta = {"default_vector_field": FIELD}
        return {f"{index}-000001": {"mappings": {"_meta": meta, "properties": properties}}}

    def search(self, *, index: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.bodies.append(body)
        return {"hits": {"hits": []}}

    def msearch(self, *, index: str, body: list[dict[str, Any]]) -> dict[str, Any]:
        self.bodies.append(body)
        return {"responses": [{"hits": {"hits": []}} for _ in body[::2]]}

    def mget(self, *, index: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.bodies.append(body)
        return {"docs": []}

    def termvectors(self, *, index: str, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return {"term_vectors": {}}

    def info(self) -> dict[str, Any]:
        return {"version": {"number": "2.19.1"}}


class _Encoder:
    """Features whose tokens are the raw query text (no featuriser cleaning it up)."""

    def features(self, latex: str) -> QueryFeatures:
        return QueryFeatures(
            tokens=latex.split(" "), vector=[0.1] * DEFAULT_DIM, vector_field=FIELD
        )


def _bodies(latex: str, **options: Any) -> list[Any]:
    recorder = _Recorder()
    searcher = Searcher(recorder, "eq", encoder=_Encoder())  # type: ignore[arg-type]
    crafted = latex.split(" ", maxsplit=1)[0]
    filters = Filters(doc_ids=(crafted,), terms={"symbols": (crafted,)}, ranges={})
    searcher.search(SearchRequest(latex, text=latex, k=5, filters=filters, **options))
    return recorder.bodies


def _shape(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """(key path, leaf type) of every leaf; list positions collapse to ``[]``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _shape(value, (*path, str(key)))
    elif isinstance(node, list):
        for value in node:
            yield from _shape(value, (*path, "[]"))
    else:
        yield path, type(node).__name__


def _leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, str(key)))
    elif isinstance(node, list):
        for value in node:
            yield from _leaves(value, (*path, "[]"))
    else:
        yield path, node


def _user_value_path(path: tuple[str, ...]) -> bool:
    """Where user text may go: a match query's text, a terms list, a term vector's doc."""
    return (
        ("match" in path and path[-1] == "query")
        or ("terms" in path and path[-1] == "[]")
        or path[:1] == ("doc",)
    )


OPTIONS = [
    {"mode": Mode.BM25},
    {"mode": Mode.KNN},
    {"mode": Mode.RESCORE},
    {"mode": Mode.KNN_RESCORE},
    {"mode": Mode.FUSION, "fusion_side": "server"},
    {"mode": Mode.FUSION, "fusion_side": "client"},
    {"mode": Mode.RRF, "fusion_side": "server"},
    {"mode": Mode.RRF, "fusion_side": "client"},
    {"mode": Mode.RESCORE, "explain": True},
    {"mode": Mode.BM25, "max_df": 0.5},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(str(v) for v in o.values()))
@pytest.mark.parametrize("crafted", CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_text_keeps_the_request_shape_and_stays_in_values(
    options: dict[str, Any], crafted: str
) -> None:
    benign = _bodies(BENIGN, **options)
    attacked = _bodies(crafted, **options)
    assert len(attacked) == len(benign)
    for safe, body in zip(benign, attacked, strict=True):
        assert set(_shape(body)) == set(_shape(safe))
        first = crafted.split(" ", maxsplit=1)[0]  # also the filters' value
        for path, value in _leaves(body):
            assert not any(crafted[:20] in key or first in key for key in path)
            if isinstance(value, str) and (crafted in value or first in value):
                assert _user_value_path(path), (path, value)
            if path[-1] == "source" and "script" in " ".join(path):
                assert value == "knn_score"  # scripts are constants; the vector goes in params


@pytest.fixture(scope="module")
def api(settings: OpenSearchSettings, client: OpenSearch, equation_alias: str) -> TestClient:
    return TestClient(create_app(replace(settings, serve_rate=0), equation_alias, client=client))


@pytest.mark.services
@pytest.mark.parametrize("mode", ["bm25", "rescore", "rrf"])
def test_crafted_queries_through_the_api_are_plain_searches(
    api: TestClient, client: OpenSearch, equation_alias: str, mode: str
) -> None:
    found = client.search(index=equation_alias, body={"size": 1, "sort": [{"eq_id": "asc"}]})
    doc_id = found["hits"]["hits"][0]["_source"]["doc_id"]
    for crafted in CRAFTED[:5] + CRAFTED[6:]:
        body = {"latex": f"x^2 {crafted}", "text": crafted, "mode": mode, "k": 20}
        body["filters"] = {"doc_ids": [doc_id]}
        response = api.post("/search", json=body)
        assert response.status_code in (200, 422), response.text
        if response.status_code == 422:
            reason = response.json()["error"]["reason"]
            assert "script" not in reason and "OpenSearch refused" not in reason, reason
            continue
        # "* OR _id:*" and friends match nothing outside the filter: only that paper's equations
        assert {hit["doc_id"] for hit in response.json()["hits"]} <= {doc_id}
