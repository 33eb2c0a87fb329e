"""Figure search: the real figures index, the six hybrid modes, the CLI (figure-embeddings seed)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from opensearchpy import OpenSearch

from mathsearch.cli.main import main
from mathsearch.core.errors import QueryError
from mathsearch.indexer.figures import FigureRecord, extract_figures
from mathsearch.opensearch.figure_index import index_figures
from mathsearch.opensearch.figure_search import FigureQueryEncoder
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_fields import FIGURE_FIELDS
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.runtime.embedders import load_embedder

FIGURES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "figures"


@pytest.fixture(scope="module")
def figures_index(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[str]:
    name = f"{settings.index_prefix}-test-figsearch-{uuid.uuid4().hex[:8]}"
    records = [r for r in extract_figures([FIGURES]) if isinstance(r, FigureRecord)]
    report = index_figures(client, name, records, load_embedder("figure", device="cpu"))
    assert report.written == len(records) > 5
    yield name
    client.indices.delete(index=name, ignore_unavailable=True)


def _records() -> list[FigureRecord]:
    return [r for r in extract_figures([FIGURES]) if isinstance(r, FigureRecord)]


_CASES = [(m, "client") for m in Mode] + [(Mode.FUSION, "server"), (Mode.RRF, "server")]


@pytest.mark.services
@pytest.mark.parametrize(("mode", "side"), _CASES)
def test_every_mode_answers_with_figures(
    client: OpenSearch, figures_index: str, mode: Mode, side: str
) -> None:
    searcher = Searcher(client, figures_index, encoder=FigureQueryEncoder(), fields=FIGURE_FIELDS)
    target = max(_records(), key=lambda r: len(r.caption.split()))
    response = searcher.search(
        SearchRequest(target.caption, mode=mode, k=5, fusion_side=side, explain=True)
    )
    ids = [hit.eq_id for hit in response.hits]
    assert ids and all("#fig" in i for i in ids)
    assert len(ids) == len(set(ids))
    if mode != Mode.KNN:  # a caption as the query: BM25 (alone or fused) puts its figure first
        assert ids[0] == target.fig_id, (mode, ids)
    if mode in (Mode.KNN, Mode.RESCORE, Mode.FUSION):
        assert response.hits[0].explanation is not None


@pytest.mark.services
def test_knn_of_a_figure_caption_ranks_by_the_figure_vector(
    client: OpenSearch, figures_index: str
) -> None:
    embedder = load_embedder("figure", device="cpu")
    records = _records()
    query = records[0].caption
    vectors = embedder.embed([{"caption": query, "mentions": [], "image": None}])
    mine = vectors[0]
    searcher = Searcher(client, figures_index, encoder=FigureQueryEncoder(), fields=FIGURE_FIELDS)
    hits = searcher.search(SearchRequest(query, mode=Mode.KNN, k=len(records))).hits
    stored = embedder.embed([r.to_item() for r in records])

    def score(v: np.ndarray) -> float:  # the card's similarity: the index's kNN space
        if embedder.card.similarity == "cosine":
            return float(mine @ v / (np.linalg.norm(mine) * np.linalg.norm(v)))
        return float(mine @ v)

    by_id = {r.fig_id: score(v) for r, v in zip(records, stored, strict=True)}
    expected = sorted(by_id, key=by_id.get, reverse=True)[:3]
    assert [h.eq_id for h in hits[:3]] == expected


def test_a_query_without_words_is_refused() -> None:
    with pytest.raises(QueryError, match="no words"):
        FigureQueryEncoder().features("  ,; ")


def test_figure_words_alone_load_no_model() -> None:
    alone = FigureQueryEncoder("/nonexistent/figure.onnx").features("energy spectrum", embed=False)
    assert alone.tokens == ["energy", "spectrum"] and alone.by_field() == {}
    with pytest.raises(QueryError, match="figure encoder"):
        FigureQueryEncoder("/nonexistent/figure.onnx").features("energy spectrum")


@pytest.mark.services
def test_the_cli_indexes_idempotently_and_searches(
    settings: OpenSearchSettings, client: OpenSearch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"{settings.index_prefix}-test-figcli-{uuid.uuid4().hex[:8]}"
    try:
        assert main(["figures", "index", str(FIGURES), "--index", name, "--json"]) == 0
        first = json.loads(capsys.readouterr().out)
        assert first["written"] == first["figures"] > 5 and first["embedded"] == first["figures"]
        assert main(["figures", "index", str(FIGURES), "--index", name, "--json"]) == 0
        again = json.loads(capsys.readouterr().out)
        assert again["unchanged"] == first["figures"]
        target = max(_records(), key=lambda r: len(r.caption.split()))
        args = ["figures", "search", target.caption, "--index", name, "--mode", "rrf", "--json"]
        assert main(args) == 0
        hits = json.loads(capsys.readouterr().out)["hits"]
        assert hits[0]["eq_id"] == target.fig_id
        assert main(["figures", "search", "x", "--index", f"{name}-none"]) == 1
        assert "figures index" in capsys.readouterr().err
        # an index of the superseded figure-v1 is searched by its own field with --model
        old = ["--index", f"{name}-v1", "--model", "figure-v1.onnx"]
        assert main(["figures", "index", str(FIGURES), *old, "--json"]) == 0
        capsys.readouterr()
        assert main(["figures", "search", target.caption, *old, "--mode", "knn", "--json"]) == 0
        found = json.loads(capsys.readouterr().out)
        assert found["vector_field"] == "vec_figure_v1"
        assert found["hits"][0]["eq_id"] == target.fig_id
        # without --model the shipped figure-v2 has no field there: one line naming the model
        assert main(["figures", "search", target.caption, "--index", f"{name}-v1"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "search it with --model figure-v1.onnx" in err
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)
        client.indices.delete(index=f"{name}-v1", ignore_unavailable=True)
