"""Creating and upgrading the equation index: ``<alias>-000001`` behind its alias from the
template of :mod:`mathsearch.opensearch.schema`, then the vector fields of
:mod:`mathsearch.opensearch.vector_fields` and the properties an older version lacks."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opensearchpy import OpenSearch
from opensearchpy.exceptions import TransportError

from mathsearch.core.errors import MappingError
from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
from mathsearch.opensearch.schema import (
    VectorSpec,
    add_missing_properties,
    equation_index_body,
    equation_properties,
    put_equation_template,
    resolve_alias,
    versioned_name,
)
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.vector_fields import add_vector_field

logger = logging.getLogger(__name__)

__all__ = ["ensure_equation_index"]


def ensure_equation_index(
    client: OpenSearch,
    alias: str,
    vectors: Sequence[VectorSpec],
    settings: OpenSearchSettings | None = None,
) -> str:
    """Create ``<alias>-000001`` behind ``alias`` when missing; add missing vector fields.

    Idempotent: a second call with the same vectors changes nothing. A vector field that exists
    with another dimension or space type raises :class:`MappingError` (write a new model
    version into a new field instead). Returns the concrete index name.
    """
    settings = settings or OpenSearchSettings.from_env()
    concrete = resolve_alias(client, alias)
    if concrete is None:
        if client.indices.exists(index=alias):
            raise MappingError(
                f"{alias} is an index, not an alias: mathsearch needs the name free for its alias"
            )
        concrete = versioned_name(alias, 1)
        body = equation_index_body(
            vectors, settings, alias=alias,
            index_settings=ClusterCapabilities.of(client).index_settings(settings.vector_source),
        )  # fmt: skip
        put_equation_template(client, alias, body["settings"], body["mappings"])
        try:
            # settings and mappings come from the template; the alias only from this request
            client.indices.create(index=concrete, body={"aliases": {alias: {}}})
        except TransportError as exc:
            if getattr(exc, "error", "") != "resource_already_exists_exception":
                raise MappingError(f"cannot create {concrete}: {exc}") from exc
        logger.info("created %s behind alias %s", concrete, alias)
        return concrete
    add_missing_properties(client, alias, equation_properties())
    for spec in vectors:
        add_vector_field(client, alias, spec, settings=settings, make_default=False)
    return concrete
