"""Zero-downtime re-embedding: one vector field per model version, a default, and drops.

A new model version gets its own field (``vec_gcn_v2`` beside ``vec_gcn_v1``), added to the live
index with put-mapping while the old field keeps answering queries. Re-embedding fills it with
partial updates (:func:`mathsearch.workers.reembed.reembed`); search keeps using the default field
until
one command switches it (:func:`set_default_vector_field`, ``mathsearch models use``). An old
field is dropped by rebuilding the index without it into the next version
(``<alias>-000002``) and swapping the alias atomically (:func:`drop_vector_field`): readers see
the old index until the swap and the new one after it, never nothing.

Example::

    add_vector_field(client, "mathsearch-equations", VectorSpec("vec_gcn_v2", 64, "innerproduct"))
    ...  # re-embed
    set_default_vector_field(client, "mathsearch-equations", "vec_gcn_v2")
    drop_vector_field(client, "mathsearch-equations", "vec_gcn_v1")
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import TransportError

from mathsearch.core.errors import MappingError
from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
from mathsearch.opensearch.schema import (
    VectorSpec,
    index_meta,
    put_equation_template,
    resolve_alias,
    versioned_name,
)
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.stored_vectors import VectorStorage

logger = logging.getLogger(__name__)


def vector_fields(client: OpenSearch, alias: str) -> dict[str, dict[str, Any]]:
    """The vector fields recorded in the index's ``_meta`` (field -> spec as a dict)."""
    return dict(index_meta(client, alias).get("vector_fields") or {})


def default_vector_field(client: OpenSearch, alias: str) -> str:
    """The field that search uses when none is named.

    Raises:
        MappingError: the index has no vector field.
    """
    meta = index_meta(client, alias)
    field = meta.get("default_vector_field")
    if not field:
        raise MappingError(f"{alias} has no vector field; index with a model first")
    return str(field)


def _live_mapping(client: OpenSearch, alias: str) -> dict[str, Any]:
    found = client.indices.get_mapping(index=alias)
    return next(iter(found.values()))["mappings"]


def add_vector_field(
    client: OpenSearch,
    alias: str,
    spec: VectorSpec,
    *,
    settings: OpenSearchSettings | None = None,
    make_default: bool = False,
) -> bool:
    """Add ``spec.field`` to the live index (no-op when it exists with the same shape).

    Returns True when the field was added. Raises :class:`MappingError` when the field exists
    with another dimension or space type.
    """
    settings = settings or OpenSearchSettings.from_env()
    mapping = _live_mapping(client, alias)
    existing = mapping.get("properties", {}).get(spec.field)
    meta = dict(mapping.get("_meta") or {})
    if existing is not None:
        _check_existing(alias, spec, existing, dict(meta.get("vector_fields") or {}))
        if make_default and meta.get("default_vector_field") != spec.field:
            set_default_vector_field(client, alias, spec.field)
        return False
    fields = dict(meta.get("vector_fields") or {})
    fields[spec.field] = asdict(spec)
    meta["vector_fields"] = fields
    if spec.exact_only and make_default:
        raise MappingError(
            f"{spec.field} is exact-only (no ANN graph): search cannot default to it"
        )
    if not spec.exact_only and (make_default or not meta.get("default_vector_field")):
        meta["default_vector_field"] = spec.field
    try:
        client.indices.put_mapping(
            index=alias,
            body={"_meta": meta, "properties": {spec.field: spec.mapping(settings)}},
        )
    except TransportError as exc:
        raise MappingError(f"cannot add {spec.field} to {alias}: {exc}") from exc
    _sync_template(client, alias)
    logger.info(
        "added vector field %s (%d-d, %s) to %s", spec.field, spec.dimension, spec.storage, alias
    )
    return True


def _check_existing(
    alias: str, spec: VectorSpec, existing: dict[str, Any], recorded: dict[str, Any]
) -> None:
    """Refuse a spec that does not fit the field the index already has. A kNN field serves
    an exact-only spec too (the second stage scores it with the k-NN plugin's script)."""
    if existing.get("type") == "binary":
        before = dict(recorded.get(spec.field) or {})
        dimension, space = before.get("dimension"), before.get("space_type")
        if not spec.exact_only:
            raise MappingError(
                f"{alias}.{spec.field} exists as an exact-only field (no ANN graph): drop it "
                f"(`mathsearch models drop {spec.field}`) before adding it as a kNN field"
            )
    else:
        dimension = existing.get("dimension")
        space = existing.get("method", {}).get("space_type")
    if dimension != spec.dimension or space != spec.space_type:
        raise MappingError(
            f"{alias}.{spec.field} exists as {dimension}-d {space}, not {spec.dimension}-d "
            f"{spec.space_type}: give the new model version a new field"
        )


def field_storages(client: OpenSearch, alias: str) -> dict[str, VectorStorage]:
    """How the index keeps each of its vector fields: a ``knn_vector`` is ``hnsw``; a
    ``binary`` vector field the storage its ``_meta`` records (float16 when unrecorded)."""
    mapping = _live_mapping(client, alias)
    recorded = dict((mapping.get("_meta") or {}).get("vector_fields") or {})
    out: dict[str, VectorStorage] = {}
    for name, prop in (mapping.get("properties") or {}).items():
        if prop.get("type") == "knn_vector":
            out[name] = VectorStorage.HNSW
        elif prop.get("type") == "binary" and name.startswith("vec_"):
            storage = (recorded.get(name) or {}).get("storage") or VectorStorage.FLOAT16.value
            out[name] = VectorStorage.parse(storage)
    return out


def set_default_vector_field(client: OpenSearch, alias: str, field: str) -> None:
    """Make ``field`` the one search uses by default (one mapping update, atomic)."""
    mapping = _live_mapping(client, alias)
    if field not in mapping.get("properties", {}):
        known = sorted(vector_fields(client, alias))
        raise MappingError(f"{alias} has no field {field}; vector fields: {', '.join(known)}")
    if mapping["properties"][field].get("type") != "knn_vector":
        raise MappingError(
            f"{alias}.{field} is exact-only (no ANN graph, read by a second stage): search "
            "cannot default to it; add the model as a kNN field (`models add` without --rerank)"
        )
    meta = dict(mapping.get("_meta") or {})
    meta["default_vector_field"] = field
    client.indices.put_mapping(index=alias, body={"_meta": meta})
    _sync_template(client, alias)
    logger.info("%s now searches %s by default", alias, field)


def drop_vector_field(client: OpenSearch, alias: str, field: str) -> str:
    """Rebuild the index without ``field`` into the next version and swap the alias.

    The old index keeps serving until the alias moves (one atomic ``_aliases`` call), then it is
    deleted. Writes that reach the old index during the rebuild are lost with it: pause
    writers, or re-run the (idempotent) indexing job afterwards. Returns the new index name.
    """
    old = resolve_alias(client, alias)
    if old is None:
        raise MappingError(f"no alias {alias}")
    mapping = _live_mapping(client, alias)
    meta = dict(mapping.get("_meta") or {})
    if meta.get("default_vector_field") == field:
        raise MappingError(f"{field} is the default of {alias}: switch the default first")
    properties = dict(mapping.get("properties", {}))
    if field not in properties:
        raise MappingError(f"{alias} has no field {field}")
    del properties[field]
    fields = dict(meta.get("vector_fields") or {})
    fields.pop(field, None)
    meta["vector_fields"] = fields
    version = int(old.rsplit("-", 1)[1]) + 1 if old.rsplit("-", 1)[-1].isdigit() else 1
    new = versioned_name(alias, version)
    new_mapping = {**mapping, "_meta": meta, "properties": properties}
    # the template first: an index created from it must not bring the dropped field back
    put_equation_template(client, alias, _index_settings(client, old), new_mapping)
    client.indices.create(index=new, body={})
    try:
        copied = _copy_without(client, old, new, field)
    except Exception:
        client.indices.delete(index=new, ignore_unavailable=True)
        _sync_template(client, alias)
        raise
    client.indices.update_aliases(
        body={
            "actions": [
                {"remove": {"index": old, "alias": alias}},
                {"add": {"index": new, "alias": alias}},
            ]
        }
    )
    client.indices.delete(index=old)
    logger.info("dropped %s: %s -> %s (%d documents)", field, old, new, copied)
    return new


def _sync_template(client: OpenSearch, alias: str) -> None:
    """Make the alias's index template hold the live index's settings and mapping."""
    concrete = resolve_alias(client, alias)
    if concrete is None:
        return
    put_equation_template(
        client, alias, _index_settings(client, concrete), _live_mapping(client, alias)
    )


def _index_settings(client: OpenSearch, concrete: str) -> dict[str, Any]:
    """The settings a new version inherits: k-NN on, the same shards, replicas, stored-fields
    codec and vector source (derived or stored) as the live one."""
    live = client.indices.get_settings(index=concrete, flat_settings=True)
    current = live[concrete]["settings"]
    derived = str(current.get("index.knn.derived_source.enabled", "false")) == "true"
    vector_source = "derived" if derived else "stored"
    codec = current.get("index.codec")
    return {
        "index.knn": True,
        "number_of_shards": int(current["index.number_of_shards"]),
        "number_of_replicas": int(current["index.number_of_replicas"]),
        **({"codec": codec} if codec and codec != "default" else {}),
        **ClusterCapabilities.of(client).index_settings(vector_source),
    }


def _copy_without(client: OpenSearch, old: str, new: str, field: str) -> int:
    """Copy every document of ``old`` into ``new`` without ``field`` (client-side: the
    ``_reindex`` API is a module that a minimal cluster, like the local one, may not have)."""
    from mathsearch.opensearch.bulk_writer import BulkWriter

    def actions() -> Any:
        for hit in helpers.scan(client, index=old, query={"query": {"match_all": {}}}, size=500):
            source = hit["_source"]
            source.pop(field, None)
            if isinstance(source.get("model_versions"), list):
                source["model_versions"] = [v for v in source["model_versions"] if v != field]
            yield {"_op_type": "index", "_index": new, "_id": hit["_id"], "_source": source}

    report = BulkWriter(client, refresh="end").write(actions())
    if report.failures:
        raise MappingError(
            f"rebuilding {old} without {field} failed for {len(report.failures)} documents: "
            f"{report.failures[0].reason}"
        )
    return report.written
