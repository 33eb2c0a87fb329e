"""Search across several vector fields against the real node: the 206 sample equations with
two real encoders' vectors (the shipped default graph CNN and its int8 variant), every mode,
server-side fusion equal to client-side fusion, and clear errors for fields the index lacks."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

from mathsearch.cli.main import main
from mathsearch.core.errors import QueryError
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import equation_actions
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.explain import cos01
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.query_encoder import ModelQueryEncoder
from mathsearch.opensearch.schema import VectorSpec
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.runtime.embedders import Embedder, load_embedder
from mathsearch.serve.http_api import create_app
from mathsearch.workers.embedding import vectors_of
from tests.conftest import DEFAULT_FIELD, DEFAULT_INT8_FIELD

from .conftest import drop_alias, new_alias
from .second_models import gcn_int8
from .test_fusion import _same_ranking

pytestmark = pytest.mark.services

FIELDS = (DEFAULT_FIELD, DEFAULT_INT8_FIELD)
QUERIES = (3, 120)


@pytest.fixture(scope="module")
def int8_path(tmp_path_factory: pytest.TempPathFactory, demo_parsed: list) -> Path:
    return gcn_int8(tmp_path_factory.mktemp("int8"), [p.graph for p in demo_parsed[:60]])


@pytest.fixture(scope="module")
def two_field_alias(
    client: OpenSearch,
    settings: OpenSearchSettings,
    encoder: Embedder,
    demo_parsed: list,
    demo_dicts: list,
    demo_vectors: list,
    int8_path: Path,
) -> Iterator[str]:
    """The sample equations with the default field and its int8 variant's (read-only)."""
    int8 = load_embedder(int8_path)
    alias = new_alias(settings)
    specs = [VectorSpec.from_card(encoder.card), VectorSpec.from_card(int8.card)]
    ensure_equation_index(client, alias, specs, settings)
    columns = {FIELDS[0]: demo_vectors, FIELDS[1]: vectors_of(int8, demo_parsed)}
    report = BulkWriter(client, settings, refresh="end").write(
        equation_actions(alias, demo_dicts, columns, refusals=[[] for _ in demo_dicts])
    )
    assert report.written == len(demo_dicts) and not report.failures
    yield alias
    drop_alias(client, alias)


@pytest.fixture(scope="module")
def searcher2(client: OpenSearch, two_field_alias: str, int8_path: Path) -> Searcher:
    return Searcher(
        client, two_field_alias, encoder=ModelQueryEncoder(encoders=["gcn", str(int8_path)])
    )


def _request(latex: str, **kw: Any) -> SearchRequest:
    return SearchRequest(latex, vector_fields=FIELDS, **kw)


@pytest.mark.parametrize(
    ("normalization", "combination"),
    [
        (Normalization.MIN_MAX, Combination.ARITHMETIC_MEAN),
        (Normalization.L2, Combination.HARMONIC_MEAN),
        (Normalization.MIN_MAX, Combination.GEOMETRIC_MEAN),
    ],
)
def test_two_field_fusion_server_equals_client(
    searcher2: Searcher, demo_parsed: list, normalization: Normalization, combination: Combination
) -> None:
    for number in QUERIES:
        latex = demo_parsed[number].record.latex
        for weights in (None, (0.2, 0.5, 0.3)):
            common = {"mode": Mode.FUSION, "k": 15, "depth": 30, "weights": weights,
                      "normalization": normalization, "combination": combination}  # fmt: skip
            server = searcher2.search(_request(latex, fusion_side="server", **common))
            client = searcher2.search(_request(latex, fusion_side="client", **common))
            assert server.fused == "server" and client.fused == "client"
            assert server.vector_fields == list(FIELDS) and len(server.hits) == 15
            _same_ranking(server.hits, client.hits)


def test_two_field_rrf_server_equals_client_and_explains_each_field(
    searcher2: Searcher, demo_parsed: list
) -> None:
    for number in QUERIES:
        latex = demo_parsed[number].record.latex
        common = {"mode": Mode.RRF, "k": 15, "depth": 30, "explain": True}
        server = searcher2.search(_request(latex, fusion_side="server", **common))
        client = searcher2.search(_request(latex, fusion_side="client", **common))
        _same_ranking(server.hits, client.hits)
        for hit in server.hits:
            parts = hit.explanation.fields
            assert [p.field for p in parts] == list(FIELDS)
            ranks = [hit.explanation.bm25_normalized, *(p.normalized for p in parts)]
            assert math.isclose(sum(r for r in ranks if r), hit.score, rel_tol=1e-5)


def test_fusion_explanation_adds_up_over_three_subqueries(
    searcher2: Searcher, demo_parsed: list
) -> None:
    latex = demo_parsed[40].record.latex
    response = searcher2.search(_request(latex, mode=Mode.FUSION, k=8, explain=True, alpha=0.6))
    assert response.hits[0].eq_id == demo_parsed[40].eq_id
    for hit in response.hits:
        e = hit.explanation
        weights = [p.weight for p in e.fields]
        assert weights == pytest.approx([0.3, 0.3]) and "weights 0.4, 0.3, 0.3" in e.formula
        parts = [(0.4, e.bm25_normalized)] + [(p.weight, p.normalized) for p in e.fields]
        assert math.isclose(sum(w * (n or 0.0) for w, n in parts), e.score, rel_tol=1e-5)


def test_knn_and_rescore_over_two_fields(searcher2: Searcher, demo_parsed: list) -> None:
    query = demo_parsed[120]
    knn = searcher2.search(_request(query.record.latex, mode=Mode.KNN, k=6, explain=True))
    assert len(knn.hits) == 6
    for hit in knn.hits:
        raw = [p.raw or 0.0 for p in hit.explanation.fields]
        assert math.isclose(0.5 * raw[0] + 0.5 * raw[1], hit.score, rel_tol=1e-4)
    rescore = searcher2.search(
        _request(query.record.latex, mode=Mode.RESCORE, k=6, explain=True, alpha=0.4)
    )
    assert query.eq_id in [hit.eq_id for hit in rescore.hits]
    for hit in rescore.hits:
        e = hit.explanation
        assert all(0.0 <= p.raw <= 1.0 for p in e.fields)  # (1 + cos) / 2 of each field
        # each normalised inside the window (window_rescore)
        expected = 0.6 * e.bm25_normalized + sum(0.2 * p.normalized for p in e.fields)
        assert math.isclose(expected, hit.score, rel_tol=1e-4)
    single = searcher2.search(SearchRequest(query.record.latex, mode=Mode.RESCORE, k=6,
                                            alpha=0.4, explain=True))  # fmt: skip
    e = single.hits[0].explanation
    assert len(e.fields) == 1
    expected = 0.6 * e.bm25_normalized + 0.4 * e.knn_normalized
    assert math.isclose(expected, single.hits[0].score, rel_tol=1e-4)
    both = searcher2.search(_request(query.record.latex, mode=Mode.KNN_RESCORE, k=6, explain=True))
    top = both.hits[0].explanation
    expected = 0.5 * top.bm25 + 0.25 * top.fields[0].raw + 0.25 * top.fields[1].raw
    assert math.isclose(expected, both.hits[0].score, rel_tol=1e-4)


def test_exact_rescore_matches_the_stored_vectors(
    searcher2: Searcher, client: OpenSearch, two_field_alias: str, demo_parsed: list
) -> None:
    query = demo_parsed[3]
    response = searcher2.search(_request(query.record.latex, mode=Mode.RESCORE, k=3, explain=True))
    features = searcher2.encoder.features(query.record.latex)
    stored = client.get(index=two_field_alias, id=response.hits[0].eq_id)["_source"]
    for part in response.hits[0].explanation.fields:
        assert part.raw == pytest.approx(cos01(features.vectors[part.field], stored[part.field]))


def test_unknown_fields_and_encoders_are_clear_query_errors(
    searcher2: Searcher, demo_parsed: list
) -> None:
    latex = demo_parsed[3].record.latex
    with pytest.raises(QueryError, match="has no vector field vec_nope_v1"):
        searcher2.search(
            SearchRequest(latex, mode=Mode.FUSION, vector_fields=(FIELDS[0], "vec_nope_v1"))
        )
    with pytest.raises(QueryError, match="does not exist"):
        searcher2.search(SearchRequest(latex, mode=Mode.KNN, encoders=("/nowhere/m.onnx",)))
    with pytest.raises(QueryError, match="2 weights for 3 subqueries"):
        searcher2.search(_request(latex, mode=Mode.FUSION, weights=(0.5, 0.5)))
    with pytest.raises(QueryError, match="sum to 1"):
        searcher2.search(_request(latex, mode=Mode.FUSION, weights=(0.5, 0.5, 0.5)))
    # BM25 needs no vector field at all
    assert searcher2.search(_request(latex, mode=Mode.BM25, k=3)).vector_field is None


def test_http_api_accepts_encoders_and_refuses_unknown_ones(
    settings: OpenSearchSettings, client: OpenSearch, two_field_alias: str, demo_parsed: list
) -> None:
    api = TestClient(create_app(replace(settings, serve_rate=0), two_field_alias, client=client))
    latex = demo_parsed[40].record.latex
    ok = api.post("/search", json={"latex": latex, "mode": "rrf", "k": 3, "encoders": ["gcn"]})
    assert ok.status_code == 200, ok.text
    assert ok.json()["vector_field"] == DEFAULT_FIELD
    assert ok.json()["hits"][0]["eq_id"] == demo_parsed[40].eq_id
    bad = api.post("/search", json={"latex": latex, "encoders": ["nope"]})
    assert bad.status_code == 422 and "unknown encoder 'nope'" in bad.json()["error"]["reason"]
    # a family whose model is not here, or whose field the index lacks: 422 with the reason
    missing = api.post("/search", json={"latex": latex, "encoders": ["gcn", "figure"]})
    assert missing.status_code == 422
    assert (
        "vec_figure_v2" in missing.json()["error"]["reason"]
        or "does not exist" in (missing.json()["error"]["reason"])
    )


def test_search_command_with_encoders(
    two_field_alias: str, int8_path: Path, demo_parsed: list, capsys: pytest.CaptureFixture[str]
) -> None:
    latex = demo_parsed[40].record.latex
    argv = ["search", latex, "--index", two_field_alias, "--mode", "fusion", "-k", "3",
            "--encoders", f"gcn,{int8_path}", "--weights", "0.5,0.25,0.25"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["vector_fields"] == list(FIELDS) and data["parameters"]["weights"] == [
        0.5,
        0.25,
        0.25,
    ]
    assert data["hits"][0]["eq_id"] == demo_parsed[40].eq_id
    assert main([*argv, "--explain"]) == 0
    assert DEFAULT_INT8_FIELD in capsys.readouterr().out
    assert main(["search", latex, "--index", two_field_alias, "--encoders", "gcn,nope"]) == 1
    assert "unknown encoder" in capsys.readouterr().err


def test_search_command_with_a_profile_that_names_encoders(
    two_field_alias: str,
    int8_path: Path,
    demo_parsed: list,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mathsearch.opensearch.search_profile import SearchProfile

    profile = SearchProfile(mode=Mode.RRF, encoders=("gcn", str(int8_path))).save(
        tmp_path / "two.json"
    )
    latex = demo_parsed[40].record.latex
    argv = ["search", latex, "--index", two_field_alias, "--profile", str(profile), "-k", "3"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "rrf" and data["vector_fields"] == list(FIELDS)
    assert data["hits"][0]["eq_id"] == demo_parsed[40].eq_id
    # a field named on the command line searches that field alone
    assert main([*argv, "--field", DEFAULT_FIELD, "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["vector_field"] == DEFAULT_FIELD and "vector_fields" not in one


def test_http_api_serves_a_profile_that_names_encoders(
    settings: OpenSearchSettings,
    client: OpenSearch,
    two_field_alias: str,
    int8_path: Path,
    demo_parsed: list,
) -> None:
    from mathsearch.opensearch.search_profile import SearchProfile

    profile = SearchProfile(mode=Mode.RRF, encoders=("gcn", str(int8_path)))
    app = create_app(
        replace(settings, serve_rate=0), two_field_alias, client=client, profile=profile
    )
    api = TestClient(app)
    latex = demo_parsed[40].record.latex
    both = api.post("/search", json={"latex": latex, "k": 3})
    assert both.status_code == 200, both.text
    assert both.json()["vector_fields"] == list(FIELDS)
    assert both.json()["hits"][0]["eq_id"] == demo_parsed[40].eq_id
    # a body naming its encoders, or one field, overrides the profile's
    one = api.post("/search", json={"latex": latex, "k": 3, "encoders": ["gcn"]})
    assert one.status_code == 200 and one.json()["vector_field"] == DEFAULT_FIELD
    assert not one.json()["vector_fields"]
