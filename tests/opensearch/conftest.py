"""Helpers of the tests that build equation indexes (the shared fixtures built on them live in
tests/conftest.py, built once per session)."""

from __future__ import annotations

import uuid
from typing import Any

from opensearchpy import OpenSearch

from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import equation_actions
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec
from mathsearch.runtime.embedders import Embedder


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
