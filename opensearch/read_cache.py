"""Memoised reads of an index that does not change while the cache is in use.

A tuning grid asks the same index the same questions many times: every fusion, rescore and rrf
configuration of a topic sends the same BM25 and kNN candidate searches (only the client-side
combination of the two lists differs) and fetches the stored fields of mostly the same hits.
A :class:`ReadCache` set on a :class:`~mathsearch.opensearch.searcher.Searcher`
(``searcher.read_cache``) answers a search whose body it has seen from memory, sends only the
unseen bodies of a multi-search, and fetches only the stored fields of ids it has not fetched.
The rankings are the cluster's own, so a cached run is identical to an uncached one.

It is only correct while nothing writes to the index, so the evaluation harness sets it for
the duration of one tuning run (:func:`mathsearch.evaluation.tuning.tune`) and removes it after;
serving never uses it. Once it holds ``max_entries`` responses and sources it stops adding (no
eviction): later reads go to the cluster as without it.

Example::

    searcher.read_cache = ReadCache()
    try:
        for config in grid:
            run_topics(searcher, topics, config.profile)
    finally:
        searcher.read_cache = None
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DEFAULT_MAX_ENTRIES", "ReadCache"]

#: Responses plus stored-field records held at most (a list response of 100 ids and scores is
#: ~10 kB in memory, an equation's stored fields ~5 kB).
DEFAULT_MAX_ENTRIES = 50_000

Response = dict[str, Any]


class ReadCache:
    """Search responses by body and stored fields by id; see the module docstring.

    The cached objects are shared: callers read them and never change them. ``hits`` counts the
    reads answered from memory alone (a search body, or a fetch whose ids were all fetched
    before), ``misses`` those that went to the cluster.

    >>> calls = []
    >>> def run(body):
    ...     calls.append(body)
    ...     return {"hits": {"hits": [{"_id": "a", "_score": body["size"]}]}}
    >>> cache = ReadCache()
    >>> first = cache.search({"size": 2}, run)
    >>> cache.search({"size": 2}, run) is first, len(calls), cache.hits, cache.misses
    (True, 1, 1, 1)
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._responses: dict[str, Response] = {}
        self._sources: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._responses) + len(self._sources)

    def search(self, body: dict[str, Any], run: Callable[[dict[str, Any]], Response]) -> Response:
        """``run(body)``'s response, from memory when this body was asked before."""
        return self.msearch([body], lambda bodies: [run(bodies[0])])[0]

    def msearch(
        self,
        bodies: list[dict[str, Any]],
        run: Callable[[list[dict[str, Any]]], list[Response]],
    ) -> list[Response]:
        """The responses of ``bodies`` in order; ``run`` is called once with the unseen ones
        (and not at all when every body was seen)."""
        keys = [_key(body) for body in bodies]
        missing = [n for n, key in enumerate(keys) if key not in self._responses]
        self.hits += len(bodies) - len(missing)
        self.misses += len(missing)
        if not missing:
            return [self._responses[key] for key in keys]
        fetched = dict(zip(missing, run([bodies[n] for n in missing]), strict=True))
        for n, response in fetched.items():
            self._remember(self._responses, keys[n], response)
        return [fetched[n] if n in fetched else self._responses[keys[n]] for n in range(len(keys))]

    def sources(
        self,
        ids: list[str],
        source: Sequence[str],
        fetch: Callable[[list[str]], dict[str, dict[str, Any]]],
    ) -> dict[str, dict[str, Any]]:
        """The ``source`` fields of ``ids``; ``fetch`` gets only the ids not fetched before
        (ids the index lacks are fetched again each time, and left out as by ``fetch``)."""
        fields = tuple(source)
        wanted = [doc for doc in dict.fromkeys(ids) if (fields, doc) not in self._sources]
        if wanted:
            self.misses += 1
        else:
            self.hits += 1
        found = fetch(wanted) if wanted else {}
        for doc, record in found.items():
            self._remember(self._sources, (fields, doc), record)
        result: dict[str, dict[str, Any]] = {}
        for doc in ids:
            known = found.get(doc, self._sources.get((fields, doc)))
            if known is not None:
                result[doc] = known
        return result

    def _remember(self, store: dict[Any, Any], key: Any, value: Any) -> None:
        if len(self) < self.max_entries:
            store[key] = value


def _key(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
