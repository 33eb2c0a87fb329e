"""``canon_tokens`` against the real node: an equivalent rewriting found by BM25 alone.

The same small collection (rewritings of the queries among near misses that share more of their
structure, plus real hep-th equations) is indexed twice, with and without canonical forms; BM25
ranks the rewriting first only with them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.searcher import Searcher, SearchRequest
from mathsearch.runtime.embedders import Embedder
from mathsearch.workers.embedding import vectors_of

from .conftest import drop_alias, fill, new_alias

pytestmark = pytest.mark.services

REWRITINGS = {
    # query -> its equivalent rewriting in the collection
    r"x^{-1}": r"\frac{1}{x}",
    r"(a+b)^{2}": r"a^{2}+2ab+b^{2}",
    r"\lnot (a \land b)": r"\lnot a \lor \lnot b",
}
NEAR_MISSES = [
    r"x^{-2}",
    r"x^{-1} y",
    r"\frac{1}{y}",
    r"(a+b)^{3}",
    r"(a-b)^{2}",
    r"a^{2}+b^{2}",
    r"\lnot (a \lor b)",
    r"\lnot a \land \lnot b",
    r"a \land b",
]


def featurise(canonical: bool, latex: list[str]) -> list[ParsedEquation]:
    mode = "fast" if canonical else "off"
    settings = dataclasses.replace(IndexerSettings.from_env(), canonical_form=mode)
    records = [
        EquationRecord(eq_id=f"canon#{i}", doc_id="canon", position=i, latex=text)
        for i, text in enumerate(latex)
    ]
    parsed = Featuriser(settings=settings).parse_batch(records)
    assert all(isinstance(p, ParsedEquation) for p in parsed)
    return parsed  # type: ignore[return-value]


@pytest.fixture(scope="module", params=[True, False], ids=["canonical", "structure-only"])
def indexed(
    request: pytest.FixtureRequest,
    client: OpenSearch,
    settings: OpenSearchSettings,
    encoder: Embedder,
    demo_parsed: list[ParsedEquation],
) -> Iterator[tuple[bool, str, list[str]]]:
    canonical = bool(request.param)
    parsed = featurise(canonical, list(REWRITINGS.values()) + NEAR_MISSES) + demo_parsed[:60]
    dicts = [p.to_dict() for p in parsed]
    if not canonical:
        for d in dicts:
            d.pop("canonical", None)
    alias = new_alias(settings)
    fill(client, alias, settings, encoder, dicts, vectors_of(encoder, parsed))
    yield canonical, alias, [d["eq_id"] for d in dicts]
    drop_alias(client, alias)


def test_bm25_finds_the_equivalent_rewriting_only_with_canonical_forms(
    indexed: tuple[bool, str, list[str]],
    client: OpenSearch,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    canonical, alias, ids = indexed
    monkeypatch.setenv("MATHSEARCH_CANONICAL_FORM", "fast" if canonical else "off")
    searcher = Searcher(client, alias)
    firsts = []
    for i, query in enumerate(REWRITINGS):
        response = searcher.search(SearchRequest(query, mode=Mode.BM25, k=5))
        firsts.append(response.hits[0].eq_id == ids[i])
    if canonical:
        assert all(firsts), firsts
    else:
        assert not all(firsts), "structure alone already finds every rewriting: a weak test"


def test_the_documents_carry_canon_tokens(indexed: tuple[bool, str, list[str]], client) -> None:
    canonical, alias, ids = indexed
    source = client.get(index=alias, id=ids[0])["_source"]
    assert source["canon_tokens"].startswith("form:") if canonical else not source["canon_tokens"]
