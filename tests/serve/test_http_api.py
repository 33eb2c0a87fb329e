"""``mathsearch serve``'s API against the real node (the 206 sample equations), in-process ASGI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.client import connect
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.serve.http_api import create_app
from tests.conftest import DEFAULT_FIELD


@pytest.fixture(scope="module")
def api(settings: OpenSearchSettings, client: OpenSearch, equation_alias: str) -> TestClient:
    app = create_app(replace(settings, serve_rate=0), equation_alias, client=client)
    return TestClient(app)


@pytest.fixture(scope="module")
def indexed(client: OpenSearch, equation_alias: str) -> dict[str, Any]:
    """A real equation of the index (one with some structure)."""
    found = client.search(
        index=equation_alias,
        body={"size": 50, "sort": [{"eq_id": "asc"}], "_source": ["eq_id", "doc_id", "latex"]},
    )
    sources = [hit["_source"] for hit in found["hits"]["hits"]]
    return next(s for s in sources if 20 <= len(s["latex"]) <= 120)


def _post(api: TestClient, path: str, body: dict[str, Any]) -> Any:
    return api.post(path, json=body)


@pytest.mark.services
def test_search_finds_the_indexed_equation_with_mathml_groups_and_breakdown(
    api: TestClient, indexed: dict[str, Any]
) -> None:
    body = {"latex": indexed["latex"], "mode": "bm25", "k": 5, "mathml": True}
    response = _post(api, "/search", body)
    assert response.status_code == 200, response.text
    top = response.json()["hits"][0]
    assert top["eq_id"] == indexed["eq_id"]
    # LaTeX input: the index keeps no MathML; the search renders what the indexer parsed
    parsed = Featuriser().parse_latex(indexed["latex"])
    assert isinstance(parsed, ParsedEquation) and top["mathml"] == parsed.mathml
    # the MathML comes only when asked: the stored field is the bulk of a hit
    plain = _post(api, "/search", {**body, "mathml": False}).json()["hits"][0]
    assert plain["eq_id"] == indexed["eq_id"] and not plain.get("mathml")
    knn = _post(api, "/search", {"latex": indexed["latex"], "mode": "knn", "explain": True})
    top = knn.json()["hits"][0]
    assert top["explanation"]["knn"] == pytest.approx(top["score"], rel=1e-4)
    grouped = _post(
        api, "/search", {"latex": indexed["latex"], "k": 3, "group": True, "explain": True}
    ).json()
    assert grouped["mode"] == "fusion"  # the default profile's mode
    assert grouped["groups"][0]["doc_id"] == indexed["doc_id"]
    assert len(grouped["groups"]) <= 3
    assert "bm25" in grouped["groups"][0]["hits"][0]["explanation"]["formula"]


@pytest.mark.services
def test_profile_supplies_defaults_and_the_body_overrides_them(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str, indexed: dict
) -> None:
    profile = SearchProfile(mode=Mode.BM25, k=4)
    api = TestClient(create_app(settings, equation_alias, client=client, profile=profile))
    data = api.post("/search", json={"latex": indexed["latex"]}).json()
    assert (data["mode"], data["k"], len(data["hits"])) == ("bm25", 4, 4)
    assert data["vector_field"] is None
    data = api.post("/search", json={"latex": indexed["latex"], "mode": "rrf", "k": 2}).json()
    assert (data["mode"], len(data["hits"])) == ("rrf", 2)
    config = api.get("/config").json()
    assert config["defaults"]["mode"] == "bm25"
    # the page's mode hints and controls come from the server's mode registry
    assert list(config["mode_info"]) == config["modes"]
    assert config["mode_info"]["rescore"]["parameters"] == ["alpha", "window", "normalization"]
    assert config["mode_info"]["bm25"]["subqueries"] == ["bm25"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"latex": "x", "k": 0}, "k", "greater than or equal to 1"),
        ({"latex": "x", "alpha": 1.5}, "alpha", "less than or equal to 1"),
        ({"latex": "x", "mode": "dense"}, "mode", "knn"),
        ({"latex": "x", "colour": "red"}, "colour", "Extra inputs"),
        ({"latex": "x", "filters": {"ranges": {"position": [0]}}}, "filters", ""),
    ],
)
@pytest.mark.services
def test_invalid_bodies_are_422_with_the_field_and_reason(
    api: TestClient, body: dict, field: str, words: str
) -> None:
    response = api.post("/search", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["status"] == 422 and error["reason"].startswith(field)
    assert words in error["reason"]
    assert any(d["field"].startswith(field) for d in error["details"])


@pytest.mark.services
def test_semantic_errors_are_422_with_a_reason(api: TestClient, settings: Any) -> None:
    cases = {
        "empty query": {"latex": "  "},
        f"the limit is {settings.serve_max_latex}": {"latex": "x" * (settings.serve_max_latex + 1)},
        f"at most {settings.serve_max_k}": {"latex": "x", "k": settings.serve_max_k + 1},
        "cannot read the query": {"latex": r"\frac{a}{", "mode": "knn"},
        "cannot filter on 'latex'": {"latex": "x", "filters": {"terms": {"latex": ["x"]}}},
    }
    for words, body in cases.items():
        response = api.post("/search", json=body)
        assert response.status_code == 422, (body, response.text)
        assert words in response.json()["error"]["reason"]


@pytest.mark.services
def test_body_size_and_length_limits(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str
) -> None:
    api = TestClient(
        create_app(replace(settings, serve_max_body=300), equation_alias, client=client)
    )
    big = json.dumps({"latex": "x" * 400})
    response = api.post("/search", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "limit is 300" in response.json()["error"]["reason"]
    chunked = api.post(
        "/search", content=iter([b'{"latex": "x"}']), headers={"content-type": "application/json"}
    )
    assert chunked.status_code == 411


@pytest.mark.services
def test_rate_limit_answers_429_with_retry_after(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str
) -> None:
    api = TestClient(
        create_app(replace(settings, serve_rate=0.01, serve_burst=2), equation_alias, client=client)
    )
    codes = [api.post("/render", json={"latex": "x^2"}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    refused = api.post("/render", json={"latex": "x^2"})
    assert int(refused.headers["retry-after"]) >= 1
    assert api.get("/health").status_code == 200  # operations routes are not limited
    metrics = api.get("/metrics").text
    assert 'mathsearch_http_rejected_total{reason="rate"} 2.0' in metrics


@pytest.mark.services
def test_render_equation_health_metrics_and_openapi(
    api: TestClient, client: OpenSearch, indexed: dict[str, Any], equation_alias: str
) -> None:
    rendered = api.post("/render", json={"latex": r"\frac{a}{b} + \sqrt{x}"}).json()
    assert "<mfrac>" in rendered["mathml"] and "<msqrt>" in rendered["mathml"]
    bad = api.post("/render", json={"latex": r"\frac{a}{"})
    assert bad.status_code == 422 and "unbalanced-braces" in bad.json()["error"]["reason"]

    eq_id = indexed["eq_id"]
    stored = api.get(f"/equations/{eq_id.replace('#', '%23')}").json()
    assert stored["latex"] == indexed["latex"] and stored["mathml"].startswith("<math")
    raw = client.get(index=equation_alias, id=eq_id, _source_includes=["mathml"])["_source"]
    assert raw["mathml"] == ""  # rendered for the answer, not stored
    assert not any(name.startswith("vec_") for name in stored)
    missing = api.get("/equations/no-such-equation")
    assert missing.status_code == 404 and "no-such-equation" in missing.json()["error"]["reason"]

    health = api.get("/health").json()
    assert health["status"] == "ok" and health["equations"] == 206
    assert health["index"] == equation_alias and health["vector_field"] == DEFAULT_FIELD

    api.post("/search", json={"latex": "x^2", "mode": "bm25"})
    metrics = api.get("/metrics").text
    assert 'mathsearch_http_requests_total{method="POST",route="/search",status="200"}' in metrics
    assert 'mathsearch_search_seconds_count{mode="bm25"}' in metrics

    schema = api.get("/openapi.json").json()
    assert {"/search", "/render", "/equations/{eq_id}", "/health", "/metrics"} <= set(
        schema["paths"]
    )
    body = schema["components"]["schemas"]["SearchBody"]["properties"]
    assert {"latex", "text", "mode", "alpha", "k", "filters", "explain"} <= set(body)
    assert "422" in schema["paths"]["/search"]["post"]["responses"]
    assert api.get("/docs").status_code == 404  # Swagger UI would load from a CDN
    assert "default-src 'self'" in api.get("/").headers["content-security-policy"]


@pytest.fixture
def unreachable(settings: OpenSearchSettings) -> Iterator[TestClient]:
    dead = replace(settings, url="http://127.0.0.1:9", timeout=2.0)
    yield TestClient(create_app(dead, "mathsearch-equations", client=connect(dead)))


@pytest.mark.services
def test_cluster_down_or_missing_index_is_503_with_the_reason(
    unreachable: TestClient, settings: OpenSearchSettings, client: OpenSearch
) -> None:
    health = unreachable.get("/health")
    assert health.status_code == 503 and "does not answer" in health.json()["reason"]
    search = unreachable.post("/search", json={"latex": "x", "mode": "bm25"})
    assert search.status_code == 503 and search.json()["error"]["status"] == 503
    assert search.headers["retry-after"] == "1"
    missing = TestClient(create_app(settings, "mathsearch-no-such-index", client=client))
    health = missing.get("/health")
    assert health.status_code == 503 and "no such index" in health.json()["reason"]
    search = missing.post("/search", json={"latex": "x", "mode": "bm25"})
    assert search.status_code == 503 and "no index" in search.json()["error"]["reason"]


def test_a_body_that_is_not_json_is_400_with_where_it_breaks(unreachable: TestClient) -> None:
    """A truncated body was a 422 naming a character offset as its ``field``."""
    headers = {"content-type": "application/json"}
    for body, where in (
        ('{"latex": "x", "k":', "line 1 column 20: Expecting value"),
        ('{"latex": "x",\n "k": 3,,}', "line 2 column 9: Expecting property name"),
    ):
        response = unreachable.post("/search", content=body, headers=headers)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["status"] == 400
        assert error["reason"].startswith(f"invalid JSON at {where}")
        assert "details" not in error
    assert "400" in unreachable.get("/openapi.json").json()["paths"]["/search"]["post"]["responses"]
    # JSON of the wrong shape is still a 422 naming the field
    wrong = unreachable.post("/search", json={"latex": "x", "k": "many"})
    assert wrong.status_code == 422 and wrong.json()["error"]["reason"].startswith("k:")


def test_a_bad_range_is_422_before_the_cluster_is_asked(unreachable: TestClient) -> None:
    """``position: ["a", "b"]`` reached the node, which answered ``For input string: "a"``."""
    for ranges, words in (
        ({"position": ["a", "b"]}, "range on position: 'a' is not an integer"),
        ({"position": [0, 2**40]}, "out of the integer range"),
        ({"indexed_at": ["last week", None]}, "'last week' is not a date"),
    ):
        body = {"latex": "x", "mode": "bm25", "filters": {"ranges": ranges}}
        response = unreachable.post("/search", json=body)
        # 422 with the value, not the 503 of the unreachable cluster: refused before any call
        assert response.status_code == 422, response.text
        assert words in response.json()["error"]["reason"]


class _Broken:
    def features(self, latex: str) -> Any:
        raise RuntimeError("a bug in the featuriser")


@pytest.mark.services
def test_an_unexpected_error_is_a_json_500_without_internals(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str
) -> None:
    app = create_app(settings, equation_alias, client=client, encoder=_Broken())
    response = TestClient(app, raise_server_exceptions=False).post("/search", json={"latex": "x"})
    assert response.status_code == 500
    assert response.json()["error"]["reason"] == "internal error (RuntimeError)"
    assert "featuriser" not in response.text


@pytest.mark.services
def test_bm25_through_the_api_runs_no_model(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str
) -> None:
    from mathsearch.opensearch.query_encoder import ModelQueryEncoder

    no_model = ModelQueryEncoder(model="/nonexistent/gcn.onnx")
    app = create_app(
        replace(settings, serve_rate=0), equation_alias, client=client, encoder=no_model
    )
    api = TestClient(app)
    bm25 = api.post("/search", json={"latex": r"\frac{a}{b} + x^2", "mode": "bm25", "k": 3})
    assert bm25.status_code == 200 and bm25.json()["hits"]
    fusion = api.post("/search", json={"latex": r"\frac{a}{b} + x^2", "mode": "fusion", "k": 3})
    assert fusion.status_code == 422 and "nonexistent" in fusion.json()["error"]["reason"]


@pytest.mark.services
def test_like_searches_for_similar_equations_without_the_equation_itself(
    api: TestClient, indexed: dict[str, Any]
) -> None:
    plain = _post(api, "/search", {"latex": indexed["latex"], "mode": "bm25", "k": 6}).json()
    assert plain["hits"][0]["eq_id"] == indexed["eq_id"]
    like = _post(api, "/search", {"like": indexed["eq_id"], "mode": "bm25", "k": 5})
    assert like.status_code == 200, like.text
    assert [h["eq_id"] for h in like.json()["hits"]] == [h["eq_id"] for h in plain["hits"][1:]]
    assert like.json()["query_tokens"] == plain["query_tokens"]
    unknown = _post(api, "/search", {"like": "no-such#0"})
    assert (
        unknown.status_code == 404
        and "no equation 'no-such#0'" in unknown.json()["error"]["reason"]
    )
    both = _post(api, "/search", {"like": indexed["eq_id"], "latex": "x"})
    assert both.status_code == 422 and "not both" in both.json()["error"]["reason"]
    too_long = _post(api, "/search", {"like": "x" * 300})
    assert too_long.status_code == 422


@pytest.mark.services
def test_offset_returns_the_next_page(api: TestClient, indexed: dict[str, Any]) -> None:
    body = {"latex": indexed["latex"], "mode": "fusion"}
    first = _post(api, "/search", {**body, "k": 10}).json()["hits"]
    second = _post(api, "/search", {**body, "k": 5, "offset": 5}).json()
    assert [h["eq_id"] for h in second["hits"]] == [h["eq_id"] for h in first[5:]]
    assert [h["rank"] for h in second["hits"]] == [6, 7, 8, 9, 10]
    assert second["parameters"]["offset"] == 5
    assert _post(api, "/search", {**body, "offset": -1}).status_code == 422
    deep = _post(api, "/search", {**body, "k": 10, "offset": 95})
    assert deep.status_code == 422 and "depth" in deep.json()["error"]["reason"]


@pytest.mark.services
def test_the_profiles_second_stage_is_served_and_a_body_can_turn_it_off(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str, indexed: dict
) -> None:
    from mathsearch.core.errors import ConfigurationError

    profile = SearchProfile(mode=Mode.RRF, rerank=("gcn",), rerank_window=20, rerank_alpha=0.5)
    api = TestClient(create_app(settings, equation_alias, client=client, profile=profile))
    data = api.post("/search", json={"latex": indexed["latex"], "k": 5, "explain": True}).json()
    assert data["parameters"]["rerank"] == ["gcn"] and data["parameters"]["rerank_window"] == 20
    assert data["hits"][0]["eq_id"] == indexed["eq_id"]
    explanation = data["hits"][0]["explanation"]
    assert explanation["formula"].startswith("second stage: rerank of the rrf top 20")
    assert explanation["second_stage"]["formula"].startswith("rerank of the rrf top 20")
    assert explanation["first_stage"]["formula"].startswith("sum over subqueries of 1 / (60")
    off = api.post("/search", json={"latex": indexed["latex"], "k": 5, "rerank_window": 0})
    assert off.status_code == 200 and "rerank" not in off.json()["parameters"]
    bad = api.post("/search", json={"latex": "x", "rerank_alpha": 2})
    assert bad.status_code == 422 and "rerank_alpha" in bad.text
    missing = replace(profile, rerank=("no-such-model.onnx",))
    with pytest.raises(ConfigurationError, match="second stage"):
        create_app(settings, equation_alias, client=client, profile=missing)


@pytest.mark.services
def test_the_second_stages_query_vectors_come_from_the_query_encoders_one_pass(
    settings: OpenSearchSettings, client: OpenSearch, demo_parsed: list[ParsedEquation]
) -> None:
    """Behind the server's lock the query encoder still embeds the second stage's encoders in
    the query's own pass (deferred while the first stage runs): over an index with the stored
    field, a search embeds nothing else - neither a candidate nor the query a second time."""
    from mathsearch.workers.index_job import run_index
    from tests.opensearch.conftest import drop_alias, new_alias

    alias = new_alias(settings)
    records = [p.record for p in demo_parsed[:40]]
    try:
        run_index(
            records, alias, inline=True, settings=settings, encoders=["gcn"],
            rerank=["gcn-v9.onnx"], progress=False,
        )  # fmt: skip
        profile = SearchProfile(mode=Mode.FUSION, rerank=("gcn-v9.onnx",), rerank_window=20)
        app = create_app(replace(settings, serve_rate=0), alias, client=client, profile=profile)
        searcher = app.state.serve.searcher
        started = searcher.rerank_vectors.embedded
        api = TestClient(app)
        for n in (3, 27):
            data = _post(api, "/search", {"latex": records[n].latex, "k": 5}).json()
            assert data["hits"][0]["eq_id"] == records[n].eq_id
            assert data["parameters"]["rerank"] == ["gcn-v9.onnx"] and not data["warnings"]
        assert searcher.rerank_vectors.embedded == started == 0
    finally:
        drop_alias(client, alias)


@pytest.mark.services
def test_the_served_app_freezes_its_start_up_heap_out_of_full_collections(
    settings: OpenSearchSettings, equation_alias: str
) -> None:
    import gc

    from mathsearch.serve.http_api import served_app

    gc.unfreeze()
    try:
        served_app(settings, equation_alias, SearchProfile.default(), None)
        assert gc.get_freeze_count() > 10_000  # the models, tables and client, not a handful
    finally:
        gc.unfreeze()
