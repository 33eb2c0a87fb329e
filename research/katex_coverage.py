"""Coverage and speed of the KaTeX backend over the real hep-th 2003 equations.

Usage::

    python -m research.katex_coverage [PATH] [--batch-size 500] [--limit N] [--json]

PATH defaults to ``../shared/data/hepth2003/equation.txt`` (relative to the repository). The
equations are those of the project's extractor (:func:`mathsearch.indexer.hepth.iter_hepth`), so the
figures
compare with ``mathsearch parse --report`` of the python converter; its failure records (macro
fragments, commented-out records) are counted separately. Every equation is converted by one
:class:`~mathsearch.indexer.katex_backend.KatexConverter` in batches; the
timing covers conversion only (node is started and katex installed before the clock starts).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mathsearch.cli.common import emit
from mathsearch.indexer.hepth import iter_hepth
from mathsearch.indexer.katex_backend import KatexConverter, KatexError
from mathsearch.indexer.records import Failure
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

DEFAULT_PATH = Path(__file__).resolve().parents[1] / "../shared/data/hepth2003/equation.txt"


def load_bodies(path: Path, limit: int | None = None) -> tuple[list[str], Counter[str], int]:
    """Equations of ``path`` (:func:`iter_hepth`), the failure reasons, and the item count."""
    bodies: list[str] = []
    skipped: Counter[str] = Counter()
    count = 0
    for item in iter_hepth(path):
        count += 1
        if isinstance(item, Failure):
            skipped[item.reason] += 1
        elif item.latex:
            bodies.append(item.latex)
        if limit is not None and len(bodies) >= limit:
            break
    return bodies, skipped, count


def measure(bodies: list[str], batch_size: int) -> dict[str, Any]:
    """Convert ``bodies`` in batches of ``batch_size``; counts, speed and failure breakdown."""
    reasons: Counter[str] = Counter()
    macros: Counter[str] = Counter()
    environments: Counter[str] = Counter()
    examples: dict[str, str] = {}
    converted = 0
    with KatexConverter(IndexerSettings.from_env()) as converter:
        version = converter.version
        started = time.perf_counter()
        for first in range(0, len(bodies), batch_size):
            batch = bodies[first : first + batch_size]
            for latex, result in zip(batch, converter.convert_batch(batch), strict=True):
                if isinstance(result, str):
                    converted += 1
                    continue
                reasons[result.reason] += 1
                examples.setdefault(result.reason, " ".join(str(result).split())[:160])
                name = result.name if isinstance(result, KatexError) else None
                if name and result.reason == "unknown-macro":
                    macros[name] += 1
                elif name and result.reason == "unknown-environment":
                    environments[name] += 1
                logger.debug("%s: %s", result.reason, latex[:80])
        seconds = time.perf_counter() - started
        restarts = converter.restarts
    total = len(bodies)
    return {
        "katex": version,
        "equations": total,
        "converted": converted,
        "coverage": converted / total if total else 0.0,
        "seconds": round(seconds, 3),
        "equations_per_second": round(total / seconds, 1) if seconds else 0.0,
        "batch_size": batch_size,
        "node_restarts": restarts,
        "failures_by_reason": dict(reasons.most_common()),
        "failure_examples": examples,
        "top_unknown_macros": macros.most_common(20),
        "unknown_macro_distinct": len(macros),
        "top_unknown_environments": environments.most_common(10),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--limit", type=int, default=None, help="stop after N equations")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    path = args.path.resolve()
    if not path.is_file():
        sys.stderr.write(f"no such file: {path}\n")
        return 2
    bodies, skipped, count = load_bodies(path, args.limit)
    report = {"source": str(path), "items": count, "failure_records": dict(skipped)}
    report.update(measure(bodies, args.batch_size))
    if args.json:
        emit(json.dumps(report, indent=2))
        return 0
    emit(f"source      {report['source']}")
    emit(f"items       {count} ({sum(skipped.values())} failure records: {dict(skipped)})")
    emit(f"katex       {report['katex']}, batch size {args.batch_size}")
    emit(
        f"converted   {report['converted']} / {report['equations']} "
        f"= {100 * report['coverage']:.2f} %"
    )
    emit(
        f"speed       {report['equations_per_second']} equations/s "
        f"({report['seconds']} s, {report['node_restarts']} node restarts)"
    )
    emit("failures by reason:")
    for reason, count in report["failures_by_reason"].items():
        emit(f"  {reason:24s} {count:6d}   e.g. {report['failure_examples'][reason]}")
    emit(f"top 20 unknown macros ({report['unknown_macro_distinct']} distinct):")
    for name, count in report["top_unknown_macros"]:
        emit(f"  {name:24s} {count:6d}")
    if report["top_unknown_environments"]:
        emit("unknown environments:")
        for name, count in report["top_unknown_environments"]:
            emit(f"  {name:24s} {count:6d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
