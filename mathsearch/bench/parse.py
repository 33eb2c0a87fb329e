"""``mathsearch bench parse``: equations/s per stage and end to end, in one process (one core).

Stages, each timed over the whole corpus ``repeat`` times (the median is reported):

- ``extract``: reading the source files into equation records (once);
- ``convert``: LaTeX -> MathML tree (the configured converter);
- ``graph``: MathML tree -> KDD graph (ids, positions, parents) + the 256-d BoW vector;
- ``tokens``: math tokens for BM25 + symbols for keyword fields;
- ``serialise``: the tree as MathML text (stored in the index; not part of the target);
- ``canonical``: the normal forms of ``canon_tokens`` (:mod:`mathsearch.indexer.canonical_form`, the
  ``MATHSEARCH_CANONICAL_FORM`` setting's readers; skipped when it is ``off``);
- ``end_to_end``: :meth:`Featuriser.parse_batch` (convert + graph + BoW + tokens + symbols +
  canonical forms), the figure the >= 2,000 equations/s per core target is about.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from mathsearch.indexer.converters import Converted
from mathsearch.indexer.extract import extract
from mathsearch.indexer.lexical import bow_vector, math_tokens, symbols
from mathsearch.indexer.mathml_graph import build_graph
from mathsearch.indexer.mathml_tree import to_mathml
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import EquationRecord
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.vocabulary import default_vocabulary

logger = logging.getLogger(__name__)


def _median_rate(count: int, run: Callable[[], None], repeat: int) -> tuple[float, list[float]]:
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    return (count / median if median else float("inf")), seconds


def bench_parse(
    sources: Sequence[str],
    fmt: str | None = None,
    *,
    limit: int | None = None,
    repeat: int = 3,
    converter: str = "python",
) -> dict[str, Any]:
    """Run the benchmark; returns the figures as a dict (see the module docstring)."""
    settings = IndexerSettings.from_env()
    start = time.perf_counter()
    records: list[EquationRecord] = []
    extracted = 0
    for item in extract(sources, fmt, settings):
        extracted += 1
        if isinstance(item, EquationRecord) and item.latex:
            records.append(item)
            if limit is not None and len(records) >= limit:
                break
    extract_seconds = time.perf_counter() - start
    vocab = default_vocabulary()
    featuriser = Featuriser(vocab, converter, settings)
    latexes = [r.latex or "" for r in records]
    converted = featuriser.converter.convert_batch(latexes)
    trees = [c.tree for c in converted if isinstance(c, Converted)]
    graphs = [build_graph(tree, vocab, settings) for tree in trees]
    count = len(records)
    # The fixtures above hold millions of objects; freeze them so the cyclic GC does not rescan
    # them during every timed run (a streaming pipeline never holds a whole corpus like this).
    gc.collect()
    gc.freeze()

    def run_convert() -> None:
        for begin in range(0, count, 256):
            featuriser.converter.convert_batch(latexes[begin : begin + 256])

    def run_graph() -> None:
        for tree in trees:
            bow_vector(build_graph(tree, vocab, settings))

    def run_tokens() -> None:
        for tree in trees:
            math_tokens(tree)
            symbols(tree)

    def run_serialise() -> None:
        for tree in trees:
            to_mathml(tree)

    def run_canonical() -> None:
        from mathsearch.indexer.canonical_form import CanonicalFormError, canonical_tokens

        full = settings.canonical_form == "sympy"
        for latex in latexes:
            with contextlib.suppress(CanonicalFormError):
                canonical_tokens(latex, settings=settings, sympy=full)

    def run_end_to_end() -> None:
        for begin in range(0, count, 256):
            featuriser.parse_batch(records[begin : begin + 256])

    stages: dict[str, Any] = {}
    for name, total, run in (
        ("convert", count, run_convert),
        ("graph", len(trees), run_graph),
        ("tokens", len(trees), run_tokens),
        ("serialise", len(trees), run_serialise),
        ("canonical", count if settings.canonical_form != "off" else 0, run_canonical),
        ("end_to_end", count, run_end_to_end),
    ):
        if not total:
            continue
        rate, seconds = _median_rate(total, run, repeat)
        stages[name] = {
            "equations": total,
            "equations_per_second": round(rate, 1),
            "microseconds_per_equation": round(1e6 / rate, 1) if rate else None,
            "seconds": [round(s, 3) for s in seconds],
        }
    featuriser.close()
    gc.unfreeze()
    e2e = stages["end_to_end"]["microseconds_per_equation"] or 0.0
    share = {
        name: round(stages[name]["microseconds_per_equation"] / e2e, 3)
        for name in ("convert", "graph", "tokens", "canonical")
        if e2e and name in stages
    }
    nodes = [g.num_nodes for g in graphs]
    return {
        "sources": list(sources),
        "converter": converter,
        "equations": count,
        "records_read": extracted,
        "converted": len(trees),
        "extract": {
            "seconds": round(extract_seconds, 3),
            "records_per_second": round(extracted / extract_seconds, 1)
            if extract_seconds
            else None,
        },
        "stages": stages,
        "share_of_end_to_end": share,
        "graph_nodes": {
            "median": statistics.median(nodes) if nodes else 0,
            "mean": round(statistics.fmean(nodes), 1) if nodes else 0,
            "max": max(nodes) if nodes else 0,
        },
        "repeat": repeat,
        "process": {
            "pid": os.getpid(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
    }


def format_bench(result: dict[str, Any]) -> str:
    """The benchmark as a table for the terminal."""
    lines = [
        f"bench parse: {result['equations']} equations ({result['converter']} converter), "
        f"one process, median of {result['repeat']} runs",
        f"  extract     {result['extract']['records_per_second']:>10,.0f} records/s",
    ]
    for name, stage in result["stages"].items():
        lines.append(
            f"  {name:<11} {stage['equations_per_second']:>10,.0f} equations/s  "
            f"{stage['microseconds_per_equation']:>8.1f} us/equation"
        )
    share = ", ".join(f"{k} {v:.0%}" for k, v in result["share_of_end_to_end"].items())
    lines.append(f"  share of end to end: {share}")
    nodes = result["graph_nodes"]
    lines.append(f"  graph nodes per equation: median {nodes['median']}, max {nodes['max']}")
    return "\n".join(lines)
