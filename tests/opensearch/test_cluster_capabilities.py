"""What differs between OpenSearch 2.19 and 3.x, read from the live cluster."""

from __future__ import annotations

import pytest
from opensearchpy import OpenSearch

from mathsearch.opensearch.cluster_capabilities import ClusterCapabilities
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec


@pytest.mark.parametrize(
    ("number", "version", "flat", "z_score", "settings"),
    [
        ("2.19.1", (2, 19, 1), False, False, {"index.knn.derived_source.enabled": True}),
        ("2.11", (2, 11, 0), False, False, {}),
        ("3.6.0", (3, 6, 0), True, True, {"index.knn.derived_source.enabled": True}),
        ("3.0.0-SNAPSHOT", (3, 0, 0), True, True, {"index.knn.derived_source.enabled": True}),
    ],
)
def test_what_each_version_can_do(number, version, flat, z_score, settings) -> None:
    caps = ClusterCapabilities.parse(number)
    assert caps.version == version
    assert (caps.rrf_flat_rank_constant, caps.server_z_score) == (flat, z_score)
    assert caps.index_settings() == settings
    if settings:  # MATHSEARCH_VECTOR_SOURCE=stored turns it off where the cluster knows it
        assert caps.index_settings("stored") == {"index.knn.derived_source.enabled": False}


@pytest.mark.parametrize("number", ["", "three", "v3.6.0"])
def test_a_version_that_is_not_one_is_refused(number: str) -> None:
    with pytest.raises(ValueError, match="not an OpenSearch version"):
        ClusterCapabilities.parse(number)


@pytest.mark.services
def test_the_live_clusters_version_and_the_index_settings_it_gets(
    client: OpenSearch, settings, fresh_alias: str
) -> None:
    caps = ClusterCapabilities.of(client)
    number = client.info()["version"]["number"]
    assert ".".join(map(str, caps.version)) == number.split("-")[0]
    assert ClusterCapabilities.of(client) is caps  # one GET / per client
    concrete = ensure_equation_index(
        client, fresh_alias, [VectorSpec("vec_test", 4, "cosinesimil")], settings
    )
    live = client.indices.get_settings(index=concrete, flat_settings=True)[concrete]["settings"]
    derived = live.get("index.knn.derived_source.enabled")
    # vectors only in the vector files (MATHSEARCH_VECTOR_SOURCE=derived, the default) where
    # the cluster's k-NN knows the setting (2.19 and later)
    assert derived == ("true" if caps.derived_vector_source else None)
