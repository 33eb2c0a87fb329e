"""Timing the searches of ``mathsearch bench query`` on one index, mode by mode.

Each bench mode (:data:`VARIANTS`) is a :class:`~mathsearch.opensearch.queries.Mode` plus, for
``fusion``
and ``rrf``, the side that fuses the BM25 and kNN lists:

* ``fusion`` / ``rrf``: on the cluster (neural-search ``hybrid`` query and a search pipeline:
  one ``_search``);
* ``fusion-client`` / ``rrf-client``: in the client (:mod:`mathsearch.opensearch.fusion`: both
  subqueries in
  one ``_msearch``, the same fusion math as the plugin, then one ``ids`` search for the k sources).

Each mode runs ``warmup`` queries untimed, then ``count`` timed ones, sequentially from a single
client, every pass with queries no earlier pass of the run sent (:class:`QueryDraw`):

* *cluster*: each query's :class:`~mathsearch.opensearch.searcher.QueryFeatures` are computed once
  beforehand, and a :class:`~mathsearch.opensearch.searcher.Searcher` whose encoder returns them
  times
  ``Searcher.search``: request building, the cluster round trip(s) and reading the hits;
* *end to end*: ``Searcher.search`` with the real
  :class:`~mathsearch.opensearch.searcher.ModelQueryEncoder`
  (featurisation and embedding of the query included);
* *took*: the server's own ``took`` (ms) of the same cluster-side requests (the sum of the
  ``_search`` / ``_msearch`` tooks of a query).

Latencies are reported as p50 / p95 / p99 (linear interpolation between order statistics) and
queries/s as the number of timed queries over their wall time.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mathsearch.bench.corpus import progress_bar
from mathsearch.core.heap import freeze_heap
from mathsearch.opensearch.modes import MODES as SEARCH_MODES
from mathsearch.opensearch.queries import Mode

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT",
    "MODES",
    "VARIANTS",
    "BenchQuery",
    "Variant",
    "interleave",
    "latency_summary",
    "percentile",
    "query_features",
    "time_modes",
    "time_searches",
    "variant_of",
]


@dataclass(frozen=True)
class Variant:
    """One timed bench mode: a search mode and, for ``fusion`` / ``rrf``, who fuses."""

    name: str
    mode: Mode
    fusion_side: str | None = None  # "server" or "client" for fusion and rrf
    #: the second stage's encoders (``<mode>+rerank``; empty: the first stage alone)
    rerank: tuple[str, ...] = ()
    rerank_window: int = 50
    #: ``default``: the shipped default profile's request, every parameter as a user gets it
    profile: bool = False

    def request(
        self,
        latex: str,
        *,
        k: int,
        max_df: float | None = None,
        max_terms: int | None = None,
        depth: int | None = None,
    ) -> Any:
        """The :class:`~mathsearch.opensearch.searcher.SearchRequest` of one query in this mode
        (``depth``: hits per subquery of fusion / rrf, raised to ``k`` as a profile raises it)."""
        from mathsearch.opensearch.search_request import SearchRequest

        if self.profile:
            from mathsearch.opensearch.search_profile import SearchProfile

            return SearchProfile.default().request(latex, k=k)
        extra: dict[str, Any] = {}
        if depth:
            extra["depth"] = max(depth, k)
        if self.fusion_side is not None:
            extra["fusion_side"] = self.fusion_side
        if max_df is not None:
            extra["max_df"] = max_df
        if max_terms:
            extra["max_terms"] = max_terms
        if self.rerank:
            extra.update(rerank=self.rerank, rerank_window=self.rerank_window)
        return SearchRequest(latex, mode=self.mode, k=k, **extra)


def _variants() -> dict[str, Variant]:
    """One variant per registered mode; a fused mode twice: ``<mode>`` fused by the cluster,
    ``<mode>-client`` fused client-side."""
    out = [
        Variant(mode.value, mode, "server" if spec.fused else None)
        for mode, spec in SEARCH_MODES.items()
    ]
    out += [
        Variant(f"{mode.value}-client", mode, "client")
        for mode, spec in SEARCH_MODES.items()
        if spec.fused
    ]
    out.append(Variant(DEFAULT, Mode.FUSION, profile=True))
    return {variant.name: variant for variant in out}


#: The bench mode of the shipped default profile (its mode, parameters and second stage).
DEFAULT = "default"
VARIANTS: dict[str, Variant] = _variants()
MODES = tuple(VARIANTS)
#: The suffix of a bench mode whose hits a second stage re-ranks (``fusion-client+rerank``).
RERANK_SUFFIX = "+rerank"


def variant_of(name: str, rerank: Sequence[str] = (), rerank_window: int = 50) -> Variant:
    """The variant a bench mode name stands for: one of :data:`VARIANTS`, or a hybrid one
    with :data:`RERANK_SUFFIX`, re-ranked by ``rerank`` (which it then needs).

    Raises:
        ValueError: an unknown mode, a rerank variant of a mode without both sides, or one
            without encoders.
    """
    base = name.removesuffix(RERANK_SUFFIX)
    if base == DEFAULT and base != name:
        raise ValueError(f"{name}: the default profile brings its own second stage")
    if base not in VARIANTS:
        raise ValueError(f"unknown mode {name!r}: use {', '.join(MODES)} (+rerank)")
    variant = VARIANTS[base]
    if base == name:
        return variant
    if not SEARCH_MODES[variant.mode].hybrid:
        raise ValueError(f"{name}: only a hybrid mode (BM25 and vectors) re-ranks")
    if not rerank:
        raise ValueError(f"{name}: name the rerank encoders")
    return replace(variant, name=name, rerank=tuple(rerank), rerank_window=rerank_window)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation (numpy's default method).

    Raises:
        ValueError: no values, or ``q`` outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside [0, 100]")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary(latencies_ms: Sequence[float], wall_s: float) -> dict[str, Any]:
    """p50 / p95 / p99 / mean / max in ms and queries/s (``len / wall_s``) of one timed run."""
    if not latencies_ms:
        return {"n": 0}
    return {
        "n": len(latencies_ms),
        "p50": round(percentile(latencies_ms, 50), 2),
        "p95": round(percentile(latencies_ms, 95), 2),
        "p99": round(percentile(latencies_ms, 99), 2),
        "mean": round(sum(latencies_ms) / len(latencies_ms), 2),
        "max": round(max(latencies_ms), 2),
        "qps": round(len(latencies_ms) / wall_s, 1) if wall_s > 0 else None,
    }


class _TookClient:
    """Delegates to an OpenSearch client and sums the server ``took`` of its searches."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.took = 0.0

    def search(self, *args: Any, **kwargs: Any) -> Any:
        response = self._client.search(*args, **kwargs)
        self.took += float(response.get("took") or 0.0)
        return response

    def msearch(self, *args: Any, **kwargs: Any) -> Any:
        response = self._client.msearch(*args, **kwargs)
        self.took += float(response.get("took") or 0.0)
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _CachedEncoder:
    """A :class:`~mathsearch.opensearch.searcher.QueryEncoder` answering from precomputed
    features."""

    def __init__(self, features: Mapping[str, Any]) -> None:
        self._features = features

    def features(self, latex: str) -> Any:
        return self._features[latex]


@dataclass
class BenchQuery:
    """One query formula: its name (topic id or eq_id), LaTeX and kind."""

    name: str
    latex: str
    kind: str  # "topic" or "held"


def query_features(
    queries: Sequence[BenchQuery], encoder: Any, extra: Sequence[str] = ()
) -> tuple[list[BenchQuery], dict[str, Any], list[float], Counter[str]]:
    """The queries ``encoder`` can featurise (with tokens), their features by LaTeX (with the
    ``extra`` second-stage encoders' vectors too), the featurisation times (ms) and the
    failures by kind."""
    from mathsearch.core.errors import QueryError

    ok: list[BenchQuery] = []
    features: dict[str, Any] = {}
    times: list[float] = []
    failed: Counter[str] = Counter()
    for query in queries:
        tick = time.perf_counter()
        try:
            found = (
                encoder.features(query.latex, extra=extra)
                if extra
                else encoder.features(query.latex)
            )
        except QueryError as exc:
            failed[query.kind] += 1
            logger.debug("query %s skipped: %s", query.name, exc)
            continue
        times.append((time.perf_counter() - tick) * 1000)
        if not found.tokens:
            failed[query.kind] += 1
            continue
        features[query.latex] = found
        ok.append(query)
    return ok, features, times, failed


def interleave(first: Sequence[BenchQuery], second: Sequence[BenchQuery]) -> list[BenchQuery]:
    """``first[0], second[0], first[1], second[1], ...`` (the longer one's rest at the end)."""
    out: list[BenchQuery] = []
    for i in range(max(len(first), len(second))):
        out.extend(group[i] for group in (first, second) if i < len(group))
    return out


@dataclass
class Timed:
    """One sequential run: per query its latency (ms; ``None`` when it failed) and took, and
    each answered query's :attr:`~mathsearch.opensearch.results.SearchResponse.stages_ms`."""

    latencies: list[float | None]
    tooks: list[float]
    wall_s: float
    hits: int
    fused: Counter[str] = field(default_factory=Counter)  # who fused, per response
    stages: list[dict[str, float]] = field(default_factory=list)

    @property
    def ok(self) -> list[float]:
        return [ms for ms in self.latencies if ms is not None]

    @property
    def errors(self) -> int:
        return sum(ms is None for ms in self.latencies)


def time_searches(
    searcher: Any,
    took: _TookClient | None,
    make_request: Callable[[str], Any],
    latexes: Sequence[str],
    bar: Any,
) -> Timed:
    """Run the searches one after the other, timing each (``time.perf_counter``)."""
    from mathsearch.core.errors import QueryError

    latencies: list[float | None] = []
    tooks: list[float] = []
    fused: Counter[str] = Counter()
    stages: list[dict[str, float]] = []
    hits = 0
    clock = time.perf_counter
    wall = clock()
    for latex in latexes:
        request = make_request(latex)
        if took is not None:
            took.took = 0.0
        tick = clock()
        try:
            response = searcher.search(request)
        except QueryError as exc:
            latencies.append(None)
            logger.debug("search failed: %s", exc)
            bar.update(1)
            continue
        latencies.append((clock() - tick) * 1000)
        stages.append(dict(response.stages_ms))
        hits += len(response.hits)
        if response.fused:
            fused[response.fused] += 1
        if took is not None:
            tooks.append(took.took)
        bar.update(1)
    return Timed(latencies, tooks, clock() - wall, hits, fused, stages)


def _without_qps(stats: dict[str, Any]) -> dict[str, Any]:
    stats.pop("qps", None)
    return stats


def _by_kind(run: Timed, kinds: Sequence[str]) -> dict[str, Any]:
    """Cluster-side p50 / p99 per query kind (topic formulas, held-out corpus equations)."""
    out = {}
    for kind in sorted(set(kinds)):
        values = [ms for ms, k in zip(run.latencies, kinds, strict=True) if k == kind and ms]
        out[kind] = _without_qps(latency_summary(values, 0.0))
    return out


def stage_summary(stages: Sequence[Mapping[str, float]]) -> dict[str, Any] | None:
    """p50 of each stage (ms) and the second stage's median share of a search's time, over
    the searches that had a second stage (None when none had)."""
    second = [row for row in stages if "second_stage" in row]
    if not second:
        return None
    out: dict[str, Any] = {
        name: round(percentile([row.get(name, 0.0) for row in second], 50), 2)
        for name in ("query", "first_stage", "second_stage")
    }
    shares = [row["second_stage"] / (sum(row.values()) or 1.0) for row in second]
    out["second_stage_share"] = round(percentile(shares, 50), 3)
    return out


class QueryDraw:
    """Queries drawn in order from a pool, none twice until the pool is spent (then it starts
    again and counts the repeats): a run of several modes never times a query that an earlier
    pass already sent (cold caches, as a user's queries are)."""

    def __init__(self, pool: Sequence[BenchQuery]) -> None:
        if not pool:
            raise ValueError("no queries")
        self.pool = list(pool)
        self.used = 0

    @property
    def repeats(self) -> int:
        """How many drawn queries had been drawn before."""
        return max(0, self.used - len(self.pool))

    def take(self, count: int) -> list[BenchQuery]:
        out = [self.pool[(self.used + i) % len(self.pool)] for i in range(count)]
        self.used += count
        return out


def timing_row(
    name: str, side: Any, e2e: Any, chosen: Sequence[BenchQuery], repeats: int
) -> dict[str, Any]:
    """One row of ``bench query``'s report: ``side`` timed by the cluster's ``took``, ``e2e``
    end to end, over the queries ``chosen`` (their kinds), ``repeats`` drawn twice."""
    return {
        "mode": name,
        "fused": "+".join(sorted(side.fused + e2e.fused)) or None,
        "end_to_end": latency_summary(e2e.ok, e2e.wall_s),
        "cluster": latency_summary(side.ok, side.wall_s),
        "took": _without_qps(latency_summary(side.tooks, 0.0)),
        "cluster_by_query_kind": _by_kind(side, [q.kind for q in chosen]),
        "errors": side.errors + e2e.errors,
        "mean_hits": round(side.hits / max(len(side.ok), 1), 2),
        "repeated_queries": repeats,
    }


def time_modes(
    client: Any,
    alias: str,
    *,
    modes: Sequence[str],
    pool: Sequence[BenchQuery],
    features: Mapping[str, Any],
    model_encoder: Any,
    k: int,
    count: int,
    warmup: int,
    max_df: float | None = None,
    max_terms: int | None = None,
    depth: int | None = None,
    progress: bool = True,
    rerank: Sequence[str] = (),
    rerank_window: int = 50,
) -> list[dict[str, Any]]:
    """One row per mode of ``modes`` (names of :data:`VARIANTS`, or of hybrid ones with
    :data:`RERANK_SUFFIX`, re-ranked by ``rerank``): the timings on ``alias``. Every pass (a
    mode's warm-up, its cluster-side and its end-to-end queries) draws queries no earlier pass
    sent (:class:`QueryDraw`; a row says how many repeated when the pool ran out). A row
    whose searches had a second stage adds ``stages_ms`` (:func:`stage_summary`, end to end)."""
    from mathsearch.opensearch.searcher import Searcher

    draw = QueryDraw(pool)
    freeze_heap()  # the bench's corpus and query pool out of full collections, as serve's heap
    took = _TookClient(client)
    cluster = Searcher(took, alias, encoder=_CachedEncoder(features))  # type: ignore[arg-type]
    end_to_end = Searcher(client, alias, encoder=model_encoder)
    cluster.default_field()
    end_to_end.default_field()
    rows = []
    with progress_bar(
        progress, total=len(modes) * (warmup + 2 * count), desc=f"queries {alias}", unit="q"
    ) as bar:
        for name in modes:
            variant = variant_of(name, rerank, rerank_window)

            def make(latex: str, variant: Variant = variant) -> Any:
                return variant.request(latex, k=k, max_df=max_df, max_terms=max_terms, depth=depth)

            before = draw.repeats
            time_searches(cluster, None, make, [q.latex for q in draw.take(warmup)], bar)
            chosen = draw.take(count)
            side = time_searches(cluster, took, make, [q.latex for q in chosen], bar)
            e2e = time_searches(end_to_end, None, make, [q.latex for q in draw.take(count)], bar)
            row = timing_row(name, side, e2e, chosen, draw.repeats - before)
            stages = stage_summary(e2e.stages)
            if stages is not None:
                row["stages_ms"] = stages
            rows.append(row)
    return rows
