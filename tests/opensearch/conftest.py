"""Fixtures of the opensearch tests: the real model's vectors of real equations, in a real index."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from mathsearch.export.embedders import Embedder, load_embedder
from mathsearch.indexer.parse import ParsedEquation
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import equation_actions
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec
from mathsearch.opensearch.searcher import Searcher
from mathsearch.stack.demo import demo_records
from mathsearch.workers.embedding import vectors_of


@pytest.fixture(scope="session")
def encoder() -> Embedder:
    return load_embedder("gcn")


@pytest.fixture(scope="session")
def demo_parsed() -> list[ParsedEquation]:
    """The bundled sample's 206 real hep-th equations, featurised."""
    kept, _ = demo_records()
    return kept


@pytest.fixture(scope="session")
def demo_dicts(demo_parsed: list[ParsedEquation]) -> list[dict[str, Any]]:
    return [p.to_dict() for p in demo_parsed]


@pytest.fixture(scope="session")
def demo_vectors(encoder: Embedder, demo_parsed: list[ParsedEquation]) -> list[list[float]]:
    return vectors_of(encoder, demo_parsed)


def new_alias(settings: OpenSearchSettings) -> str:
    return f"{settings.index_prefix}-test-eq-{uuid.uuid4().hex[:8]}"


def drop_alias(client: OpenSearch, alias: str) -> None:
    client.indices.delete(index=f"{alias}-0*", ignore_unavailable=True)
    client.indices.delete_index_template(name=f"{alias}-template", ignore=404)


def fill(
    client: OpenSearch,
    alias: str,
    settings: OpenSearchSettings,
    encoder: Embedder,
    dicts: list[dict[str, Any]],
    vectors: list[list[float]],
) -> None:
    spec = VectorSpec.from_card(encoder.card)
    ensure_equation_index(client, alias, [spec], settings)
    report = BulkWriter(client, settings, refresh="end").write(
        equation_actions(alias, dicts, {spec.field: vectors})
    )
    assert report.written == len(dicts) and not report.failures


@pytest.fixture
def fresh_alias(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[str]:
    """An unused alias name; its indexes are deleted after the test."""
    alias = new_alias(settings)
    yield alias
    drop_alias(client, alias)


@pytest.fixture(scope="session")
def equation_alias(
    client: OpenSearch,
    settings: OpenSearchSettings,
    encoder: Embedder,
    demo_dicts: list[dict[str, Any]],
    demo_vectors: list[list[float]],
) -> Iterator[str]:
    """A read-only equation index of the 206 sample equations with the default model's vectors
    (field ``DEFAULT_FIELD``)."""
    alias = new_alias(settings)
    fill(client, alias, settings, encoder, demo_dicts, demo_vectors)
    yield alias
    drop_alias(client, alias)


@pytest.fixture(scope="session")
def searcher(client: OpenSearch, equation_alias: str) -> Searcher:
    return Searcher(client, equation_alias)
