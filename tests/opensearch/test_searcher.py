"""The Searcher against the real node: every mode, filters, grouping, explanations, errors."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mathsearch.cli.main import main
from mathsearch.core.errors import QueryError, UnknownEquationError
from mathsearch.opensearch.queries import Filters, Mode
from mathsearch.opensearch.results import token_kind
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.searcher import Searcher, SearchRequest
from tests.conftest import DEFAULT_CARD, DEFAULT_FIELD

pytestmark = pytest.mark.services

QUERY = 40  # a real equation of the bundled sample, indexed in the fixture


@pytest.mark.parametrize("mode", list(Mode))
def test_every_mode_ranks_real_equations(searcher: Searcher, demo_parsed: list, mode: Mode) -> None:
    query = demo_parsed[QUERY]
    response = searcher.search(SearchRequest(query.record.latex, mode=mode, k=8))
    assert response.mode == mode.value and len(response.hits) == 8
    scores = [hit.score for hit in response.hits]
    assert scores == sorted(scores, reverse=True)
    assert [hit.rank for hit in response.hits] == list(range(1, 9))
    indexed = {p.eq_id for p in demo_parsed}
    assert all(hit.eq_id in indexed and hit.latex for hit in response.hits)
    if mode in (Mode.BM25, Mode.RESCORE, Mode.FUSION, Mode.RRF):
        # the indexed copy of the query shares every token: lexical modes rank it first
        assert response.hits[0].eq_id == query.eq_id
    if mode is not Mode.KNN:
        top = response.hits[0]
        assert top.matched_tokens and set(top.matched_tokens) <= set(query.math_tokens)
        assert f"<em>{top.matched_tokens[0]}</em>" in top.highlight
        kinds = [token_kind(token) for token in top.matched_tokens]
        assert kinds == sorted(kinds) and kinds[0] == 0  # symbols before structure


@pytest.mark.parametrize("mode", list(Mode))
def test_filters_hold_in_every_mode(searcher: Searcher, demo_parsed: list, mode: Mode) -> None:
    docs = sorted({p.record.doc_id for p in demo_parsed})[1:3]
    filters = Filters(doc_ids=tuple(docs), ranges={"position": (1, 6)})
    response = searcher.search(
        SearchRequest(demo_parsed[QUERY].record.latex, mode=mode, k=5, filters=filters)
    )
    assert response.hits
    for hit in response.hits:
        assert hit.doc_id in docs and 1 <= hit.position <= 6
    symbol = demo_parsed[QUERY].symbols["identifiers"][0]
    by_symbol = searcher.search(
        SearchRequest(
            demo_parsed[QUERY].record.latex,
            mode=mode,
            k=5,
            filters=Filters(terms={"symbols": (symbol,)}),
        )
    )
    ids = {p.eq_id: p for p in demo_parsed}
    for hit in by_symbol.hits:
        parsed = ids[hit.eq_id]
        assert symbol in {s for group in parsed.symbols.values() for s in group}


def test_grouping_by_document(searcher: Searcher, demo_parsed: list) -> None:
    response = searcher.search(
        SearchRequest(demo_parsed[QUERY].record.latex, mode=Mode.FUSION, k=3, group=True)
    )
    assert response.groups is not None and len(response.groups) == 3
    assert len({g.doc_id for g in response.groups}) == 3
    assert [g.score for g in response.groups] == sorted(
        (g.score for g in response.groups), reverse=True
    )
    for group in response.groups:
        assert all(hit.doc_id == group.doc_id for hit in group.hits)
        assert group.score == group.hits[0].score
    assert sum(len(g.hits) for g in response.groups) > 3


@pytest.mark.parametrize("mode", [Mode.RESCORE, Mode.KNN_RESCORE])
def test_rescore_explanations_add_up(searcher: Searcher, demo_parsed: list, mode: Mode) -> None:
    alpha = 0.3
    response = searcher.search(
        SearchRequest(demo_parsed[QUERY].record.latex, mode=mode, k=6, alpha=alpha, explain=True)
    )
    for hit in response.hits:
        e = hit.explanation
        assert e is not None and e.bm25 is not None and e.knn is not None
        if mode is Mode.RESCORE:  # both normalised inside the window (window_rescore)
            assert 0.0 <= e.knn <= 1.0
            assert 0.0 < e.bm25_normalized <= 1.0 and 0.0 < e.knn_normalized <= 1.0
            expected = (1 - alpha) * e.bm25_normalized + alpha * e.knn_normalized
        else:
            expected = alpha * e.knn + (1 - alpha) * e.bm25
        assert math.isclose(hit.score, expected, rel_tol=1e-4)


def test_rescore_normalises_bm25_and_cosine_inside_the_window(
    searcher: Searcher, demo_parsed: list
) -> None:
    latex = demo_parsed[QUERY].record.latex
    bm25 = searcher.search(SearchRequest(latex, mode=Mode.BM25, k=20))
    request = SearchRequest(latex, mode=Mode.RESCORE, k=20, window=20, alpha=0.5, explain=True)
    hits = searcher.search(request).hits
    # the same window as BM25's top 20, re-ordered; its best BM25 hit normalises to 1
    assert {h.eq_id for h in hits} == {h.eq_id for h in bm25.hits}
    explained = {h.eq_id: h.explanation for h in hits}
    assert explained[bm25.hits[0].eq_id].bm25_normalized == pytest.approx(1.0)
    assert max(e.knn_normalized for e in explained.values()) == pytest.approx(1.0)
    assert "min_max over the window" in hits[0].explanation.formula
    # alpha 1: the vector alone orders the window; alpha 0: BM25 alone
    by_vector = searcher.search(replace(request, alpha=1.0, explain=False)).hits
    cosines = [explained[h.eq_id].knn for h in by_vector]
    assert cosines == sorted(cosines, reverse=True)
    by_bm25 = searcher.search(replace(request, alpha=0.0, explain=False)).hits
    assert [h.eq_id for h in by_bm25][:5] == [h.eq_id for h in bm25.hits][:5]


def test_rescore_cosines_are_the_stored_vectors_cosines(
    searcher: Searcher, demo_parsed: list
) -> None:
    # the window's cosines come from the k-NN plugin's knn_score script, not from the vectors
    # in _source: they must be (1 + cos) / 2 of the stored vectors on every supported version
    latex = demo_parsed[QUERY].record.latex
    request = SearchRequest(latex, mode=Mode.RESCORE, k=8, window=30, explain=True)
    hits = searcher.search(request).hits
    query = np.asarray(searcher.encoder.features(latex).vector)
    for hit in hits:
        stored = searcher.client.get(index=searcher.index, id=hit.eq_id)["_source"]
        vector = np.asarray(stored[DEFAULT_FIELD])
        cos = float(query @ vector / np.linalg.norm(query) / np.linalg.norm(vector))
        assert hit.explanation.knn == pytest.approx((1 + cos) / 2, abs=1e-5)
        assert hit.latex == stored["latex"] and hit.doc_id == stored["doc_id"]


@pytest.mark.parametrize("mode", [Mode.FUSION, Mode.RRF])
def test_fusion_explanations_match_the_server_scores(
    searcher: Searcher, demo_parsed: list, mode: Mode
) -> None:
    request = SearchRequest(demo_parsed[QUERY].record.latex, mode=mode, k=6, explain=True)
    assert searcher.search(request).fused == "client"  # the default
    response = searcher.search(replace(request, fusion_side="server"))
    assert response.fused == "server"
    for hit in response.hits:
        e = hit.explanation
        assert e is not None and math.isclose(e.score, hit.score, rel_tol=1e-5)
        assert e.bm25 is not None or e.knn is not None
        if mode is Mode.FUSION and e.bm25 is not None and e.knn is not None:
            assert math.isclose(
                e.score, 0.5 * e.bm25_normalized + 0.5 * e.knn_normalized, rel_tol=1e-5
            )


def test_max_df_leaves_the_most_common_tokens_out_of_bm25(
    client: object, searcher: Searcher, equation_alias: str, demo_parsed: list
) -> None:
    query = demo_parsed[QUERY]
    full = searcher.search(SearchRequest(query.record.latex, mode=Mode.BM25, k=5))
    pruned = searcher.search(SearchRequest(query.record.latex, mode=Mode.BM25, k=5, max_df=0.2))
    assert pruned.parameters["max_df"] == 0.2 and pruned.hits
    kept, dropped = set(pruned.query_tokens), set(full.query_tokens) - set(pruned.query_tokens)
    assert kept and dropped and kept <= set(full.query_tokens)
    total = client.count(index=equation_alias)["count"]  # type: ignore[attr-defined]

    def df(token: str) -> int:
        body = {"query": {"term": {"math_tokens": token}}}
        return client.count(index=equation_alias, body=body)["count"]  # type: ignore[attr-defined]

    assert all(df(t) > 0.2 * total for t in dropped)
    assert all(df(t) <= 0.2 * total for t in kept)
    assert "math>mrow" in dropped  # in every equation
    with pytest.raises(QueryError, match="max_df"):
        searcher.search(SearchRequest("x", mode=Mode.BM25, max_df=0.0))


def test_max_terms_sends_bm25_the_rarest_distinct_tokens(
    client: object, searcher: Searcher, equation_alias: str, demo_parsed: list
) -> None:
    query = demo_parsed[QUERY]
    full = searcher.search(SearchRequest(query.record.latex, mode=Mode.RRF, k=5))
    cut = searcher.search(SearchRequest(query.record.latex, mode=Mode.RRF, k=5, max_terms=6))
    assert cut.parameters["max_terms"] == 6 and cut.hits
    kept = {t for t in cut.query_tokens if not t.startswith("form:")}
    assert len(kept) == 6 < len(set(full.query_tokens))

    def df(token: str) -> int:
        body = {"query": {"term": {"math_tokens": token}}}
        return client.count(index=equation_alias, body=body)["count"]  # type: ignore[attr-defined]

    # structural tags weigh 0.6 of their idf: every kept token outweighs every dropped one
    dropped = set(full.query_tokens) - set(cut.query_tokens)
    assert "math>mrow" in dropped
    assert max(df(t) for t in kept) <= min(df(t) for t in dropped if ">" in t)
    # the query equation itself is still found first on its rare tokens
    assert cut.hits[0].eq_id == query.record.eq_id
    assert searcher.search(
        SearchRequest(query.record.latex, mode=Mode.KNN, k=5, max_terms=6)
    ).parameters == {"k": 5}  # knn has no BM25 side: nothing to cut, nothing reported


def test_bm25s_tokens_are_chosen_on_a_background_thread_while_the_query_embeds(
    searcher: Searcher, demo_parsed: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The query encoder hands the tokens over before it embeds; the token choice (its
    ``_termvectors`` round trip) runs meanwhile and sends BM25 the same tokens."""
    import threading

    # a searcher of its own: the session's may have had its encoder wrapped by an evaluation
    # test (a CachingQueryEncoder, which takes no on_tokens: the choice then follows the query)
    searcher = Searcher(searcher.client, searcher.index)
    query = demo_parsed[QUERY].record.latex
    request = SearchRequest(query, mode=Mode.RRF, k=5, max_terms=6)
    before = searcher.search(request)
    threads: list[str] = []
    select = searcher.token_stats.select

    def recorded(tokens: list[str], **cuts: object) -> list[str]:
        threads.append(threading.current_thread().name)
        return select(tokens, **cuts)  # type: ignore[arg-type]

    monkeypatch.setattr(searcher.token_stats, "select", recorded)
    after = searcher.search(request)
    assert len(threads) == 1 and threads[0].startswith("bm25-tokens")
    assert after.query_tokens == before.query_tokens
    assert [h.eq_id for h in after.hits] == [h.eq_id for h in before.hits]


def test_bad_requests_are_query_errors(searcher: Searcher) -> None:
    with pytest.raises(QueryError, match="unbalanced"):
        searcher.search(SearchRequest(r"\frac{1", mode=Mode.FUSION))
    with pytest.raises(QueryError, match="alpha"):
        searcher.search(SearchRequest("x", mode=Mode.RESCORE, alpha=1.5))
    with pytest.raises(QueryError, match="filter on"):
        searcher.search(
            SearchRequest("x", mode=Mode.BM25, filters=Filters(terms={"latex": ("x",)}))
        )
    with pytest.raises(QueryError, match=f"query model fills {DEFAULT_FIELD}"):
        searcher.search(SearchRequest("x", mode=Mode.KNN, vector_field="vec_gcn_v99"))


def test_a_crafted_query_stays_a_value(
    searcher: Searcher, client: object, equation_alias: str
) -> None:
    count = client.count(index=equation_alias)["count"]  # type: ignore[attr-defined]
    crafted = r'\mathrm{"size": 10000, "script": {"source": "ctx._source.clear()"}} = x'
    for mode in Mode:
        response = searcher.search(
            SearchRequest(crafted, text='"} OR *:* \\', mode=mode, k=3, explain=True)
        )
        assert len(response.hits) <= 3  # ran as match / knn on its own tokens, nothing else
    assert client.count(index=equation_alias)["count"] == count  # type: ignore[attr-defined]


def test_search_command_prints_json_and_text(
    equation_alias: str, demo_parsed: list, capsys: pytest.CaptureFixture[str]
) -> None:
    latex = demo_parsed[QUERY].record.latex
    argv = ["search", latex, "--index", equation_alias, "--mode", "rrf", "-k", "4"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "rrf" and len(data["hits"]) == 4
    assert data["hits"][0]["eq_id"] == demo_parsed[QUERY].eq_id
    # what ran: the shipped profile (its label) and the models, second stage included
    assert data["profile"] == SearchProfile.default().label
    assert data["models"][0] == DEFAULT_CARD.name
    assert SearchProfile.default().rerank  # the shipped profile has a second stage
    assert all(Path(m).stem in data["models"] for m in SearchProfile.default().rerank)
    assert main([*argv, "--explain", "--group"]) == 0
    out = capsys.readouterr().out
    assert "mode rrf" in out and demo_parsed[QUERY].record.doc_id in out and "matched:" in out
    assert f"profile {SearchProfile.default().label}; models {DEFAULT_CARD.name}" in out
    assert main(["search", r"\frac{", "--index", equation_alias]) == 1
    assert "unbalanced" in capsys.readouterr().err
    assert main(["models", "list", "--index", equation_alias]) == 0
    assert f"* {DEFAULT_FIELD}" in capsys.readouterr().out


class _RefusingEncoder:
    """Query features whose every vector the encoder refused (as seq2seq does for a formula
    SymPy cannot read): tokens only."""

    def __init__(self, searcher: Searcher) -> None:
        self.inner = searcher.encoder

    def features(self, latex: str) -> object:
        from mathsearch.opensearch.query_encoder import QueryFeatures

        real = self.inner.features(latex)
        return QueryFeatures(
            tokens=real.tokens,
            vector=None,
            vector_field=DEFAULT_FIELD,
            vectors={},
            refusals={DEFAULT_FIELD: "sympy-unparsable no prefix"},
        )


@pytest.mark.parametrize("mode", [Mode.RRF, Mode.FUSION, Mode.RESCORE, Mode.KNN_RESCORE])
def test_a_hybrid_mode_whose_vectors_were_all_refused_falls_back_to_bm25(
    searcher: Searcher, demo_parsed: list, mode: Mode
) -> None:
    latex = demo_parsed[QUERY].record.latex
    refusing = Searcher(searcher.client, searcher.index, encoder=_RefusingEncoder(searcher))
    response = refusing.search(SearchRequest(latex, mode=mode, k=5))
    bm25 = searcher.search(SearchRequest(latex, mode=Mode.BM25, k=5))
    assert response.mode == "bm25" and response.vector_fields == []
    assert "sympy-unparsable" in response.parameters["fallback"]
    assert [h.eq_id for h in response.hits] == [h.eq_id for h in bm25.hits]
    with pytest.raises(QueryError, match="refused"):  # knn has no BM25 side
        refusing.search(SearchRequest(latex, mode=Mode.KNN, k=5))
    assert "fallback" not in searcher.search(SearchRequest(latex, mode=mode, k=5)).parameters


def test_bm25_runs_no_model(searcher: Searcher, demo_parsed: list) -> None:
    from mathsearch.opensearch.query_encoder import ModelQueryEncoder

    latex = demo_parsed[QUERY].record.latex
    no_model = Searcher(
        searcher.client, searcher.index, encoder=ModelQueryEncoder(model="/nonexistent/gcn.onnx")
    )
    alone = no_model.search(SearchRequest(latex, mode=Mode.BM25, k=5))
    bm25 = searcher.search(SearchRequest(latex, mode=Mode.BM25, k=5))
    assert [h.eq_id for h in alone.hits] == [h.eq_id for h in bm25.hits]
    assert alone.hits[0].eq_id == demo_parsed[QUERY].eq_id
    with pytest.raises(QueryError, match="nonexistent"):  # a vector side does load the model
        no_model.search(SearchRequest(latex, mode=Mode.FUSION, k=5))


def test_id_only_lists_read_ids_from_doc_values_and_rank_alike(
    searcher: Searcher, demo_parsed: list, demo_vectors: list
) -> None:
    from mathsearch.opensearch.queries import NO_FILTERS, bm25_body, hit_id, knn_body

    tokens = list(demo_parsed[QUERY].math_tokens)
    pairs = [
        (bm25_body(tokens, "", size=20, filters=NO_FILTERS, source=(), ids_from=ids_from))
        for ids_from in (None, "eq_id")
    ] + [
        knn_body(DEFAULT_FIELD, demo_vectors[QUERY], size=20, ids_from=ids_from)
        for ids_from in (None, "eq_id")
    ]
    answers = [searcher.run_body(body)["hits"]["hits"] for body in pairs]
    for by_id, by_values in (answers[0:2], answers[2:4]):
        assert all("_id" not in hit and "_source" not in hit for hit in by_values)
        assert [(h["_id"], h["_score"]) for h in by_id] == [
            (hit_id(h, "eq_id"), h["_score"]) for h in by_values
        ]
        assert len(by_id) == 20


@pytest.mark.parametrize("mode", list(Mode))
def test_a_ranking_alone_ranks_alike_without_the_hits_text(
    searcher: Searcher, demo_parsed: list, mode: Mode
) -> None:
    request = SearchRequest(demo_parsed[QUERY].record.latex, mode=mode, k=10, window=20, depth=20)
    full = searcher.search(request).hits
    alone = searcher.search(replace(request, annotate=False)).hits
    assert [(h.eq_id, h.doc_id, h.score) for h in alone] == [
        (h.eq_id, h.doc_id, h.score) for h in full
    ]
    assert all(h.latex for h in full) and any(h.matched_tokens for h in full)
    assert all(not h.latex and not h.matched_tokens and not h.highlight for h in alone)
    assert searcher.source_fields(replace(request, annotate=False)) == ("eq_id", "doc_id")


@pytest.mark.parametrize("mode", list(Mode))
def test_similar_searches_with_the_stored_equation_and_leaves_it_out(
    searcher: Searcher, demo_parsed: list, mode: Mode
) -> None:
    query = demo_parsed[QUERY]
    plain = searcher.search(SearchRequest(query.record.latex, mode=mode, k=9))
    similar = searcher.similar(query.eq_id, SearchRequest("", mode=mode, k=8))
    ids = [hit.eq_id for hit in similar.hits]
    assert len(ids) == 8 and query.eq_id not in ids
    assert similar.parameters["like"] == query.eq_id and "like" not in plain.parameters
    assert similar.query_tokens == plain.query_tokens  # the stored LaTeX, featurised again
    others = [hit.eq_id for hit in plain.hits if hit.eq_id != query.eq_id][:8]
    if mode in (Mode.BM25, Mode.KNN):  # scores of the others do not depend on the query's own
        assert ids == others
    else:  # normalised in the window without the query's own hit: the order may move
        assert len(set(ids) & set(others)) >= 6
    filtered = searcher.similar(
        query.eq_id,
        SearchRequest("", mode=mode, k=3, filters=Filters(doc_ids=(query.record.doc_id,))),
    )
    assert filtered.hits and all(hit.doc_id == query.record.doc_id for hit in filtered.hits)
    assert query.eq_id not in {hit.eq_id for hit in filtered.hits}


def test_similar_to_an_unknown_equation_is_its_own_error(
    searcher: Searcher, equation_alias: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UnknownEquationError, match="no equation 'nope#0'"):
        searcher.similar("nope#0", SearchRequest("", mode=Mode.BM25))
    assert main(["search", "--like", "nope#0", "--index", equation_alias]) == 1
    assert "no equation 'nope#0'" in capsys.readouterr().err
    assert main(["search", "x^2", "--like", "nope#0", "--index", equation_alias]) == 1
    assert "one of them" in capsys.readouterr().err


def test_search_command_like(
    equation_alias: str, demo_parsed: list, capsys: pytest.CaptureFixture[str]
) -> None:
    query = demo_parsed[QUERY]
    argv = ["search", "--like", query.eq_id, "--index", equation_alias, "--mode", "bm25"]
    assert main([*argv, "-k", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["hits"]) == 4 and query.eq_id not in {h["eq_id"] for h in data["hits"]}


@pytest.mark.parametrize("mode", list(Mode))
def test_a_page_further_down_is_the_same_ranking_cut_further_down(
    searcher: Searcher, demo_parsed: list, mode: Mode
) -> None:
    latex = demo_parsed[QUERY].record.latex
    full = searcher.search(SearchRequest(latex, mode=mode, k=12))
    page = searcher.search(SearchRequest(latex, mode=mode, k=4, offset=8))
    assert [(h.eq_id, h.rank) for h in page.hits] == [(h.eq_id, h.rank) for h in full.hits[8:]]
    assert [h.score for h in page.hits] == pytest.approx([h.score for h in full.hits[8:]])
    assert page.parameters["offset"] == 8 and "offset" not in full.parameters
    groups = searcher.search(SearchRequest(latex, mode=mode, k=4, group=True)).groups
    later = searcher.search(SearchRequest(latex, mode=mode, k=2, offset=2, group=True)).groups
    assert groups is not None and later is not None
    assert [(g.doc_id, g.rank) for g in later] == [(g.doc_id, g.rank) for g in groups[2:4]]


def test_pages_beyond_the_ranked_window_or_the_limit_are_query_errors(
    searcher: Searcher, demo_parsed: list
) -> None:
    latex = demo_parsed[QUERY].record.latex
    with pytest.raises(QueryError, match=r"offset \+ k \(105\) must be <= window \(100\)"):
        searcher.search(SearchRequest(latex, mode=Mode.RESCORE, k=10, offset=95))
    with pytest.raises(QueryError, match=r"must be <= depth \(50\)"):
        searcher.search(SearchRequest(latex, mode=Mode.RRF, k=10, offset=45, depth=50))
    with pytest.raises(QueryError, match="offset must lie in"):
        searcher.search(SearchRequest(latex, mode=Mode.BM25, k=10, offset=9995))
    with pytest.raises(QueryError, match="offset must lie in"):
        searcher.search(SearchRequest(latex, mode=Mode.BM25, offset=-1))
    # bm25 and knn rank as deep as asked
    assert len(searcher.search(SearchRequest(latex, mode=Mode.BM25, k=5, offset=150)).hits) == 5
