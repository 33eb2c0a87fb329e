"""The second stage (``rerank``): its math alone, its vector cache, and against the real node
with the 206 sample equations (the window re-ordered, never changed; BM25 and the cosines it
ranks by; the modes it leaves alone; clear errors), over fields the workers stored (no candidate
embedded, the same ranking as the query-time path, the fallback's warning) and a field
backfilled by ``models add --rerank`` on a live index."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import pytest
from opensearchpy import OpenSearch

from mathsearch.core.errors import QueryError
from mathsearch.indexer.parse import ParsedEquation
from mathsearch.opensearch.queries import Mode, hit_id
from mathsearch.opensearch.query_encoder import ModelQueryEncoder
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.stored_vectors import VectorStorage
from mathsearch.opensearch.window_rerank import (
    RerankVectors,
    rerank_order,
    rerank_weights,
)
from mathsearch.runtime.embedders import MODELS_DIR, Embedder, shipped_or_path
from tests.opensearch.conftest import drop_alias, new_alias

# -- the math alone -------------------------------------------------------------------------


def test_rerank_order_golden() -> None:
    """Min-max in the window (0 -> 0.001, as the plugin), (1 - a) bm25 + a / n sum_e cos_e."""
    bm25 = [12.0, 10.0, 4.0, 2.0]
    columns = [[0.55, 0.95, 0.75, 0.55], [0.6, 0.8, 1.0, None]]
    order, scores = rerank_order(bm25, columns, 0.6)
    # bm25 normalised: 1, 0.8, 0.2, 0.001; column 1: 0.001, 1, 0.5, 0.001;
    # column 2 (three vectors): 0.001, 0.5, 1, none
    expected = [
        0.4 * 1 + 0.3 * 0.001 + 0.3 * 0.001,
        0.4 * 0.8 + 0.3 * 1 + 0.3 * 0.5,
        0.4 * 0.2 + 0.3 * 0.5 + 0.3 * 1,
        0.4 * 0.001 + 0.3 * 0.001,
    ]
    assert [round(s.score, 6) for s in scores] == [round(e, 6) for e in expected]
    assert order == [1, 2, 0, 3]


def test_rerank_alpha_zero_keeps_bm25_order_and_one_follows_the_vectors() -> None:
    bm25 = [1.0, 3.0, 2.0]
    column = [[0.9, 0.1, 0.5]]
    assert rerank_order(bm25, column, 0.0)[0] == [1, 2, 0]
    assert rerank_order(bm25, column, 1.0)[0] == [0, 2, 1]


def test_rerank_weights_sum_to_one_and_need_an_encoder() -> None:
    weights = rerank_weights(0.6, 3)
    assert weights[0] == pytest.approx(0.4) and sum(weights) == pytest.approx(1.0)
    with pytest.raises(QueryError, match="at least one encoder"):
        rerank_weights(0.5, 0)


def test_shipped_model_names_resolve_whatever_the_working_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert shipped_or_path("gcn-v8.onnx") == str(MODELS_DIR / "gcn-v8.onnx")
    assert shipped_or_path("gcn") == "gcn"
    assert shipped_or_path("nowhere.onnx") == "nowhere.onnx"  # left for the loader to refuse


def test_request_validates_the_second_stage() -> None:
    for bad in ({"rerank_window": -1}, {"rerank_window": 1001}, {"rerank_alpha": 1.5}):
        with pytest.raises(QueryError, match="rerank"):
            SearchRequest("x", rerank=("gcn",), **bad).validate()
    with pytest.raises(QueryError, match="name each encoder"):
        SearchRequest("x", rerank=(" ",)).validate()
    assert SearchRequest("x", mode=Mode.FUSION, rerank=("gcn",)).reranks
    assert not SearchRequest("x", mode=Mode.BM25, rerank=("gcn",)).reranks
    assert not SearchRequest("x", mode=Mode.KNN, rerank=("gcn",)).reranks
    assert not SearchRequest("x", mode=Mode.FUSION, rerank=("gcn",), rerank_window=0).reranks
    params = SearchRequest("x", mode=Mode.RRF, rerank=("gcn",), rerank_window=30).parameters()
    assert params["rerank"] == ["gcn"] and params["rerank_window"] == 30
    assert "rerank" not in SearchRequest("x", mode=Mode.BM25, rerank=("gcn",)).parameters()


# -- the vectors of candidates ---------------------------------------------------------------


def test_rerank_vectors_are_the_query_encoders_and_each_is_embedded_once() -> None:
    """One featurisation: a candidate's vector is the one the same LaTeX gets as a query."""
    latex = [r"\frac{1}{2} m^2 \phi^2", r"E = m c^2", r"\int_0^1 x^2 \, dx"]
    vectors = RerankVectors(capacity=10)
    (column,) = vectors.vectors(["gcn"], [(x, "") for x in latex])
    query = ModelQueryEncoder()
    for text, got in zip(latex, column, strict=True):
        want = np.asarray(query.features(text).vector)
        assert got is not None
        assert np.allclose(got, want, atol=1e-5)
    assert vectors.embedded == 3
    vectors.vectors(["gcn"], [(latex[1], ""), (latex[0], "")])
    assert vectors.embedded == 3  # both cached


def test_rerank_vectors_keep_errors_as_data_and_evict_the_oldest() -> None:
    vectors = RerankVectors(capacity=2)
    (column,) = vectors.vectors(["gcn"], [(r"\frac{", ""), ("", ""), ("x^2", "")])
    assert column[0] is None and column[1] is None and column[2] is not None
    vectors.vectors(["gcn"], [("y^2", ""), ("z^2", "")])  # x^2 is the oldest: evicted
    before = vectors.embedded
    vectors.vectors(["gcn"], [("x^2", "")])
    assert vectors.embedded == before + 1
    with pytest.raises(QueryError, match="rerank encoder"):
        vectors.embedder("missing-model.onnx")


def test_uncached_vectors_are_still_returned() -> None:
    (column,) = RerankVectors(capacity=0).vectors(["gcn"], [("x^2", ""), ("x^2", "")])
    assert column[0] is not None and np.array_equal(column[0], column[1])


# -- against the real node --------------------------------------------------------------------


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def rerank_searcher(searcher: Searcher) -> Searcher:
    return Searcher(searcher.client, searcher.index)


@pytest.mark.services
def test_the_window_is_reordered_and_nothing_else(
    rerank_searcher: Searcher, demo_parsed: list[ParsedEquation]
) -> None:
    query = demo_parsed[120].record.latex
    first = rerank_searcher.search(SearchRequest(query, mode=Mode.FUSION, k=40, alpha=0.4))
    second = rerank_searcher.search(
        SearchRequest(
            query, mode=Mode.FUSION, k=40, alpha=0.4, rerank=("gcn",), rerank_window=20,
            rerank_alpha=0.6,
        )
    )  # fmt: skip
    ids = [hit.eq_id for hit in first.hits]
    got = [hit.eq_id for hit in second.hits]
    assert sorted(got[:20]) == sorted(ids[:20])
    assert got[20:] == ids[20:]
    assert got[:20] != ids[:20]  # the second stage did re-rank this window
    assert [hit.rank for hit in second.hits] == list(range(1, 41))
    scores = [hit.score for hit in second.hits]
    assert scores == sorted(scores, reverse=True)
    assert second.parameters["rerank"] == ["gcn"] and second.parameters["rerank_window"] == 20


@pytest.mark.services
def test_alpha_zero_ranks_the_window_by_exact_bm25_and_one_by_the_rerank_cosine(
    rerank_searcher: Searcher, encoder: Embedder, demo_parsed: list[ParsedEquation]
) -> None:
    query = demo_parsed[3].record.latex
    base = SearchRequest(query, mode=Mode.RRF, k=15, rerank=("gcn",), rerank_window=15)
    lexical = rerank_searcher.search(replace(base, rerank_alpha=0.0))
    tokens = lexical.query_tokens
    bm25 = rerank_searcher.bm25_scores([h.eq_id for h in lexical.hits], tokens, "")
    values = [bm25.get(h.eq_id, 0.0) for h in lexical.hits]
    assert values == sorted(values, reverse=True)

    dense = rerank_searcher.search(replace(base, rerank_alpha=1.0))
    by_id = {p.eq_id: p for p in demo_parsed}
    q = np.asarray(ModelQueryEncoder().features(query).vector)
    vectors = encoder.embed([by_id[h.eq_id].embed_item() for h in dense.hits])
    cosines = [_cos(q, np.asarray(v)) for v in vectors]
    assert cosines == pytest.approx(sorted(cosines, reverse=True), abs=1e-4)
    assert sorted(h.eq_id for h in dense.hits) == sorted(h.eq_id for h in lexical.hits)


@pytest.mark.services
def test_the_indexed_equation_itself_comes_first(
    rerank_searcher: Searcher, demo_parsed: list[ParsedEquation]
) -> None:
    for n in (10, 60, 150):
        parsed = demo_parsed[n]
        for mode in (Mode.FUSION, Mode.RRF, Mode.RESCORE, Mode.KNN_RESCORE):
            request = SearchRequest(parsed.record.latex, mode=mode, k=5, rerank=("gcn",))
            assert rerank_searcher.search(request).hits[0].eq_id == parsed.eq_id


@pytest.mark.services
def test_bm25_and_knn_alone_are_left_alone(
    rerank_searcher: Searcher, demo_parsed: list[ParsedEquation]
) -> None:
    query = demo_parsed[40].record.latex
    for mode in (Mode.BM25, Mode.KNN):
        plain = rerank_searcher.search(SearchRequest(query, mode=mode, k=10))
        asked = rerank_searcher.search(SearchRequest(query, mode=mode, k=10, rerank=("gcn",)))
        assert [h.eq_id for h in asked.hits] == [h.eq_id for h in plain.hits]
        assert "rerank" not in asked.parameters


@pytest.mark.services
def test_explain_gives_the_second_stage_formula_and_bad_encoders_fail_clearly(
    rerank_searcher: Searcher, demo_parsed: list[ParsedEquation]
) -> None:
    query = demo_parsed[7].record.latex
    request = SearchRequest(query, mode=Mode.FUSION, k=3, rerank=("gcn",), explain=True)
    hit = rerank_searcher.search(request).hits[0]
    explained = hit.explanation
    assert explained is not None and explained.formula.startswith("second stage: rerank of")
    first, second = explained.first_stage, explained.second_stage
    assert first is not None and second is not None
    assert second.formula.startswith("rerank of the fusion top 50")
    assert second.bm25_normalized is not None and second.knn is None  # cosines: its fields
    assert [f.field for f in second.fields] == ["gcn"] and second.fields[0].raw is not None
    # the top level keeps the first stage's scores (what retrieved the hit), not the rerank's
    assert (explained.bm25, explained.knn) == (first.bm25, first.knn)
    assert "arithmetic_mean" in first.formula and explained.score == hit.score
    data = hit.to_dict()["explanation"]
    assert set(data) >= {"first_stage", "second_stage"} and "first_stage" not in data["first_stage"]
    plain = rerank_searcher.search(replace(request, rerank=())).hits[0].to_dict()
    assert "second_stage" not in plain["explanation"]
    with pytest.raises(QueryError, match=r"rerank encoder 'no-such\.onnx'"):
        rerank_searcher.search(replace(request, rerank=("no-such.onnx",)))


# -- the second stage over stored fields -------------------------------------------------------

HEAVY = "gcn-v9.onnx"  # one seed-size tower: the default profile's kind, a third of its cost


@pytest.fixture(scope="module")
def two_indexes(
    client: OpenSearch, settings: OpenSearchSettings, demo_parsed: list[ParsedEquation]
) -> Iterator[tuple[str, str]]:
    """The same 90 sample equations indexed by the workers' code twice: with HEAVY's field
    written for the second stage (float16, no ANN graph), and without it."""
    from mathsearch.workers.index_job import run_index

    records = [p.record for p in demo_parsed[:90]]
    with_field, without = new_alias(settings), new_alias(settings)
    try:
        for alias, rerank in ((with_field, [HEAVY]), (without, [])):
            report = run_index(
                records, alias, inline=True, settings=settings, encoders=["gcn"],
                rerank=rerank, progress=False,
            )  # fmt: skip
            assert report.written == 90
        yield with_field, without
    finally:
        drop_alias(client, with_field)
        drop_alias(client, without)


@pytest.mark.services
def test_stored_fields_rank_as_the_query_time_path_and_no_candidate_is_embedded(
    client: OpenSearch,
    two_indexes: tuple[str, str],
    demo_parsed: list[ParsedEquation],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with_field, without = two_indexes
    mapping = client.indices.get_mapping(index=with_field)
    properties = next(iter(mapping.values()))["mappings"]["properties"]
    assert properties["vec_gcn_v9"] == {"type": "binary", "doc_values": True}  # no graph
    stored, embedding = Searcher(client, with_field), Searcher(client, without)
    assert stored.vector_storages()["vec_gcn_v9"] is VectorStorage.FLOAT16
    for n in (2, 30, 55, 81):
        request = SearchRequest(
            demo_parsed[n].record.latex, mode=Mode.FUSION, k=20, rerank=(HEAVY,), rerank_window=20
        )
        got = stored.search(request)
        with caplog.at_level(logging.WARNING, logger="mathsearch.opensearch.window_rerank"):
            want = embedding.search(request)
        assert got.warnings == []
        assert want.warnings and "has no vec_gcn_v9 field" in want.warnings[0]
        assert got.hits[0].eq_id == want.hits[0].eq_id == demo_parsed[n].eq_id
        # the same scores for the same equations: float16 vectors against float32 ones
        theirs = {hit.eq_id: hit.score for hit in want.hits}
        assert {hit.eq_id for hit in got.hits} == set(theirs)
        for hit in got.hits:
            assert hit.score == pytest.approx(theirs[hit.eq_id], abs=2e-3)
    assert stored.rerank_vectors.embedded == 0  # never a candidate embedded at query time
    assert embedding.rerank_vectors.embedded > 0
    logged = [r.getMessage() for r in caplog.records if "vec_gcn_v9" in r.getMessage()]
    assert len(logged) == 1  # once per index and fields, not per query


@pytest.mark.services
def test_a_client_side_fusion_reads_the_stored_fields_with_its_lists(
    client: OpenSearch,
    two_indexes: tuple[str, str],
    demo_parsed: list[ParsedEquation],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fused fast path (the vectors and exact BM25 come with the fusion's lists) ranks
    and scores as the generic second stage (a server-side first stage, then the window's own
    search), explains both stages, and groups."""
    with_field, _ = two_indexes
    fast, generic = Searcher(client, with_field), Searcher(client, with_field)

    def no_window_search(*_: object, **__: object) -> None:
        raise AssertionError("the fused path needs no window search of its own")

    monkeypatch.setattr(fast, "window_scores", no_window_search)
    for n in (5, 40, 77):
        request = SearchRequest(
            demo_parsed[n].record.latex, mode=Mode.FUSION, k=10, rerank=(HEAVY,),
            rerank_window=20, explain=True,
        )  # fmt: skip
        got = fast.search(request)
        want = generic.search(replace(request, fusion_side="server"))
        assert got.fused == "client" and want.fused == "server"
        assert [h.eq_id for h in got.hits] == [h.eq_id for h in want.hits]
        for mine, theirs in zip(got.hits, want.hits, strict=True):
            assert mine.score == pytest.approx(theirs.score, abs=1e-6)
            assert mine.latex == theirs.latex and mine.doc_id == theirs.doc_id
        top = got.hits[0].explanation
        assert top is not None and top.second_stage is not None and top.first_stage is not None
        assert top.second_stage.fields[0].field == "gcn-v9"
        assert got.stages_ms.keys() == {"query", "first_stage", "second_stage"}
        grouped = fast.search(replace(request, group=True, explain=False))
        assert grouped.groups and grouped.groups[0].doc_id == got.hits[0].doc_id
    assert fast.rerank_vectors.embedded == 0


@pytest.mark.services
def test_the_fused_path_reads_a_window_equation_the_candidates_missed_apart(
    client: OpenSearch,
    two_indexes: tuple[str, str],
    demo_parsed: list[ParsedEquation],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kNN lists bring no vectors (the candidates' body has every equation they list);
    a window equation missing from that body's hits (the index refreshed between the
    searches) gets its vectors in one more request, not a second stage without them."""
    with_field, _ = two_indexes
    searcher, reference = Searcher(client, with_field), Searcher(client, with_field)
    request = SearchRequest(
        demo_parsed[12].record.latex, mode=Mode.FUSION, k=20, depth=20, rerank=(HEAVY,),
        rerank_window=20, explain=True,
    )  # fmt: skip
    sent: list[list[dict]] = []
    dropped: list[str] = []
    asked: list[list[str]] = []
    run_bodies, doc_values_of = searcher.run_bodies, searcher.doc_values_of

    def dropping(bodies: list[dict]) -> list[dict]:
        sent.append(bodies)
        responses = run_bodies(bodies)
        bm25 = {hit_id(h, "eq_id") for h in responses[0]["hits"]["hits"]}
        knn = [hit_id(h, "eq_id") for h in responses[1]["hits"]["hits"]]
        gone = next(doc for doc in knn if doc not in bm25)  # kNN's best of its own
        hits = responses[-1]["hits"]["hits"]
        responses[-1]["hits"]["hits"] = [h for h in hits if hit_id(h, "eq_id") != gone]
        dropped.append(gone)
        return responses

    def recording(ids: list[str], names: Sequence[str]) -> dict:
        asked.append(list(ids))
        return doc_values_of(ids, names)

    monkeypatch.setattr(searcher, "run_bodies", dropping)
    monkeypatch.setattr(searcher, "doc_values_of", recording)
    got = searcher.search(request)
    want = reference.search(request)
    # only BM25's list and the candidates' body carry the stored vectors
    assert [b["docvalue_fields"] for b in sent[0]] == [
        ["eq_id", "vec_gcn_v9"],
        ["eq_id"],
        ["eq_id", "vec_gcn_v9"],
    ]
    assert asked == [dropped]  # the one equation the candidates missed, read apart
    raw = {h.eq_id: h.explanation.second_stage.fields[0].raw for h in want.hits
           if h.explanation is not None and h.explanation.second_stage is not None}  # fmt: skip
    mine = next(h for h in got.hits if h.eq_id == dropped[0])
    assert mine.explanation is not None and mine.explanation.second_stage is not None
    assert mine.explanation.second_stage.fields[0].raw == pytest.approx(raw[dropped[0]])
    assert searcher.rerank_vectors.embedded == 0


@pytest.mark.services
def test_models_add_backfills_a_rerank_field_on_a_live_index(
    client: OpenSearch, settings: OpenSearchSettings, demo_parsed: list[ParsedEquation]
) -> None:
    from mathsearch.workers.index_job import run_index
    from tests.cli.test_main import _mathsearch

    alias = new_alias(settings)
    records = [p.record for p in demo_parsed[:40]]
    try:
        run_index(
            records, alias, inline=True, settings=settings, encoders=["gcn"], rerank=[],
            progress=False,
        )  # fmt: skip
        searcher = Searcher(client, alias)
        request = SearchRequest(demo_parsed[5].record.latex, k=5, rerank=(HEAVY,))
        assert searcher.search(request).warnings  # not there yet: query-time embedding
        errors: list[BaseException] = []
        done = threading.Event()

        def keep_searching() -> None:  # the index answers throughout the backfill
            reader = Searcher(client, alias)
            while not done.is_set():
                try:
                    assert reader.search(replace(request, rerank=())).hits
                except BaseException as exc:
                    errors.append(exc)
                    return

        thread = threading.Thread(target=keep_searching)
        thread.start()
        try:
            added = _mathsearch(
                "models", "add", HEAVY, "--rerank", "int8", "--index", alias, "--json"
            )
        finally:
            done.set()
            thread.join()
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout)["updated"] == 40 and not errors
        fresh = Searcher(client, alias)
        assert fresh.vector_storages()["vec_gcn_v9"] is VectorStorage.INT8
        response = fresh.search(request)
        assert response.warnings == [] and fresh.rerank_vectors.embedded == 0
        assert response.hits[0].eq_id == demo_parsed[5].eq_id
        again = _mathsearch("models", "add", HEAVY, "--rerank", "int8", "--index", alias, "--json")
        assert json.loads(again.stdout)["unchanged"] == 40  # idempotent
        use = _mathsearch("models", "use", "vec_gcn_v9", "--index", alias)
        assert use.returncode == 1 and "exact-only" in use.stderr
    finally:
        drop_alias(client, alias)
