"""Wildcard searches (opensearch/wildcard_search.py): the window ranked by the structural match,
hits with their bindings, against the real node's 206 sample equations; the ranking itself as a
pure function, golden."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.core.errors import QueryError
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.query_variables import QVAR_TAG, parse_pattern
from mathsearch.indexer.unify import equal_trees, subtree_latex, unify
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.library_search import math_query
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.query_encoder import ModelQueryEncoder
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.opensearch.wildcard_search import rank_window, wildcard_pattern


@pytest.fixture(scope="module")
def featuriser() -> Featuriser:
    return Featuriser()


def _tree(featuriser: Featuriser, latex: str) -> MathNode:
    (converted,) = featuriser.converter.convert_batch([latex])
    return converted.tree  # type: ignore[union-attr]


def test_the_window_ranks_exact_before_contained_before_partial(featuriser: Featuriser) -> None:
    pattern = parse_pattern(r"?a^{2} + ?b^{2}", featuriser)
    window = [
        r"\alpha + \beta",  # partial (no squares)
        r"E = x^{2} + y^{2}",  # contained: the right-hand side
        None,  # a candidate whose LaTeX did not convert
        r"x^{2} + y^{2}",  # exact
        r"\sin^{2} x",  # little or nothing
    ]
    trees = [_tree(featuriser, latex) if latex else None for latex in window]
    ranked = rank_window(pattern, trees)
    assert [i for i, _ in ranked][:2] == [3, 1]
    kinds = {i: m.kind for i, m in ranked}
    assert kinds[3] == "exact" and kinds[1] == "contained" and kinds[2] == "none"
    scores = [m.score for _, m in ranked]
    assert scores == sorted(scores, reverse=True)
    exact = dict(ranked)[3]
    assert {k: v.replace(" ", "") for k, v in exact.bindings_latex().items()} == {
        "a": "x",
        "b": "y",
    }


def test_ties_keep_the_first_stage_order(featuriser: Featuriser) -> None:
    pattern = parse_pattern(r"\frac{?x}{2}", featuriser)
    trees = [_tree(featuriser, latex) for latex in (r"\frac{a}{2}", r"\frac{b}{2}", r"\frac{c}{2}")]
    assert [i for i, _ in rank_window(pattern, trees)] == [0, 1, 2]


def test_partial_matches_are_looked_for_in_the_partial_window_only(
    featuriser: Featuriser,
) -> None:
    pattern = parse_pattern(r"?a^{2} + ?b^{2} = ?c^{2}", featuriser)
    window = [r"\sin \theta", r"x^{2} + y^{2} - z", r"x^{2} + y^{2} - w", r"u^{2} + v^{2} = t^{2}"]
    trees = [_tree(featuriser, latex) for latex in window]
    kinds = dict((i, m.kind) for i, m in rank_window(pattern, trees, partial_window=2))
    # a part is looked for in the first two only; a whole match counts anywhere
    assert kinds == {0: "none", 1: "partial", 2: "none", 3: "exact"}
    ranked = rank_window(pattern, trees, whole=[True, True, True, False])
    assert dict(ranked)[3].kind == "partial"  # known not to match whole: no whole attempt
    assert [i for i, _ in rank_window(pattern, trees, partial_window=2)][:2] == [3, 1]


def test_a_wildcard_mode_must_be_a_mode_or_same() -> None:
    assert SearchRequest("?x + 1").wildcard_first_mode is Mode.BM25  # the default
    same = SearchRequest("?x + 1", mode=Mode.KNN, wildcard_mode="same")
    assert same.wildcard_first_mode is Mode.KNN
    assert SearchRequest("?x", wildcard_mode=Mode.RRF).wildcard_mode == "rrf"
    with pytest.raises(QueryError, match="wildcard_mode"):
        SearchRequest("?x + 1", wildcard_mode="grep").validate()


def test_a_query_of_variables_alone_is_a_clear_query_error(featuriser: Featuriser) -> None:
    with pytest.raises(QueryError, match="wildcard query"):
        wildcard_pattern("?x", featuriser)


def test_math_query_of_a_pattern_is_its_first_stage_clause() -> None:
    encoder = ModelQueryEncoder()
    clause = math_query(r"?a^{2} + \sin ?b", encoder=encoder, k=7)
    match, knn = clause["bool"]["should"]
    tokens = str(match["match"]["math.tokens"]["query"]).split()
    assert tokens and not any("qvar" in t or "?" in t for t in tokens)
    assert any("sin" in t for t in tokens)  # the structure without a variable stays
    assert knn["knn"]["math.vector"]["k"] == 7


def _pattern_of(featuriser: Featuriser, latex: str) -> tuple[str, str] | None:
    """A pattern from a real equation: its first identifier, everywhere it occurs, made the
    variable ``?x``; ``(pattern latex, bound latex)``, or None when it does not round-trip."""
    tree = _tree(featuriser, latex)
    first = next((n for n in _walk(tree) if n.tag == "mi" and n.text), None)
    if first is None:
        return None

    def swap(node: MathNode) -> MathNode:
        if node.tag == "mi" and equal_trees(node, first):
            return MathNode(QVAR_TAG, text="x")
        return MathNode(node.tag, node.attrs, [swap(c) for c in node.children], node.text)

    pattern_tree = swap(tree)
    pattern = subtree_latex(pattern_tree, variables="question")
    try:
        parsed = parse_pattern(pattern, featuriser)
    except Exception:
        return None
    if not equal_trees(parsed.tree, pattern_tree) or unify(parsed.tree, tree) is None:
        return None
    return pattern, subtree_latex(first)


def _walk(node: MathNode) -> list[MathNode]:
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out


@pytest.fixture(scope="module")
def indexed_pattern(
    client: OpenSearch, equation_alias: str, featuriser: Featuriser
) -> dict[str, Any]:
    """A real indexed equation with structure, and a pattern made from it."""
    found = client.search(
        index=equation_alias,
        body={"size": 200, "sort": [{"eq_id": "asc"}], "_source": ["eq_id", "latex"]},
    )
    for hit in found["hits"]["hits"]:
        latex = hit["_source"]["latex"]
        if not 25 <= len(latex) <= 90:
            continue
        made = _pattern_of(featuriser, latex)
        if made is not None:
            return {"eq_id": hit["_source"]["eq_id"], "latex": latex, "pattern": made[0],
                    "bound": made[1]}  # fmt: skip
    raise AssertionError("no sample equation gave a pattern")


@pytest.fixture(scope="module")
def api_client(settings: OpenSearchSettings, client: OpenSearch, equation_alias: str) -> Any:
    from fastapi.testclient import TestClient

    from mathsearch.serve.http_api import create_app

    return TestClient(create_app(replace(settings, serve_rate=0), equation_alias, client=client))


@pytest.mark.services
def test_a_wildcard_search_finds_the_source_equation_with_its_bindings(
    searcher: Searcher, indexed_pattern: dict[str, Any]
) -> None:
    request = SearchRequest(indexed_pattern["pattern"], mode=Mode.RRF, k=10)
    response = searcher.search(request)
    top = response.hits[0]
    by_id = {hit.eq_id: hit for hit in response.hits}
    source = by_id[indexed_pattern["eq_id"]]  # the equation the pattern was made from
    assert source.match == "exact" and source.score == 1.0
    assert source.bindings is not None and "x" in source.bindings
    assert top.match == "exact"  # nothing ranks above a whole-equation match
    kinds = [hit.match for hit in response.hits]
    order = ["exact", "contained", "partial", "none"]
    assert [order.index(k) for k in kinds] == sorted(order.index(k) for k in kinds)
    wildcard = response.parameters["wildcard"]
    assert wildcard["variables"] == ["x"] and wildcard["exact"] >= 1
    assert "structural" in response.stages_ms
    # no variable in the first stage's BM25 tokens
    assert not any("qvar" in token for token in response.query_tokens)


@pytest.mark.services
def test_the_ntcir_form_and_the_question_mark_form_search_alike(
    searcher: Searcher, indexed_pattern: dict[str, Any]
) -> None:
    pattern = indexed_pattern["pattern"]
    ntcir = pattern.replace("?x", r"\qvar{x}")
    a = searcher.search(SearchRequest(pattern, mode=Mode.RRF, k=5))
    b = searcher.search(SearchRequest(ntcir, mode=Mode.RRF, k=5))
    assert [(h.eq_id, h.match) for h in a.hits] == [(h.eq_id, h.match) for h in b.hits]


@pytest.mark.services
def test_the_api_returns_bindings_and_refuses_a_pattern_of_variables_alone(
    api_client: Any, indexed_pattern: dict[str, Any]
) -> None:
    body = {"latex": indexed_pattern["pattern"], "mode": "rrf", "k": 5}
    response = api_client.post("/search", json=body)
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    source = next(h for h in hits if h["eq_id"] == indexed_pattern["eq_id"])
    assert source["match"] == "exact" and "x" in source["bindings"]
    plain = api_client.post("/search", json={**body, "latex": indexed_pattern["latex"]})
    assert plain.json()["hits"][0].get("bindings") is None  # a plain query's hits: none
    refused = api_client.post("/search", json={**body, "latex": "?x"})
    assert refused.status_code in (400, 422) and "variable" in refused.text


@pytest.mark.services
def test_the_check_finds_every_whole_match_a_full_check_finds(
    searcher: Searcher, indexed_pattern: dict[str, Any], featuriser: Featuriser
) -> None:
    """Skipping the candidates whose symbols rule out a whole match loses none: the hits'
    whole matches are those of unifying the whole window, and the shown hits are annotated."""
    request = SearchRequest(indexed_pattern["pattern"], k=40)
    response = searcher.search(request)
    assert response.parameters["wildcard"]["first_stage"] == "bm25"
    pattern = parse_pattern(indexed_pattern["pattern"], featuriser)
    first = searcher.search(
        SearchRequest(pattern.neutral_latex, mode=Mode.BM25, k=100),
        tokens=list(pattern.structure_tokens),
    )
    trees = [_tree(featuriser, hit.latex) for hit in first.hits]
    brute = {
        first.hits[i].eq_id
        for i, m in rank_window(pattern, trees)
        if m.kind in ("exact", "contained")
    }
    found = {hit.eq_id for hit in response.hits if hit.match in ("exact", "contained")}
    assert brute and found == brute
    assert all(hit.latex and hit.doc_id for hit in response.hits)
    assert any(hit.matched_tokens for hit in response.hits)
    assert {"window", "structural", "annotate"} <= set(response.stages_ms)
    # a ranking alone (an evaluation run's request) is ranked by the same check
    bare = searcher.search(replace(request, annotate=False))
    assert [(h.eq_id, h.match) for h in bare.hits] == [(h.eq_id, h.match) for h in response.hits]
    assert not any(hit.latex for hit in bare.hits)


@pytest.mark.services
def test_the_wildcard_mode_chooses_the_first_stage(
    searcher: Searcher, indexed_pattern: dict[str, Any], api_client: Any
) -> None:
    same = searcher.search(
        SearchRequest(indexed_pattern["pattern"], mode=Mode.KNN, k=5, wildcard_mode="same")
    )
    assert same.parameters["wildcard"]["first_stage"] == "knn"
    assert same.vector_fields  # the kNN first stage searched a vector field; BM25 searches none
    body = {"latex": indexed_pattern["pattern"], "k": 5, "wildcard_mode": "rrf"}
    response = api_client.post("/search", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["parameters"]["wildcard"]["first_stage"] == "rrf"
    refused = api_client.post("/search", json={**body, "wildcard_mode": "grep"})
    assert refused.status_code in (400, 422) and "wildcard_mode" in refused.text
