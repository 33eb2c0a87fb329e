"""The text report of ``mathsearch bench query``: one table per index size.

:func:`format_bench_query` turns the JSON-able report of
:func:`mathsearch.bench.query.bench_query`
into what a person reads: the setup (model, node, corpus, queries, ``max_df`` when set), then per
size the index (size on disk per equation, segments, replicas) and one row per mode - which side
fused (``server``: the neural-search pipeline; ``client``: :mod:`mathsearch.opensearch.fusion` after
one
``_msearch``), end-to-end and cluster-side p50 / p95 / p99 and queries/s, the server's ``took``
and the verdict on the goal for the hybrid modes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mathsearch.bench.query import DEFAULT_GOAL, FIRST_STAGE_GOAL, GOAL_P50_MS, GOAL_P99_MS

logger = logging.getLogger(__name__)

__all__ = ["format_bench_query"]


def _mib(size: float) -> str:
    return f"{size / 2**20:,.1f} MiB" if size < 2**30 else f"{size / 2**30:,.2f} GiB"


def _triple(stats: Mapping[str, Any]) -> str:
    if not stats.get("n"):
        return f"{'-':>22}"
    return f"{stats['p50']:>6.1f} {stats['p95']:>7.1f} {stats['p99']:>7.1f}"


def _qps(stats: Mapping[str, Any]) -> str:
    return f"{stats['qps']:>6.1f}" if stats.get("qps") else f"{'-':>6}"


def _tokens(queries: Mapping[str, Any]) -> str:
    tokens = queries.get("mean_tokens") or {}
    if not tokens:
        return ""
    parts = [f"{kind} {count:.0f}" for kind, count in tokens.items()]
    return f" (mean math tokens: {', '.join(parts)})"


def _token_cuts(report: Mapping[str, Any]) -> str:
    parts = []
    max_df = report.get("max_df")
    if max_df is not None:
        parts.append(
            f", max_df={max_df:g} (BM25 leaves out query tokens in more than that share of docs)"
        )
    max_terms = report.get("max_terms")
    if max_terms:
        parts.append(f", max_terms={max_terms} (BM25 gets that many distinct query tokens)")
    depth = report.get("depth")
    if depth:
        parts.append(f", depth={depth} (hits per fusion / rrf subquery)")
    return "".join(parts)


def _goal_lines(size: Mapping[str, Any]) -> list[str]:
    """The goal verdict of every hybrid mode of one size, one line each."""
    verdicts = (size.get("goal") or {}).get("modes") or {}
    if not verdicts:
        return []
    fused = {row["mode"]: row.get("fused") for row in size["modes"]}
    scope = "" if size["equations"] >= 1_000_000 else " (the goal is for 1M; indicative)"
    lines = [
        f"  goal for the hybrid modes, p50 <= {GOAL_P50_MS:g} ms, p99 <= {GOAL_P99_MS:g} ms{scope}:"
    ]
    for mode, verdict in verdicts.items():
        e2e = "met" if verdict["end_to_end"] else "NOT met"
        cluster = "met" if verdict["cluster"] else "NOT met"
        side = f" (fused on the {fused[mode]} side)" if fused.get(mode) else ""
        lines.append(f"    {mode} end to end {e2e}, cluster {cluster}{side}")
    return lines


def _stage_lines(size: Mapping[str, Any]) -> list[str]:
    """Each row's p50 against kNN's, the second stage's share, and the issue's goals."""
    lines = []
    against = size.get("against_knn") or {}
    ratios = against.get("rows") or {}
    if ratios:
        parts = [
            f"{mode} {r.get('end_to_end', 0):.2f}x/{r.get('cluster', 0):.2f}x"
            for mode, r in ratios.items()
            if mode != "knn"
        ]
        lines.append(f"  p50 against knn (end to end / cluster): {', '.join(parts)}")
    for row in size["modes"]:
        stages = row.get("stages_ms")
        if stages:
            lines.append(
                f"  {row['mode']}: p50 query {stages['query']:.1f} ms + first stage "
                f"{stages['first_stage']:.1f} ms + second stage {stages['second_stage']:.1f} ms; "
                f"the second stage's median share {stages['second_stage_share']:.0%}"
            )
    default = against.get("default")
    if default:
        verdict = "met" if default["met"] else "NOT met"
        lines.append(
            f"  default profile end to end {default['end_to_end_ratio']:.2f}x knn p50, p99 "
            f"{default['p99_ms']:.1f} ms (goal <= {DEFAULT_GOAL['ratio_p50']:g}x, <= "
            f"{DEFAULT_GOAL['p99_ms']:g} ms): {verdict}"
        )
    first = against.get("first_stage")
    if first:
        verdict = "met" if first["met"] else "NOT met"
        lines.append(
            f"  first stage {first['mode']} cluster {first['cluster_ratio']:.2f}x knn p50, p99 "
            f"{first['p99_ms']:.1f} ms (goal <= {FIRST_STAGE_GOAL['ratio_p50']:g}x, <= "
            f"{FIRST_STAGE_GOAL['p99_ms']:g} ms): {verdict}"
        )
    return lines


def format_bench_query(report: Mapping[str, Any]) -> str:
    """The report as tables a person reads: one per index size."""
    model = report["model"]
    queries = report["queries"]
    corpus = report["corpus"]
    env = report["environment"]
    lines = [
        f"bench query: {model['name']} ({model['vector_field']}, {model['dim']}-d), "
        f"OpenSearch {env['opensearch']}, {env['nodes']} node(s), {env['cpu_count']} CPU(s), "
        f"heap {_mib(env['heap_bytes'])}; HNSW m={env['hnsw_m']} "
        f"ef_construction={env['hnsw_ef_construction']}",
        f"k={report['k']}{_token_cuts(report)}; per mode {report['warmup']} warm-up + "
        f"{report['queries_per_mode']} timed queries, sequential, one client; no query sent "
        "twice",
        f"default: {report.get('default_profile', '-')}; second-stage fields "
        f"{', '.join((report.get('rerank_fields') or {}).get('fields') or []) or 'none'} "
        f"({(report.get('rerank_fields') or {}).get('storage', '-')}, no ANN graph)",
        f"corpus: {corpus['unique']:,} unique real equations ({corpus['extracted']:,} extracted, "
        f"{corpus['duplicates']:,} duplicates; {corpus['failed']:,} records failed extraction "
        f"or parsing), {corpus['held_out']} held out as queries, "
        f"{corpus.get('indexable', corpus['unique'] - corpus['held_out']):,} indexable; "
        "beyond that, renamed replicas",
        f"queries: {queries['topics_ok']} topic formulas ({queries['topics_failed']} unreadable, "
        f"skipped) + {queries['held_ok']} held-out equations{_tokens(queries)}, interleaved; "
        f"query featurise+embed p50 {queries['features_ms']['p50']:.1f} ms, "
        f"p99 {queries['features_ms']['p99']:.1f} ms",
        "latency in ms (p50 / p95 / p99); cluster = Searcher.search with precomputed query "
        "features; took = server-side; topic/held = cluster p50 by query kind",
        "fused = where BM25 and kNN were fused: server = neural-search hybrid query + search "
        "pipeline (one _search); client = one _msearch of both, fused in Python, then one ids "
        "search for the k sources (took = the sum of both searches'; a _termvectors call for "
        "query tokens not cached yet counts in cluster, not in took)",
    ]
    for size in report["sizes"]:
        lines.append("")
        build = "reused" if size["reused"] else "built"
        head = (
            f"{size['equations']:,} equations: {size['index']} ({build}; build "
            f"{size['build_s']:.0f} s), {_mib(size['store_bytes'])} on disk = "
            f"{size['bytes_per_equation']:,.0f} B/equation, {size['segments']} segment(s)"
            + (" after a force merge" if size.get("force_merged") else "")
        )
        lines.append(head)
        replicas = size.get("replicas") or {}
        if replicas.get("documents"):
            how = (
                "copy (SHORTCUT: the original's vector, not the model's of the renamed equation)"
                if replicas["vectors"] == "copy"
                else "embedded by the real model"
            )
            lines.append(
                f"  {replicas['documents']:,} renamed replicas, vectors {how}; "
                f"{replicas['skipped']:,} unparsable after renaming skipped; tokens equal to "
                f"the renamed original's: {replicas.get('tokens_consistent', 0):.1%}"
            )
        lines.append(
            f"  {'mode':<13} {'fused':<6} {'end to end p50/p95/p99':>22} {'q/s':>6} | "
            f"{'cluster p50/p95/p99':>22} {'q/s':>6} | {'took p50/p99':>13} | "
            f"{'topic/held':>11} {'err':>4}"
        )
        for row in size["modes"]:
            took = row.get("took") or {}
            took_text = f"{took['p50']:>5.1f} {took['p99']:>6.1f}" if took.get("n") else "-"
            kinds = row.get("cluster_by_query_kind") or {}
            split = "/".join(
                f"{kinds[kind]['p50']:.1f}" if (kinds.get(kind) or {}).get("n") else "-"
                for kind in ("topic", "held")
            )
            lines.append(
                f"  {row['mode']:<13} {row.get('fused') or '-':<6} "
                f"{_triple(row['end_to_end'])} {_qps(row['end_to_end'])} | "
                f"{_triple(row['cluster'])} {_qps(row['cluster'])} | {took_text:>13} | "
                f"{split:>11} {row['errors']:>4}"
            )
        lines.extend(_stage_lines(size))
        lines.extend(_goal_lines(size))
    for note in report.get("notes") or []:
        lines.append(f"note: {note}")
    return "\n".join(lines)
