"""The figures index against the real local OpenSearch (unique index, deleted after)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.figures import FigureRecord, extract_figures, figures_of_text
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.figure_index import figure_index_body, index_figures
from mathsearch.opensearch.schema import VectorSpec, failures_index_name
from mathsearch.runtime.embedders import load_embedder

FIGURES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "figures"


@pytest.fixture
def figure_index(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[str]:
    name = f"{settings.index_prefix}-test-fig-{uuid.uuid4().hex[:8]}"
    yield name
    client.indices.delete(index=name, ignore_unavailable=True)
    client.delete(  # the one failure record the test writes for this index
        index=failures_index_name(settings), id=f"{name}/broken#fig0", ignore=404, refresh=True
    )


def test_mapping_follows_the_card(settings: OpenSearchSettings) -> None:
    card = load_embedder("figure", device="cpu").card
    body = figure_index_body([VectorSpec.from_card(card)], settings)
    field = body["mappings"]["properties"]["vec_figure_v2"]
    assert field["type"] == "knn_vector" and field["dimension"] == card.embedding_dim
    assert (
        field["method"]["engine"] == "lucene" and field["method"]["space_type"] == card.space_type
    )
    assert body["mappings"]["properties"]["caption"]["type"] == "text"
    assert body["settings"]["number_of_replicas"] == settings.replicas


@pytest.mark.services
def test_index_figures_writes_counts_and_reruns_as_noop(
    client: OpenSearch, settings: OpenSearchSettings, figure_index: str
) -> None:
    embedder = load_embedder("figure", device="cpu")
    records = list(extract_figures([FIGURES]))
    broken = figures_of_text(r"\begin{figure}\caption{open", "broken")
    empty = figures_of_text(r"\begin{figure}\centering\end{figure}", "empty")
    records += broken + empty
    figures = [r for r in records if isinstance(r, FigureRecord)]
    report = index_figures(client, figure_index, records, embedder, settings=settings)
    assert report.failures == 1 and report.figures == len(figures)
    failures = failures_index_name(settings)
    client.indices.refresh(index=failures)
    stored = client.get(index=failures, id=f"{figure_index}/broken#fig0")["_source"]
    assert stored["reason"] == "unclosed-figure" and stored["index"] == figure_index
    assert report.refused == {"empty-figure": 1}
    assert report.embedded == len(figures) - 1 and report.written == len(figures)
    client.indices.refresh(index=figure_index)
    assert client.count(index=figure_index)["count"] == len(figures)
    doc = client.get(index=figure_index, id="psfrag/pfgguide.tex#fig0")["_source"]
    assert doc["has_image"] and len(doc["vec_figure_v2"]) == embedder.dim
    assert doc["model_versions"] == ["vec_figure_v2"]
    hits = client.search(index=figure_index, body={"query": {"match": {"caption": "psfrag"}}})
    assert hits["hits"]["total"]["value"] >= 1
    knn = client.search(
        index=figure_index,
        body={
            "size": 3,
            "query": {"knn": {"vec_figure_v2": {"vector": doc["vec_figure_v2"], "k": 3}}},
        },
    )
    assert (
        knn["hits"]["hits"][0]["_id"] == "psfrag/pfgguide.tex#fig0"
        or knn["hits"]["hits"][0]["_source"]["vec_figure_v2"] == doc["vec_figure_v2"]
    )
    again = index_figures(client, figure_index, records, embedder, settings=settings)
    assert again.written == len(figures) and again.unchanged == len(figures)
    client.indices.refresh(index=figure_index)
    assert client.count(index=figure_index)["count"] == len(figures)
