"""Index mappings: the versioned equation index behind its alias, vector fields, failures index.

The equation index is ``<alias>-000001`` (then ``-000002`` ... when it is rebuilt) behind the alias
``<alias>`` (default ``<prefix>-equations``); readers and writers only ever use the alias. Every
version is created from the index template ``<alias>-template`` (pattern ``<alias>-0*``), which
holds the settings and the current mapping. Fields (docs/opensearch.md, "The equation index"):
``eq_id``, ``doc_id``, ``section``, ``position``, ``latex``, ``mathml`` (stored, not indexed),
``math_tokens`` and ``canon_tokens`` (normal forms that equivalent formulas share,
:mod:`mathsearch.indexer.canonical_form`; both whitespace analyzer, BM25), ``symbols`` and
``keywords`` (keyword), ``context`` (text), one ``knn_vector`` per encoder and model version (lucene
HNSW, space type from the model card) or, for a field a second stage only reads back, one ``binary``
doc-values field (float16 or int8 bytes, no ANN graph: :mod:`mathsearch.opensearch.stored_vectors`),
``model_versions`` (the fields the equation has a vector in), ``embed_refusals`` (keyword,
``<field>:<reason>`` for each encoder of a several-encoder job that refused the equation) and
``indexed_at``.

The index's ``_meta`` records the schema version, the vector fields with their models, and the
default vector field that search uses (see :mod:`mathsearch.opensearch.vector_fields`);
:mod:`mathsearch.opensearch.equation_index` creates and upgrades the index.

Example::

    spec = VectorSpec.from_card(load_card("export/models/gcn-v7.onnx"))
    index = ensure_equation_index(client, "mathsearch-equations", [spec])
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError, TransportError

from mathsearch.core.errors import MappingError
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.stored_vectors import VectorStorage, stored_mapping

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SPACE_TYPES = ("innerproduct", "cosinesimil", "l2")


@dataclass(frozen=True)
class VectorSpec:
    """One vector field: its name, size, similarity and the model that fills it."""

    field: str
    dimension: int
    space_type: str
    model: str = ""
    model_sha256: str = ""
    #: ``hnsw`` (a kNN field), or ``float16`` / ``int8``: an exact-only field that a second
    #: stage reads back, without an ANN graph (:mod:`mathsearch.opensearch.stored_vectors`)
    storage: str = VectorStorage.HNSW.value

    def __post_init__(self) -> None:
        if not self.field.startswith("vec_") or not self.field.replace("_", "").isalnum():
            raise MappingError(
                f"vector field {self.field!r} must look like vec_<encoder>_<version>"
            )
        if self.space_type not in SPACE_TYPES:
            raise MappingError(f"space type {self.space_type!r} is not one of {SPACE_TYPES}")
        if self.dimension < 1:
            raise MappingError(f"vector field {self.field}: dimension {self.dimension} < 1")
        object.__setattr__(self, "storage", VectorStorage.parse(self.storage).value)

    @classmethod
    def from_card(cls, card: Any, storage: str = VectorStorage.HNSW.value) -> VectorSpec:
        """The spec of a model card (:class:`mathsearch.runtime.model_card.ModelCard` or alike),
        kept as ``storage`` (default a kNN field)."""
        return cls(
            field=card.vector_field,
            dimension=int(card.embedding_dim),
            space_type=card.space_type,
            model=f"{card.name}",
            model_sha256=getattr(card, "sha256", ""),
            storage=storage,
        )

    @property
    def exact_only(self) -> bool:
        """Whether the field is stored for a second stage's exact scores only (no ANN graph)."""
        return VectorStorage(self.storage).exact_only

    def mapping(self, settings: OpenSearchSettings) -> dict[str, Any]:
        """The ``knn_vector`` mapping: lucene HNSW with the configured ``m``/``ef_construction``,
        without doc values: the lucene engine keeps the vectors in its own ``.vec`` file, which
        both the HNSW search and exact ``knn_score`` scripts read, so the binary doc-values copy
        (4 bytes a dimension per document: 512 B of a 128-d equation) would be a third copy
        beside that file and ``_source``. An exact-only field is ``binary`` with doc values
        (:func:`~mathsearch.opensearch.stored_vectors.stored_mapping`)."""
        if self.exact_only:
            return stored_mapping()
        return {
            "type": "knn_vector",
            "dimension": self.dimension,
            "doc_values": False,
            "method": {
                "name": "hnsw",
                "engine": "lucene",
                "space_type": self.space_type,
                "parameters": {
                    "m": settings.hnsw_m,
                    "ef_construction": settings.hnsw_ef_construction,
                },
            },
        }


def equation_properties() -> dict[str, Any]:
    """The non-vector fields of the equation index."""
    return {
        "eq_id": {"type": "keyword"},
        "doc_id": {"type": "keyword"},
        "section": {"type": "keyword"},
        "position": {"type": "integer"},
        "latex": {"type": "text", "index": False},
        "mathml": {"type": "text", "index": False},
        # BM25 needs term frequencies and norms, not positions: no query is a phrase and the
        # highlight is computed client-side (results.highlight), so the token fields index no
        # positions (the .pos file was ~185 B of a 128-d equation's 2,823)
        "math_tokens": {
            "type": "text",
            "analyzer": "whitespace",
            "similarity": "BM25",
            "index_options": "freqs",
        },
        # normal forms (mathsearch.indexer.canonical_form): form:/term:/vars: tokens, empty when
        # none
        "canon_tokens": {
            "type": "text",
            "analyzer": "whitespace",
            "similarity": "BM25",
            "index_options": "freqs",
        },
        "symbols": {"type": "keyword"},
        "context": {"type": "text"},
        "keywords": {"type": "keyword"},
        "model_versions": {"type": "keyword"},
        "embed_refusals": {"type": "keyword"},
        "source": {"type": "keyword"},
        "indexed_at": {"type": "date"},
    }


def knn_index_body(
    properties: dict[str, Any],
    vectors: Sequence[VectorSpec],
    settings: OpenSearchSettings,
    meta: dict[str, Any],
    index_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Settings (k-NN on, the configured shards and replicas, plus ``index_settings``: what
    :meth:`ClusterCapabilities.index_settings` asks of this cluster) and a strict mapping of
    ``properties`` plus one field per spec (``knn_vector``, or ``binary`` for an exact-only
    one); ``_meta`` records the vector fields and the default (the first kNN field) beside
    ``meta``."""
    properties = dict(properties)
    for spec in vectors:
        properties[spec.field] = spec.mapping(settings)
    return {
        "settings": {
            "index.knn": True,
            "number_of_shards": settings.shards,
            "number_of_replicas": settings.replicas,
            **({"codec": settings.index_codec} if settings.index_codec != "default" else {}),
            **(index_settings or {}),
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {
                **meta,
                "vector_fields": {spec.field: asdict(spec) for spec in vectors},
                # search's default: the first kNN field (an exact-only one is never searched)
                "default_vector_field": next(
                    (spec.field for spec in vectors if not spec.exact_only), None
                ),
            },
            "properties": properties,
        },
    }


def equation_index_body(
    vectors: Sequence[VectorSpec],
    settings: OpenSearchSettings,
    *,
    alias: str,
    index_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Settings and mappings of a new versioned equation index."""
    meta = {"mathsearch_schema": SCHEMA_VERSION, "alias": alias}
    return knn_index_body(equation_properties(), vectors, settings, meta, index_settings)


def equations_alias(settings: OpenSearchSettings, name: str | None = None) -> str:
    """The alias of the equation index: ``name`` or ``<prefix>-equations``."""
    return name or f"{settings.index_prefix}-equations"


def failures_index_name(settings: OpenSearchSettings) -> str:
    """The failures index: ``<prefix>-failures``."""
    return f"{settings.index_prefix}-failures"


def versioned_name(alias: str, version: int) -> str:
    return f"{alias}-{version:06d}"


def resolve_alias(client: OpenSearch, alias: str) -> str | None:
    """The concrete index behind ``alias`` (``None`` when there is none)."""
    try:
        found = client.indices.get_alias(name=alias)
    except NotFoundError:
        return None
    names = sorted(found)
    if len(names) > 1:
        raise MappingError(f"alias {alias} points at several indexes: {', '.join(names)}")
    return names[0] if names else None


def index_meta(client: OpenSearch, alias: str) -> dict[str, Any]:
    """The ``_meta`` of the index behind ``alias``.

    Raises:
        MappingError: no such alias or index.
    """
    try:
        found = client.indices.get_mapping(index=alias)
    except NotFoundError as exc:
        raise MappingError(f"no index {alias}: index equations into it first") from exc
    mapping = next(iter(found.values()))["mappings"]
    return dict(mapping.get("_meta") or {})


def add_missing_properties(client: OpenSearch, alias: str, properties: dict[str, Any]) -> list[str]:
    """Add the non-vector ``properties`` that an index made by an older version lacks (e.g.
    ``embed_refusals``) to the live index and to its template; returns their names."""
    found = client.indices.get_mapping(index=alias)
    mapped = next(iter(found.values()))["mappings"].get("properties", {})
    missing = {name: spec for name, spec in properties.items() if name not in mapped}
    if not missing:
        return []
    try:
        client.indices.put_mapping(index=alias, body={"properties": missing})
        templates = client.indices.get_index_template(name=template_name(alias))
    except NotFoundError:
        templates = {"index_templates": []}
    except TransportError as exc:
        raise MappingError(f"cannot add {', '.join(missing)} to {alias}: {exc}") from exc
    for item in templates.get("index_templates", []):
        template = item["index_template"].get("template", {})
        mappings = dict(template.get("mappings") or {})
        mappings["properties"] = {**mappings.get("properties", {}), **missing}
        put_equation_template(client, alias, template.get("settings") or {}, mappings)
    logger.info("added %s to %s", ", ".join(sorted(missing)), alias)
    return sorted(missing)


def template_name(alias: str) -> str:
    return f"{alias}-template"


def put_equation_template(
    client: OpenSearch, alias: str, index_settings: dict[str, Any], mappings: dict[str, Any]
) -> None:
    """The index template that every version ``<alias>-NNNNNN`` is created from.

    It never carries the alias: a new version joins the alias only by an explicit, atomic swap.
    :mod:`mathsearch.opensearch.vector_fields` keeps it in step with the live mapping.
    """
    try:
        client.indices.put_index_template(
            name=template_name(alias),
            body={
                "index_patterns": [f"{alias}-0*"],
                "priority": 200,
                "template": {"settings": index_settings, "mappings": mappings},
                "_meta": {"mathsearch_schema": SCHEMA_VERSION},
            },
        )
    except TransportError as exc:
        raise MappingError(f"cannot store the index template of {alias}: {exc}") from exc


def failures_index_body(replicas: int = 0) -> dict[str, Any]:
    """Failure records: one per equation that did not make it (id = the equation id).

    ``replicas`` follows ``MATHSEARCH_INDEX_REPLICAS`` (as the equation index does), so the
    failure records survive the loss of a node and their writes need not wait for it.
    """
    return {
        "settings": {"number_of_shards": 1, "number_of_replicas": replicas},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "eq_id": {"type": "keyword"},
                "doc_id": {"type": "keyword"},
                "index": {"type": "keyword"},
                "stage": {"type": "keyword"},
                "reason": {"type": "keyword"},
                "detail": {"type": "text"},
                "source": {"type": "keyword"},
                "excerpt": {"type": "text", "index": False},
                "failed_at": {"type": "date"},
            },
        },
    }


def ensure_failures_index(client: OpenSearch, settings: OpenSearchSettings | None = None) -> str:
    """Create the failures index when missing; return its name."""
    settings = settings or OpenSearchSettings.from_env()
    name = failures_index_name(settings)
    if not client.indices.exists(index=name):
        try:
            client.indices.create(index=name, body=failures_index_body(settings.replicas))
        except TransportError as exc:
            if getattr(exc, "error", "") != "resource_already_exists_exception":
                raise MappingError(f"cannot create {name}: {exc}") from exc
    else:  # a failures index from an older version: add the fields it lacks
        mapped = client.indices.get_mapping(index=name)[name]["mappings"].get("properties", {})
        missing = {
            field: spec
            for field, spec in failures_index_body()["mappings"]["properties"].items()
            if field not in mapped
        }
        if missing:
            client.indices.put_mapping(index=name, body={"properties": missing})
    return name
