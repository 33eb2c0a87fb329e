"""Enrich a document index a library already runs with ``math.*`` fields (plain function).

Reads the library's documents with a point in time (:mod:`mathsearch.indexer.opensearch_source`),
finds
their equations, featurises and embeds them in batches, and streams one partial update per
document as soon as its equations are done (memory stays flat on large indexes)
(:mod:`mathsearch.opensearch.enrichment`): nothing the library stores is rewritten. Equations that
fail
become failure records in the failures index, with their reason. Runs without a broker; the
Celery pipeline (``mathsearch index``) calls the same pieces.

Example::

    report = enrich_index(connect(), "papers", "body", mode="text")
    report.documents, report.equations, report.failures
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from opensearchpy import OpenSearch

from mathsearch.indexer.opensearch_source import iter_opensearch_index
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import Failure
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import failure_actions
from mathsearch.opensearch.enrichment import DocumentMath, enrichment_actions, ensure_math_mapping
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.runtime.embedders import Embedder, as_embedder
from mathsearch.runtime.families import needs_prefix
from mathsearch.workers.embedding import embedded

logger = logging.getLogger(__name__)


@dataclass
class EnrichReport:
    """What :func:`enrich_index` did."""

    index: str
    documents: int = 0
    equations: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    written: int = 0
    unchanged: int = 0
    write_failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def enrich_index(
    client: OpenSearch,
    index: str,
    field_name: str,
    *,
    mode: Literal["latex", "text"] = "text",
    encoder: Embedder | Any = None,
    featuriser: Featuriser | None = None,
    settings: OpenSearchSettings | None = None,
    batch_size: int = 256,
) -> EnrichReport:
    """Add ``math.*`` to every document of ``index`` whose ``field_name`` holds equations.

    ``encoder``: an :class:`Embedder` of any family, or what
    :func:`~mathsearch.runtime.embedders.as_embedder` takes (a family, an ``.onnx`` path, an
    ``GcnSession``); default the graph CNN. Documents without equations are left alone (not even a
    partial update).
    """
    settings = settings or OpenSearchSettings.from_env()
    embedder = as_embedder(encoder)  # None: the default graph CNN
    featuriser = featuriser or Featuriser(with_prefix=needs_prefix([embedder.family]))
    spec = VectorSpec.from_card(embedder.card)
    ensure_math_mapping(client, index, spec)
    failures_index = ensure_failures_index(client, settings)
    writer = BulkWriter(client, settings)
    report = EnrichReport(index=index)
    failures: list[Failure] = []

    def documents() -> Iterator[DocumentMath]:
        """Documents as soon as they are complete: a document's equations come together."""
        current: DocumentMath | None = None
        items = iter_opensearch_index(client, index, field_name, mode=mode)
        for item in embedded(featuriser, embedder, items, batch_size):
            if isinstance(item, Failure):
                failures.append(item)
                continue
            parsed, vector = item
            if current is None or parsed.record.doc_id != current.doc_id:
                if current is not None:
                    yield current
                current = DocumentMath(doc_id=parsed.record.doc_id)
            current.add(parsed.to_dict(), vector)
            report.equations += 1
        if current is not None:
            yield current

    def counted(stream: Iterator[DocumentMath]) -> Iterator[DocumentMath]:
        for document in stream:
            report.documents += 1
            yield document

    result = writer.write(enrichment_actions(index, counted(documents()), model_field=spec.field))
    if failures:
        writer.write(failure_actions(failures_index, failures, target=index))
    for failure in failures:
        report.failures[failure.reason] = report.failures.get(failure.reason, 0) + 1
    report.written = result.created + result.updated
    report.unchanged = result.noop
    report.write_failures = [f.to_dict() for f in result.failures]
    logger.info(
        "enriched %d documents of %s (%d equations, %d failures)",
        report.documents,
        index,
        report.equations,
        len(failures),
    )
    return report
