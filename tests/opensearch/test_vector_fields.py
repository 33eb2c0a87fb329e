"""Zero-downtime re-embedding against the real node: add, fill, switch, drop."""

from __future__ import annotations

from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.core.errors import MappingError
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.schema import VectorSpec, resolve_alias
from mathsearch.opensearch.searcher import ModelQueryEncoder, Searcher, SearchRequest
from mathsearch.opensearch.vector_fields import (
    add_vector_field,
    default_vector_field,
    drop_vector_field,
    set_default_vector_field,
)
from mathsearch.runtime.embedders import Embedder, load_embedder
from mathsearch.workers.reembed import reembed
from tests.conftest import DEFAULT_CARD, DEFAULT_FIELD, DEFAULT_SPACE
from tests.opensearch.conftest import fill
from tests.opensearch.second_models import gcn_copy

pytestmark = pytest.mark.services


def _next_version(tmp_path: Path) -> Embedder:
    """The shipped default network published as another version (its own card, hence its own
    field, e.g. vec_gcn_v6)."""
    return load_embedder(gcn_copy(tmp_path))


# HNSW is approximate: ask for half the index (the graph search then visits nearly all of it)
# and compare the first ten, which do not depend on how each graph happened to be built
TOP = 100


def _top(response: object) -> list[str]:
    return [hit.eq_id for hit in response.hits[:10]]  # type: ignore[attr-defined]


def _template_properties(client: OpenSearch, alias: str) -> dict:
    found = client.indices.get_index_template(name=f"{alias}-template")["index_templates"]
    return found[0]["index_template"]["template"]["mappings"]["properties"]


def _fields_of_every_document(client: OpenSearch, alias: str) -> list[list[str]]:
    found = client.search(index=alias, body={"size": 1000, "_source": ["model_versions"]})
    return [hit["_source"]["model_versions"] for hit in found["hits"]["hits"]]


def test_a_new_model_version_is_added_filled_switched_and_the_old_one_dropped(
    client: OpenSearch,
    settings: OpenSearchSettings,
    fresh_alias: str,
    encoder: Embedder,
    demo_dicts: list,
    demo_vectors: list,
    tmp_path: Path,
) -> None:
    fill(client, fresh_alias, settings, encoder, demo_dicts, demo_vectors)
    old = DEFAULT_FIELD
    newer = _next_version(tmp_path)
    new = newer.card.vector_field
    assert new == f"vec_gcn_v{DEFAULT_CARD.version + 1}" and new != old  # gcn_copy's default
    query = demo_dicts[11]["latex"]
    before = Searcher(client, fresh_alias).search(SearchRequest(query, mode=Mode.KNN, k=TOP))

    # add + fill: the old field keeps serving the whole time
    assert add_vector_field(client, fresh_alias, VectorSpec.from_card(newer.card))
    assert default_vector_field(client, fresh_alias) == old
    assert {old, new} <= set(_template_properties(client, fresh_alias))
    during = Searcher(client, fresh_alias).search(SearchRequest(query, mode=Mode.KNN, k=TOP))
    assert _top(during) == _top(before)
    report = reembed(client, fresh_alias, newer)
    assert report.equations == len(demo_dicts) and report.updated == len(demo_dicts)
    assert all(f == [old, new] for f in _fields_of_every_document(client, fresh_alias))
    again = reembed(client, fresh_alias, newer)
    assert again.unchanged == len(demo_dicts) and again.updated == 0

    # switch: one command; the same network under the new version finds the same neighbours
    set_default_vector_field(client, fresh_alias, new)
    after = Searcher(client, fresh_alias, encoder=ModelQueryEncoder(newer)).search(
        SearchRequest(query, mode=Mode.KNN, k=TOP)
    )
    assert after.vector_field == new
    assert _top(after) == _top(before)

    # drop the old field: a new index version behind the alias, every document kept
    with pytest.raises(MappingError, match="default"):
        drop_vector_field(client, fresh_alias, new)
    old_index = resolve_alias(client, fresh_alias)
    new_index = drop_vector_field(client, fresh_alias, old)
    assert new_index.endswith("-000002") and resolve_alias(client, fresh_alias) == new_index
    assert not client.indices.exists(index=old_index)
    assert client.count(index=fresh_alias)["count"] == len(demo_dicts)
    assert all(f == [new] for f in _fields_of_every_document(client, fresh_alias))
    mapping = client.indices.get_mapping(index=fresh_alias)[new_index]["mappings"]
    assert old not in mapping["properties"]
    assert old not in _template_properties(client, fresh_alias)
    assert mapping["_meta"]["default_vector_field"] == new
    final = Searcher(client, fresh_alias, encoder=ModelQueryEncoder(newer)).search(
        SearchRequest(query, mode=Mode.KNN, k=TOP)
    )
    assert _top(final) == _top(before)


def test_a_field_cannot_change_shape(
    client: OpenSearch, settings: OpenSearchSettings, equation_alias: str
) -> None:
    with pytest.raises(MappingError, match="new field"):
        add_vector_field(client, equation_alias, VectorSpec(DEFAULT_FIELD, 32, DEFAULT_SPACE))
    with pytest.raises(MappingError, match="no field"):
        set_default_vector_field(client, equation_alias, "vec_nope_v9")
