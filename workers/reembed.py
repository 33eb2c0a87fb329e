"""Re-embed an equation index with another model version, while the old field keeps serving.

The new model's field (from its card, e.g. ``vec_gcn_v2``) is added to the live index; every
equation's LaTeX is read back with a point in time, featurised and embedded, and written with a
partial update of that field only (:func:`mathsearch.opensearch.documents.vector_update_actions`).
Search
keeps using the default field throughout; ``mathsearch models use FIELD`` switches it, and
``mathsearch models drop OLD_FIELD`` removes the old one
(:mod:`mathsearch.opensearch.vector_fields`).
Re-running is a no-op for equations whose vector is already there.

Example::

    report = reembed(connect(), "mathsearch-equations", load_embedder("models/gcn-v2.onnx"))
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch

from mathsearch.core.errors import MappingError
from mathsearch.indexer.opensearch_source import iter_opensearch_index
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import Failure
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import failure_actions, vector_update_actions
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.stored_vectors import VectorStorage, encode_vector
from mathsearch.opensearch.vector_fields import (
    add_vector_field,
    field_storages,
    set_default_vector_field,
)
from mathsearch.runtime.embedders import Embedder, as_embedder
from mathsearch.runtime.families import needs_prefix
from mathsearch.workers.embedding import embedded

logger = logging.getLogger(__name__)


@dataclass
class ReembedReport:
    """What :func:`reembed` did."""

    field: str
    equations: int = 0
    updated: int = 0
    unchanged: int = 0
    # dataclasses.field: the ``field`` attribute above shadows a bare ``field`` for type checkers
    failures: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def reembed(
    client: OpenSearch,
    alias: str,
    embedder: Embedder | Any,
    *,
    featuriser: Featuriser | None = None,
    settings: OpenSearchSettings | None = None,
    make_default: bool = False,
    batch_size: int = 256,
    progress: bool = False,
    storage: str = VectorStorage.HNSW.value,
) -> ReembedReport:
    """Fill ``embedder.vector_field`` for every equation of ``alias`` (see module doc);
    ``embedder`` is an :class:`Embedder` of any family, or what
    :func:`~mathsearch.runtime.embedders.as_embedder` takes (a family, a path, an ``GcnSession``).

    ``storage`` ``float16`` / ``int8`` adds the field for a second stage only: binary doc
    values without an ANN graph (:mod:`mathsearch.opensearch.stored_vectors`), the backfill of
    a re-rank field on a live index. A field the index already has keeps its own storage."""
    settings = settings or OpenSearchSettings.from_env()
    embedder = as_embedder(embedder)
    featuriser = featuriser or Featuriser(with_prefix=needs_prefix([embedder.family]))
    spec = VectorSpec.from_card(embedder.card, storage)
    if make_default and spec.exact_only:
        raise MappingError(f"{spec.field} as {spec.storage} is exact-only: search cannot use it")
    add_vector_field(client, alias, spec, settings=settings)
    kept = field_storages(client, alias)[spec.field]
    writer = BulkWriter(client, settings)
    report = ReembedReport(field=spec.field)
    failures: list[Failure] = []

    def actions() -> Iterator[dict[str, Any]]:
        """Vector updates as the equations are embedded (one writer, one refresh at the end)."""
        records = iter_opensearch_index(client, alias, "latex", mode="latex", progress=progress)
        for item in embedded(featuriser, embedder, _with_ids(records), batch_size):
            if isinstance(item, Failure):
                failures.append(item)
                continue
            parsed, vector = item
            report.equations += 1
            value = encode_vector(vector, kept) if kept.exact_only else vector
            yield from vector_update_actions(alias, spec.field, [parsed.eq_id], [value])

    result = writer.write(actions())
    report.updated = result.created + result.updated
    report.unchanged = result.noop
    failures.extend(
        Failure(eq_id=f.doc_id, doc_id="", stage="write", reason="write-refused", detail=f.reason)
        for f in result.failures
    )
    if failures:
        failures_index = ensure_failures_index(client, settings)
        writer.write(failure_actions(failures_index, failures, target=alias))
    for failure in failures:
        report.failures[failure.reason] = report.failures.get(failure.reason, 0) + 1
    if make_default:
        set_default_vector_field(client, alias, spec.field)
    logger.info("re-embedded %d equations of %s into %s", report.equations, alias, spec.field)
    return report


def _with_ids(records: Any) -> Any:
    """Records read back from the equation index keep the stored equation id."""
    for item in records:
        if not isinstance(item, Failure):
            # the equation index's _id is the equation id: the source reads it as doc_id
            item.eq_id = item.doc_id
        yield item
