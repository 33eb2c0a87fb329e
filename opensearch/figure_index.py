"""The figures index: mapping, idempotent upserts and :func:`index_figures` (no torch).

Fields: ``fig_id`` (the id, derived from document and position), ``doc_id``, ``position``,
``label`` (keyword), ``caption`` and ``mentions`` (text, BM25), ``images`` / ``image``
(keyword paths), ``has_image``, ``references`` (keyword), one ``knn_vector`` per figure model
(``vec_figure_v2``: lucene HNSW, space type from the model card), ``model_versions``,
``source``, ``indexed_at``. Writes are ``update`` + ``upsert`` (a re-run is a no-op, as for
equations: :func:`mathsearch.opensearch.documents.upsert_action`); failure records go to the
failures
index with the figure id (:func:`mathsearch.opensearch.documents.failure_actions`).

Example::

    embedder = load_embedder("figure")
    report = index_figures(client, "mathsearch-figures-test", extract_figures(["papers/"]),
                           embedder)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import TransportError

from mathsearch.core.errors import MappingError
from mathsearch.indexer.figures import FigureRecord
from mathsearch.indexer.records import Failure
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
from mathsearch.opensearch.documents import failure_actions, upsert_action
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index, knn_index_body
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.runtime.embedder_base import written_vector

logger = logging.getLogger(__name__)

__all__ = [
    "FigureIndexReport",
    "ensure_figure_index",
    "figure_actions",
    "figure_index_body",
    "figure_source",
    "index_figures",
]


def figure_properties() -> dict[str, Any]:
    """The non-vector fields of the figures index."""
    return {
        "fig_id": {"type": "keyword"},
        "doc_id": {"type": "keyword"},
        "position": {"type": "integer"},
        "label": {"type": "keyword"},
        "caption": {"type": "text", "similarity": "BM25"},
        "mentions": {"type": "text", "similarity": "BM25"},
        "images": {"type": "keyword"},
        "image": {"type": "keyword"},
        "has_image": {"type": "boolean"},
        "references": {"type": "keyword"},
        "model_versions": {"type": "keyword"},
        "source": {"type": "keyword"},
        "indexed_at": {"type": "date"},
    }


def figure_index_body(
    vectors: Sequence[VectorSpec],
    settings: OpenSearchSettings,
    index_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Settings (k-NN on, ``settings.replicas`` replicas: 0 on the local node, plus
    ``index_settings``) and mapping."""
    return knn_index_body(
        figure_properties(), vectors, settings, {"mathsearch_figures": 1}, index_settings
    )


def ensure_figure_index(
    client: OpenSearch,
    index: str,
    vectors: Sequence[VectorSpec],
    settings: OpenSearchSettings | None = None,
) -> str:
    """Create ``index`` when missing; add missing vector fields (idempotent,
    :func:`mathsearch.opensearch.vector_fields.add_vector_field`).

    Raises:
        MappingError: the index cannot be created, or a vector field exists with another size.
    """
    from mathsearch.opensearch.vector_fields import add_vector_field

    settings = settings or OpenSearchSettings.from_env()
    if not client.indices.exists(index=index):
        try:
            extra = ClusterCapabilities.of(client).index_settings(settings.vector_source)
            client.indices.create(index=index, body=figure_index_body(vectors, settings, extra))
        except TransportError as exc:
            if getattr(exc, "error", "") != "resource_already_exists_exception":
                raise MappingError(f"cannot create {index}: {exc}") from exc
        return index
    for spec in vectors:
        add_vector_field(client, index, spec, settings=settings)
    return index


def figure_source(
    record: FigureRecord | Mapping[str, Any], vectors: Mapping[str, Sequence[float]] | None = None
) -> dict[str, Any]:
    """The indexed document of one figure (``vectors``: field -> this figure's vector)."""
    data = record.to_dict() if isinstance(record, FigureRecord) else dict(record)
    vectors = dict(vectors or {})
    source: dict[str, Any] = {
        "fig_id": data["fig_id"],
        "doc_id": data["doc_id"],
        "position": int(data.get("position", 0)),
        "label": data.get("label") or "",
        "caption": data.get("caption") or "",
        "mentions": " ".join(data.get("mentions") or []),
        "images": list(data.get("images") or []),
        "image": data.get("image") or None,
        "has_image": bool(data.get("image")),
        "references": list(data.get("references") or []),
        "source": data.get("source") or "",
        "model_versions": sorted(vectors),
    }
    for name, vector in vectors.items():
        source[name] = [float(x) for x in vector]
    return source


def figure_actions(
    index: str,
    records: Iterable[FigureRecord | Mapping[str, Any]],
    vectors: Mapping[str, Sequence[Sequence[float] | None]] | None = None,
) -> Iterable[dict[str, Any]]:
    """Upserts of ``records``; ``vectors[field][i]`` is record ``i``'s (None: no vector)."""
    columns = dict(vectors or {})
    for number, record in enumerate(records):
        row = {f: vector for f, v in columns.items() if (vector := v[number]) is not None}
        source = figure_source(record, row)
        yield upsert_action(index, source["fig_id"], source, stamp="indexed_at")


@dataclass
class FigureIndexReport:
    """What :func:`index_figures` did."""

    figures: int = 0
    embedded: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    failures: int = 0
    written: int = 0
    unchanged: int = 0
    write_failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def index_figures(
    client: OpenSearch,
    index: str,
    records: Iterable[FigureRecord | Failure],
    embedder: Any,
    *,
    settings: OpenSearchSettings | None = None,
    batch_size: int = 64,
    refresh: str | None = "end",
) -> FigureIndexReport:
    """Embed and write figures (failure records to the failures index, counted).

    A figure the embedder refuses is still indexed for BM25, without a vector, and counted in
    ``refused`` by reason.
    """
    settings = settings or OpenSearchSettings.from_env()
    spec = VectorSpec.from_card(embedder.card)
    ensure_figure_index(client, index, [spec], settings)
    report = FigureIndexReport()
    figures: list[FigureRecord] = []
    failures: list[Failure] = []
    for record in records:
        if isinstance(record, Failure):
            failures.append(record)
        else:
            figures.append(record)
    report.figures, report.failures = len(figures), len(failures)
    column: list[list[float] | None] = []
    for start in range(0, len(figures), batch_size):
        chunk = figures[start : start + batch_size]
        for result in embedder.embed([r.to_item() for r in chunk]):
            if hasattr(result, "reason"):
                report.refused[result.reason] = report.refused.get(result.reason, 0) + 1
                column.append(None)
            else:
                column.append(written_vector(result))
                report.embedded += 1
    writer = BulkWriter(client, settings, refresh=refresh)
    written = writer.write(figure_actions(index, figures, {spec.field: column}))
    report.written, report.write_failures = written.written, len(written.failures)
    report.unchanged = written.noop
    if failures:
        failures_index = ensure_failures_index(client, settings)
        writer.write(failure_actions(failures_index, failures, target=index))
    logger.info(
        "indexed %d figures into %s (%d embedded, %d failures)",
        report.written,
        index,
        report.embedded,
        report.failures,
    )
    return report
