"""One search configuration over every topic: a TREC run (``qid -> [(eq_id, score), ...]``).

:func:`search_topics` asks the live index for ``k + len(topic.exclude)`` hits per topic and drops
the excluded ids (e.g. the query's own equation), so a run holds at most ``k`` results a topic.
It asks for the ranking alone (``SearchRequest.annotate`` False): a run keeps each hit's id and
score, so no hit's text, matched tokens or highlight is fetched or computed. A
topic whose query fails (:class:`~mathsearch.core.errors.QueryError`: unreadable LaTeX, a
refused
request) gets an empty ranking and is counted and logged - it never aborts the run; a missing
index or a cluster that does not answer (``MappingError``, ``ClusterUnavailableError``) does.

Featurising a query (parse + ONNX embedding) costs more than searching a small index, and a
tuning grid searches every topic once per configuration: :func:`search_topics` therefore puts a
:class:`CachingQueryEncoder` (one featurisation per LaTeX string, failures included) in front of
the searcher's encoder the first time it sees that searcher.

Example::

    searcher = Searcher(connect(), "mathsearch-equations")
    topics = read_topics("topics.jsonl")
    for alpha in (0.2, 0.5, 0.8):
        run = search_topics(searcher, topics, SearchProfile(mode=Mode.FUSION), alpha=alpha, k=100)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mathsearch.core.errors import QueryError
from mathsearch.evaluation.trec_files import Run, Topic
from mathsearch.opensearch.query_encoder import QueryEncoder, QueryFeatures
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher

logger = logging.getLogger(__name__)

#: Builds the request of one topic (an alternative to a profile plus overrides).
RequestFactory = Callable[[Topic], SearchRequest]

MAX_K = 10_000


class CachingQueryEncoder:
    """A :class:`QueryEncoder` that featurises each LaTeX string once (failures are cached too).

    >>> class Count:
    ...     calls = 0
    ...     def features(self, latex):
    ...         Count.calls += 1
    ...         return QueryFeatures([latex], None, None)
    >>> cache = CachingQueryEncoder(Count())
    >>> _ = cache.features("x"), cache.features("x")
    >>> Count.calls
    1
    """

    def __init__(self, inner: QueryEncoder) -> None:
        self.inner = inner
        self._cache: dict[str, QueryFeatures | QueryError] = {}

    def features(self, latex: str) -> QueryFeatures:
        cached = self._cache.get(latex)
        if cached is None:
            try:
                cached = self.inner.features(latex)
            except QueryError as exc:
                cached = exc
            self._cache[latex] = cached
        if isinstance(cached, QueryError):
            raise QueryError(str(cached))
        return cached

    def __len__(self) -> int:
        return len(self._cache)


@dataclass
class TopicRun:
    """A run plus the topics whose query failed (``qid -> reason``; they rank nothing)."""

    run: Run
    failures: dict[str, str] = field(default_factory=dict)


def cache_features(searcher: Searcher) -> CachingQueryEncoder:
    """Put a :class:`CachingQueryEncoder` in front of ``searcher``'s encoder (once); return it."""
    if not isinstance(searcher.encoder, CachingQueryEncoder):
        searcher.encoder = CachingQueryEncoder(searcher.encoder)
    return searcher.encoder


def run_topics(
    searcher: Searcher,
    topics: Sequence[Topic],
    config: SearchProfile | RequestFactory,
    *,
    progress: Callable[[int], Any] | None = None,
    **overrides: Any,
) -> TopicRun:
    """Search every topic with one configuration; see the module docstring.

    ``config`` is a :class:`SearchProfile` (with ``overrides``: any :class:`SearchRequest` field,
    e.g. ``k=100, alpha=0.3``) or a function from a topic to its request (then ``overrides``
    must be empty). ``progress`` is called with 1 after each topic (e.g. ``tqdm.update``).

    Raises:
        MappingError, ClusterUnavailableError: the index is missing or the cluster is down.
        QueryError: the configuration itself is invalid (checked before any search).
    """
    if callable(config) and not isinstance(config, SearchProfile) and overrides:
        raise QueryError("overrides apply to a profile, not to a request factory")
    cache_features(searcher)
    if isinstance(config, SearchProfile):
        config.request("x", **overrides).validate()
    result = TopicRun(run={})
    for topic in topics:
        request = _request(topic, config, overrides)
        try:
            hits = searcher.search(request).hits
        except QueryError as exc:
            result.failures[topic.qid] = str(exc)
            result.run[topic.qid] = []
            logger.warning("topic %s failed: %s", topic.qid, exc)
        else:
            excluded = set(topic.exclude)
            keep = request.k - len(topic.exclude)
            ranking = [(hit.eq_id, float(hit.score)) for hit in hits if hit.eq_id not in excluded]
            result.run[topic.qid] = ranking[: max(keep, 0)]
        if progress is not None:
            progress(1)
    if result.failures:
        logger.warning("%d of %d topics failed", len(result.failures), len(topics))
    return result


def search_topics(
    searcher: Searcher,
    topics: Sequence[Topic],
    config: SearchProfile | RequestFactory,
    **overrides: Any,
) -> Run:
    """The run of :func:`run_topics` (failed topics rank nothing; they are logged)."""
    return run_topics(searcher, topics, config, **overrides).run


def _request(
    topic: Topic, config: SearchProfile | RequestFactory, overrides: dict[str, Any]
) -> SearchRequest:
    if isinstance(config, SearchProfile):
        base = config.request(topic.latex, **{"text": topic.text, **overrides})
    else:
        base = config(topic)
    k = min(base.k + len(topic.exclude), MAX_K)
    window, depth = max(base.window, k), max(base.depth, k)
    return replace(base, k=k, window=window, depth=depth, annotate=False)
