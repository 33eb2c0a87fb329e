"""ReadCache: memoised search responses and stored fields (pure; the tuning run's parity with
the uncached searches is checked against the real index in tests/evaluation/test_tuning.py)."""

from __future__ import annotations

from typing import Any

from mathsearch.opensearch.read_cache import ReadCache


class Cluster:
    """Answers each body with its own ``size``; records every call."""

    def __init__(self) -> None:
        self.searches: list[list[dict[str, Any]]] = []
        self.fetches: list[list[str]] = []

    def msearch(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.searches.append(list(bodies))
        return [{"hits": {"hits": [{"_id": str(body["size"])}]}} for body in bodies]

    def fetch(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        self.fetches.append(list(ids))
        return {doc: {"latex": doc.upper()} for doc in ids if doc != "gone"}


def size_of(response: dict[str, Any]) -> str:
    return response["hits"]["hits"][0]["_id"]


def test_a_multi_search_sends_only_the_bodies_not_seen_in_order() -> None:
    cluster, cache = Cluster(), ReadCache()
    first = cache.msearch([{"size": 1}, {"size": 2}], cluster.msearch)
    again = cache.msearch([{"size": 3}, {"size": 2}, {"size": 1}], cluster.msearch)
    assert [size_of(r) for r in first] == ["1", "2"]
    assert [size_of(r) for r in again] == ["3", "2", "1"]
    assert cluster.searches == [[{"size": 1}, {"size": 2}], [{"size": 3}]]
    assert again[1] is first[1]
    cache.msearch([{"size": 2}, {"size": 3}], cluster.msearch)
    assert len(cluster.searches) == 2  # every body seen: no call at all
    assert (cache.hits, cache.misses) == (4, 3)


def test_the_key_ignores_key_order_but_not_values() -> None:
    cluster, cache = Cluster(), ReadCache()
    cache.search(
        {"size": 5, "query": {"a": 1, "b": [0.5, 0.25]}}, lambda b: cluster.msearch([b])[0]
    )
    cache.search(
        {"query": {"b": [0.5, 0.25], "a": 1}, "size": 5}, lambda b: cluster.msearch([b])[0]
    )
    assert len(cluster.searches) == 1
    cache.search(
        {"size": 5, "query": {"a": 1, "b": [0.5, 0.26]}}, lambda b: cluster.msearch([b])[0]
    )
    assert len(cluster.searches) == 2


def test_sources_fetch_only_new_ids_per_field_set() -> None:
    cluster, cache = Cluster(), ReadCache()
    assert cache.sources(["a", "b"], ("latex",), cluster.fetch) == {
        "a": {"latex": "A"},
        "b": {"latex": "B"},
    }
    found = cache.sources(["c", "a", "gone", "c"], ("latex",), cluster.fetch)
    assert found == {"c": {"latex": "C"}, "a": {"latex": "A"}}  # a missing id is left out
    assert cluster.fetches == [["a", "b"], ["c", "gone"]]
    cache.sources(["a"], ("latex", "mathml"), cluster.fetch)  # other fields: fetched again
    cache.sources(["gone"], ("latex",), cluster.fetch)  # never found: asked again
    assert cluster.fetches[2:] == [["a"], ["gone"]]
    cache.sources(["b", "c"], ("latex",), cluster.fetch)
    assert len(cluster.fetches) == 4


def test_a_full_cache_stops_adding_and_still_answers() -> None:
    cluster, cache = Cluster(), ReadCache(max_entries=2)
    cache.msearch([{"size": 1}, {"size": 2}, {"size": 3}], cluster.msearch)
    assert len(cache) == 2
    answers = cache.msearch([{"size": 1}, {"size": 3}], cluster.msearch)
    assert [size_of(r) for r in answers] == ["1", "3"]
    assert cluster.searches[-1] == [{"size": 3}]  # the one it could not keep goes out again
    assert cache.sources(["x"], ("latex",), cluster.fetch) == {"x": {"latex": "X"}}
    cache.sources(["x"], ("latex",), cluster.fetch)
    assert cluster.fetches == [["x"], ["x"]]
