"""Another index with other field names (a figures-like index: caption + mentions and
vec_figure_v2) searched in the six modes by the same builders, hand-computed fusion of three
subqueries, and every shipped encoder family indexed and searched together."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.records import EquationRecord
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.fusion import fuse, rrf
from mathsearch.opensearch.modes.hybrid import hybrid_body
from mathsearch.opensearch.queries import Mode, VectorQuery, bm25_query
from mathsearch.opensearch.query_encoder import ModelQueryEncoder, QueryFeatures
from mathsearch.opensearch.search_fields import FIGURE_FIELDS
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.runtime.families import FAMILY_REGISTRY
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.workers.index_job import run_index
from tests.conftest import DEFAULT_DIM, DEFAULT_FIELD

from .second_models import shipped_families


def test_builders_use_the_index_fields() -> None:
    query = bm25_query(["gauge", "field"], "lattice", fields=FIGURE_FIELDS)
    matched = [next(iter(c["match"])) for c in query["bool"]["should"]]
    assert matched == ["caption", "mentions", "caption", "mentions"]
    vectors = [VectorQuery("vec_figure_v2", [1.0, 0.0])]
    body = hybrid_body(["x"], "", vectors, size=3, depth=5, filters=SearchRequest("x").filters,
                       source=(), fields=FIGURE_FIELDS)  # fmt: skip
    assert list(body["query"]["hybrid"]["queries"][1]["knn"]) == ["vec_figure_v2"]


def test_bm25_weighs_canonical_forms_on_the_equation_index() -> None:
    """Golden: structure tokens, the boosted canon_tokens match, and an equivalent-form bonus."""
    tokens = ["x|sup|2", "form:abc", "term:def"]
    query = bm25_query(tokens)
    assert query["bool"]["should"] == [
        {"match": {"math_tokens": {"query": "x|sup|2 form:abc term:def"}}},
        {"match": {"canon_tokens": {"query": "x|sup|2 form:abc term:def", "boost": 10.0}}},
        {"constant_score": {"filter": {"terms": {"canon_tokens": ["form:abc"]}}, "boost": 1000.0}},
    ]
    # no normal form in the query, or an index without the field: no bonus clause
    assert len(bm25_query(["x|sup|2"])["bool"]["should"]) == 2
    figures = bm25_query(tokens, fields=FIGURE_FIELDS)["bool"]["should"]
    assert all("match" in clause for clause in figures)


def test_fusion_of_three_subqueries_by_hand() -> None:
    bm25 = [("a", 10.0), ("b", 5.0), ("c", 0.0)]
    knn1 = [("b", 2.0), ("d", 1.0)]
    knn2 = [("d", 0.9), ("a", 0.5), ("b", 0.1)]
    fused = {h.doc_id: h for h in fuse([bm25, knn1, knn2], weights=[0.5, 0.25, 0.25])}
    # min_max per list: a 1, b 0.5, c 0.001 | b 1, d 0.001 | d 1, a 0.5, b 0.001
    assert fused["a"].score == pytest.approx(0.5 * 1 + 0.25 * 0.5, abs=1e-6)
    assert fused["b"].score == pytest.approx(0.5 * 0.5 + 0.25 * 1 + 0.25 * 0.001, abs=1e-6)
    assert fused["d"].score == pytest.approx(0.25 * 0.001 + 0.25 * 1, abs=1e-6)
    assert list(fused) == ["a", "b", "d"]  # cut to the longest list (3), as the plugin does
    assert fused["d"].raw == (None, 1.0, 0.9)
    assert fused["d"].normalized == (None, pytest.approx(0.001), 1.0)
    ranked = rrf([bm25, knn1, knn2], rank_constant=1)
    assert ranked[0].doc_id == "b" and ranked[0].score == pytest.approx(1 / 3 + 1 / 2 + 1 / 4)


class _FigureQueries:
    """Figure-like queries for the test index: the caption tokens and the gcn vector."""

    def __init__(self) -> None:
        self.inner = ModelQueryEncoder()

    def features(self, latex: str) -> QueryFeatures:
        found = self.inner.features(latex)
        return QueryFeatures(found.tokens, found.vector, "vec_figure_v2")


@pytest.fixture(scope="module")
def figure_alias(
    client: OpenSearch, settings: OpenSearchSettings, demo_dicts: list, demo_vectors: list
) -> Iterator[str]:
    """Sixty figure-like documents: caption = math tokens, mentions = context."""
    name = f"{settings.index_prefix}-test-fig-{uuid.uuid4().hex[:8]}"
    client.indices.create(index=name, body={
        "settings": {"index.knn": True, "number_of_replicas": 0, "number_of_shards": 1},
        "mappings": {"properties": {
            "fig_id": {"type": "keyword"}, "doc_id": {"type": "keyword"},
            "caption": {"type": "text", "analyzer": "whitespace"}, "mentions": {"type": "text"},
            "vec_figure_v2": {"type": "knn_vector", "dimension": DEFAULT_DIM, "method": {
                "name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}},
        }},
    })  # fmt: skip
    body: list[dict[str, Any]] = []
    for item, vector in list(zip(demo_dicts, demo_vectors, strict=True))[:60]:
        body.append({"index": {"_index": name, "_id": item["eq_id"]}})
        body.append({"fig_id": item["eq_id"], "doc_id": item["doc_id"],
                     "caption": " ".join(item["math_tokens"]), "mentions": item.get("context", ""),
                     "vec_figure_v2": vector})  # fmt: skip
    client.bulk(body=body, refresh=True)
    yield name
    client.indices.delete(index=name, ignore_unavailable=True)


@pytest.mark.services
@pytest.mark.parametrize("mode", list(Mode))
def test_figure_fields_in_every_mode(
    client: OpenSearch, figure_alias: str, demo_parsed: list, mode: Mode
) -> None:
    searcher = Searcher(client, figure_alias, encoder=_FigureQueries(), fields=FIGURE_FIELDS)
    target = demo_parsed[7]
    response = searcher.search(SearchRequest(target.record.latex, mode=mode, k=5, explain=True))
    assert response.hits and response.hits[0].eq_id == target.eq_id
    assert response.hits[0].latex == " ".join(target.math_tokens)  # the caption is shown
    if mode is not Mode.BM25:
        assert response.vector_field == "vec_figure_v2"


FAMILIES = {family: path for family, path in shipped_families().items() if family not in ("gcn",)}


@pytest.mark.services
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_shipped_family_indexes_and_searches_with_gcn(
    client: OpenSearch, settings: OpenSearchSettings, demo_parsed: list, family: str
) -> None:
    if family == "figure":
        pytest.skip("the figure family embeds figures: it has its own index, not equations")
    if FAMILIES[family] is None:
        pytest.skip(f"export/models/{family}-v*.onnx is not shipped yet")
    alias = f"{settings.index_prefix}-test-fam-{uuid.uuid4().hex[:8]}"
    # real hep-th equations (SymPy reads few of them: seq2seq refuses those) + plain algebra
    plain = [r"x^2 + 2 x + 1 = 0", r"\frac{a}{b} + c = d", r"a^2 + b^2 = c^2"]
    records = [p.record for p in demo_parsed[:40]] + [
        EquationRecord(eq_id=f"plain#{n}", doc_id="plain", position=n, latex=latex)
        for n, latex in enumerate(plain)
    ]
    try:
        report = run_index(records, alias, inline=True, progress=False, encoders=["gcn", family])
        assert report.complete and report.written == len(records)
        field = report.vector_fields[1]
        assert (
            field == f"vec_{family}_v{FAMILY_REGISTRY[family].default_version}"
        )  # the shipped default
        assert all(key.startswith(f"{field}:") for key in report.refusals)
        refused = sum(report.refusals.values())
        count = client.count(index=alias, body={"query": {"exists": {"field": field}}})["count"]
        assert count + refused == len(records) and count >= len(plain)
        body = {"query": {"exists": {"field": "embed_refusals"}}}
        assert client.count(index=alias, body=body)["count"] == refused
        searcher = Searcher(client, alias, encoder=ModelQueryEncoder(encoders=["gcn", family]))
        for mode in (Mode.FUSION, Mode.RRF):
            common = {"mode": mode, "k": 5, "depth": 20, "encoders": ("gcn", family)}
            server = searcher.search(SearchRequest(plain[0], fusion_side="server", **common))
            local = searcher.search(SearchRequest(plain[0], fusion_side="client", **common))
            assert server.vector_fields == [DEFAULT_FIELD, field]
            assert server.hits[0].eq_id == "plain#0"
            assert [h.score for h in server.hits] == pytest.approx([h.score for h in local.hits])
    finally:
        client.indices.delete(index=f"{alias}-0*", ignore_unavailable=True)
        client.indices.delete_index_template(name=f"{alias}-template", ignore=404)


def test_gcn_encoder_is_unchanged_by_the_several_encoder_path(demo_parsed: list) -> None:
    latex = demo_parsed[5].record.latex
    old = ModelQueryEncoder(GcnSession()).features(latex)
    new = ModelQueryEncoder(encoders=["gcn"]).features(latex)
    assert old.tokens == new.tokens and old.vector_field == new.vector_field == DEFAULT_FIELD
    assert old.vector == pytest.approx(new.vector, abs=1e-6)
