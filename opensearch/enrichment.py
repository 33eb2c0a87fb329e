"""Enrichment of a document index a library already runs: ``math.*`` fields, nothing else.

:func:`ensure_math_mapping` adds one object field, ``math``, with put-mapping (the library's own
mappings are untouched; put-mapping can only add):

=====================  ==========================================================
``math.symbols``       keyword: every symbol of the document's equations
``math.tokens``        text, whitespace analyzer: their math tokens (BM25)
``math.equation_count`` integer
``math.eq_ids``        keyword: the equation ids (they join to the equation index)
``math.model``         keyword: the vector field the document vector comes from
``math.index``         keyword: the equation index the ids live in (a job's; the library search
                       reads it to show which equations matched)
``math.vector``        knn_vector: the mean of the equation vectors (HNSW when the index has
                       ``index.knn``; otherwise exact scoring only - ``index.knn`` is static)
=====================  ==========================================================

:func:`enrichment_actions` writes it with partial ``update`` actions (``doc`` = ``{"math":
...}`` only), so no field the library stores is sent; a re-run with the same equations is a
no-op (the cluster's ``detect_noop``: version and source stay as they were).

Example::

    ensure_math_mapping(client, "papers", VectorSpec("vec_gcn_v1", 64, "innerproduct"))
    BulkWriter(client).write(enrichment_actions("papers", groups))
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError, TransportError

from mathsearch.core.errors import MappingError
from mathsearch.opensearch.documents import flat_symbols
from mathsearch.opensearch.schema import VectorSpec

logger = logging.getLogger(__name__)

MATH_FIELD = "math"


@dataclass
class DocumentMath:
    """The equations of one library document, ready to become its ``math`` object."""

    doc_id: str
    eq_ids: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    symbols: set[str] = field(default_factory=set)
    vectors: list[Sequence[float]] = field(default_factory=list)

    def add(self, parsed: Mapping[str, Any], vector: Sequence[float] | None = None) -> None:
        """Add one parsed equation (``ParsedEquation.to_dict()`` form) and its vector."""
        self.eq_ids.append(str(parsed["eq_id"]))
        self.tokens.extend(parsed.get("math_tokens") or [])
        self.symbols.update(flat_symbols(parsed.get("symbols")))
        if vector is not None:
            self.vectors.append(vector)

    def to_math(
        self, model_field: str | None, equations_index: str | None = None
    ) -> dict[str, Any]:
        math: dict[str, Any] = {
            "equation_count": len(self.eq_ids),
            "eq_ids": list(self.eq_ids),
            "tokens": " ".join(self.tokens),
            "symbols": sorted(self.symbols),
        }
        if self.vectors and model_field:
            mean = np.asarray(self.vectors, dtype=np.float64).mean(axis=0)
            math["vector"] = [round(float(x), 6) for x in mean]
            math["model"] = model_field
        if equations_index:
            math["index"] = equations_index
        return math


def math_mapping(spec: VectorSpec | None, *, knn_index: bool) -> dict[str, Any]:
    """The ``math`` object's mapping (see the module docstring)."""
    properties: dict[str, Any] = {
        "symbols": {"type": "keyword"},
        "tokens": {"type": "text", "analyzer": "whitespace"},
        "equation_count": {"type": "integer"},
        "eq_ids": {"type": "keyword"},
        "model": {"type": "keyword"},
        "index": {"type": "keyword"},
    }
    if spec is not None:
        vector: dict[str, Any] = {"type": "knn_vector", "dimension": spec.dimension}
        if knn_index:
            vector["method"] = {"name": "hnsw", "engine": "lucene", "space_type": spec.space_type}
        properties["vector"] = vector
    return {"properties": {MATH_FIELD: {"properties": properties}}}


def index_properties(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level properties of a ``get_mapping`` answer, every index's merged.

    >>> index_properties({"i": {"mappings": {"properties": {"body": {"type": "text"}}}}})
    {'body': {'type': 'text'}}
    """
    merged: dict[str, Any] = {}
    for item in mapping.values():
        merged.update(item.get("mappings", {}).get("properties", {}))
    return merged


def _math_properties(client: OpenSearch, index: str) -> dict[str, Any]:
    properties = index_properties(client.indices.get_mapping(index=index))
    return dict(properties.get(MATH_FIELD, {}).get("properties", {}))


def ensure_math_mapping(client: OpenSearch, index: str, spec: VectorSpec | None = None) -> set[str]:
    """Add the ``math`` mapping to the library's ``index``; the ``math.*`` sub-fields it maps
    afterwards (an older enrichment's exact ``math.vector`` keeps its object as it is).

    Raises:
        MappingError: no such index, or ``math`` already means something else there.
    """
    try:
        settings = client.indices.get_settings(index=index)
    except NotFoundError as exc:
        raise MappingError(f"no index {index} to enrich") from exc
    knn_index = any(
        str(item["settings"]["index"].get("knn", "false")).lower() == "true"
        for item in settings.values()
    )
    wanted = math_mapping(spec, knn_index=knn_index)["properties"][MATH_FIELD]["properties"]
    existing = _math_properties(client, index)
    # only the missing sub-fields: re-sending an existing knn_vector field that has no HNSW
    # method (an index without index.knn) makes the k-NN plugin 2.19 fail with a 500
    missing = {name: value for name, value in wanted.items() if name not in existing}
    if not missing:
        return set(existing)
    exact = existing.get("vector", {})
    if exact and not exact.get("method"):
        # Any later mapping update of an index whose math.vector has no HNSW method fails its
        # shards on the k-NN plugin 2.19 (they re-merge the whole mapping and the plugin's
        # builder lacks the index version): a short red index, failed searches. Such a math
        # object keeps the fields it has (an older enrichment's lacks math.index).
        logger.warning(
            "%s: math.* was enriched before %s existed; left as it is (adding a field to an "
            "exact math.vector fails the index's shards on k-NN 2.19)",
            index,
            ", ".join(f"math.{name}" for name in sorted(missing)),
        )
        return set(existing)
    body = {"properties": {MATH_FIELD: {"properties": missing}}}
    try:
        client.indices.put_mapping(index=index, body=body)
    except TransportError as exc:
        raise MappingError(
            f"cannot add math.* to {index} (does it already have a '{MATH_FIELD}' field of "
            f"another shape?): {exc}"
        ) from exc
    logger.info("%s: math.* mapping in place (vector: %s)", index, "hnsw" if knn_index else "exact")
    return {*existing, *missing}


def math_fields(client: OpenSearch, index: str) -> set[str]:
    """The ``math.*`` sub-fields ``index``'s mapping holds (empty: not enriched)."""
    return set(_math_properties(client, index))


def enrichment_actions(
    index: str,
    documents: Iterable[DocumentMath],
    *,
    model_field: str | None = None,
    equations_index: str | None = None,
) -> Iterator[dict[str, Any]]:
    """One partial update (``doc`` = ``{"math": ...}``) per document; nothing else is sent.
    ``equations_index``: the equation index the documents' ``eq_ids`` live in (``math.index``).

    A document whose ``math`` already holds these values is a no-op (``detect_noop``). A
    document that no longer exists is a per-item failure (``document_missing_exception``),
    never created.
    """
    for document in documents:
        yield {
            "_op_type": "update",
            "_index": index,
            "_id": document.doc_id,
            "doc": {MATH_FIELD: document.to_math(model_field, equations_index)},
            "retry_on_conflict": 3,
        }


def group_by_document(
    parsed: Iterable[Mapping[str, Any]],
    vectors: Sequence[Sequence[float] | None] | None = None,
) -> list[DocumentMath]:
    """Parsed equations grouped by ``doc_id`` (first-seen order), with their vectors (``None``:
    that equation has none)."""
    groups: dict[str, DocumentMath] = {}
    for number, item in enumerate(parsed):
        doc_id = str(item["doc_id"])
        group = groups.setdefault(doc_id, DocumentMath(doc_id=doc_id))
        group.add(item, vectors[number] if vectors is not None else None)
    return list(groups.values())
