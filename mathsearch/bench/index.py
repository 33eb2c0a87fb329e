"""``mathsearch bench index``: equations/s from LaTeX to searchable, against Approach Zero.

One run, on the same real equations:

1. each stage alone in one process - parse (featurisation), embed (ONNX Runtime, batches of
   ``batch_size``, every field the pipeline writes: the kNN encoders' and the default profile's
   second-stage ones, each timed) and write (bulk upserts of the finished documents with those
   fields into a fresh index, then a refresh) - the limits the pipeline runs against on this
   machine;
2. the pipeline end to end: ``inline`` (no broker) and through ``mathsearch worker`` with 1, 2
   and 4 pool processes, each into a fresh index, from the first batch enqueued until the index
   is refreshed (searchable); with the time each stage took, summed over the processes;
3. Approach Zero (pya0) indexing the same equations on the same disk as the OpenSearch data
   (:mod:`mathsearch.evaluation.pya0_peer`), and the ratio.

The report names the CPU (``cpu``, :func:`mathsearch.core.machine.describe_cpu`);
:func:`format_bench_index` is the table a person reads.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from mathsearch.core.machine import describe_cpu
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import equation_actions
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.stored_vectors import encode_stored
from mathsearch.workers.embedding import process_embedders, vectors_of
from mathsearch.workers.index_job import run_index, vector_field_plan
from mathsearch.workers.settings import WorkerSettings
from mathsearch.workers.worker_process import start_worker, stop_worker

logger = logging.getLogger(__name__)


def stage_limits(
    client: OpenSearch,
    records: Sequence[EquationRecord],
    settings: OpenSearchSettings,
    size: int,
    worker_settings: WorkerSettings | None = None,
) -> dict[str, dict[str, Any]]:
    """Each stage alone in this process: equations/s of parse, embed and write, over the fields
    the pipeline writes (:func:`~mathsearch.workers.index_job.vector_field_plan`: the kNN
    encoders' and the second stage's exact-only ones). ``embed`` is every encoder in turn,
    with each one's own rate in ``by_field``; ``write`` upserts the documents with all those
    fields into a fresh index, then refreshes it."""
    plan = vector_field_plan(None, None, worker_settings or WorkerSettings.from_env())
    featuriser = Featuriser()
    start = time.perf_counter()
    parsed = [p for p in featuriser.parse_batch(records) if isinstance(p, ParsedEquation)]
    parse_s = time.perf_counter() - start
    n = len(parsed)
    columns: dict[str, list[list[float]]] = {}
    by_field: dict[str, float] = {}
    embed_s = 0.0
    for spec, encoder in zip(plan.specs, process_embedders(plan.names), strict=True):
        start = time.perf_counter()
        vectors: list[list[float]] = []
        for first in range(0, n, size):
            vectors += vectors_of(encoder, parsed[first : first + size])
        seconds = time.perf_counter() - start
        embed_s += seconds
        by_field[spec.field] = round(n / seconds, 1)
        columns[spec.field] = vectors
    alias = f"{settings.index_prefix}-bench-write-{uuid.uuid4().hex[:6]}"
    ensure_equation_index(client, alias, plan.specs, settings)
    docs = [p.to_dict() for p in parsed]
    try:
        start = time.perf_counter()
        stored = {spec.field: spec.storage for spec in plan.specs if spec.exact_only}
        actions = equation_actions(alias, docs, encode_stored(columns, stored))  # as workers do
        BulkWriter(client, settings, refresh="end").write(actions)
        write_s = time.perf_counter() - start
    finally:
        _drop(client, alias)
    out: dict[str, dict[str, Any]] = {
        name: {"equations": n, "seconds": round(s, 3), "eq_per_s": round(n / s, 1)}
        for name, s in (("parse", parse_s), ("embed", embed_s), ("write", write_s))
    }
    out["embed"]["by_field"] = by_field
    out["write"]["fields"] = list(plan.fields)
    return out


def pipeline_run(
    client: OpenSearch,
    records: Sequence[EquationRecord],
    settings: OpenSearchSettings,
    worker_settings: WorkerSettings,
    *,
    processes: int | None,
    batch_size: int,
) -> dict[str, Any]:
    """One end-to-end run (``processes=None``: inline) into a fresh index."""
    alias = f"{settings.index_prefix}-bench-index-{uuid.uuid4().hex[:6]}"
    worker: subprocess.Popen | None = None
    ws = dataclasses.replace(worker_settings, queue_prefix=f"bench{uuid.uuid4().hex[:6]}-")
    try:
        if processes is not None:
            worker = start_worker(ws, processes, hostname=f"bench{processes}")
            time.sleep(2)  # the pool's other processes come up just after the first consumes
        report = run_index(
            records,
            alias,
            inline=processes is None,
            client=client,
            settings=settings,
            worker_settings=ws,
            batch_size=batch_size,
            progress=False,
        )
        searchable = client.count(index=alias)["count"]
    finally:
        if worker is not None:
            stop_worker(worker, timeout=120)
        _drop(client, alias)
    return {
        "processes": processes or "inline",
        "equations": report.equations,
        "written": report.written,
        "failed": report.failed,
        "searchable": searchable,
        "seconds": round(report.seconds, 2),
        "eq_per_s": round(report.eq_per_s, 1),
        "stage_seconds": report.stage_seconds,
    }


def pya0_run(records: Sequence[EquationRecord], workdir: Path) -> dict[str, Any]:
    from mathsearch.evaluation.pya0_peer import index_with_pya0

    result = index_with_pya0([(r.eq_id, r.latex or "") for r in records], workdir)
    shutil.rmtree(workdir / "pya0-index", ignore_errors=True)
    return {**result.to_dict(), "workdir": str(workdir)}


def run_bench_index(
    records: Sequence[EquationRecord],
    client: OpenSearch,
    *,
    processes: Sequence[int] = (1, 2, 4),
    batch_size: int = 128,
    pya0_dir: Path | None = None,
    settings: OpenSearchSettings | None = None,
    worker_settings: WorkerSettings | None = None,
) -> dict[str, Any]:
    """The whole benchmark (see the module docstring); a JSON-ready report."""
    settings = settings or OpenSearchSettings.from_env()
    worker_settings = worker_settings or WorkerSettings.from_env()
    report: dict[str, Any] = {
        "equations": len(records),
        "cpus": os.cpu_count(),
        "cpu": describe_cpu().as_dict(),
        "batch_size": batch_size,
        "stage_limits": stage_limits(client, records, settings, batch_size, worker_settings),
        "runs": [],
    }
    for count in (None, *processes):
        logger.info("pipeline run: %s", count or "inline")
        report["runs"].append(
            pipeline_run(
                client, records, settings, worker_settings, processes=count, batch_size=batch_size
            )
        )
    workdir = pya0_dir or settings.state_dir / "bench-pya0"
    workdir.mkdir(parents=True, exist_ok=True)
    logger.info("Approach Zero (pya0) into %s", workdir)
    report["pya0"] = pya0_run(records, workdir)
    best = max(report["runs"], key=lambda run: run["eq_per_s"])
    report["best"] = best["processes"]
    report["ratio_vs_pya0"] = round(best["eq_per_s"] / max(report["pya0"]["eq_per_s"], 1e-9), 2)
    return report


def _drop(client: OpenSearch, alias: str) -> None:
    client.indices.delete(index=f"{alias}-0*", ignore_unavailable=True)
    client.indices.delete_index_template(name=f"{alias}-template", ignore=404)


def format_bench_index(report: dict[str, Any]) -> str:
    """:func:`run_bench_index`'s report (with its ``source``) as the table a person reads."""
    lines = [f"{report['equations']} real equations from {report['source']}, {report['cpus']} CPUs"]
    if report.get("cpu"):
        lines.append(f"cpu: {report['cpu']['summary']}")
    lines.append("each stage alone, one process (equations/s):")
    for name, row in report["stage_limits"].items():
        fields = row.get("by_field") or {}
        each = ", ".join(f"{field} {rate:.1f}" for field, rate in fields.items())
        detail = f"  ({each})" if len(fields) > 1 else ""
        lines.append(f"  {name:<6} {row['eq_per_s']:>8.1f}{detail}")
    lines.append("end to end, LaTeX to searchable:")
    lines.append("  processes  eq/s    seconds  written  failed  stage seconds (all processes)")
    for run in report["runs"]:
        stages = ", ".join(f"{k} {v:.1f}" for k, v in sorted(run["stage_seconds"].items()))
        lines.append(
            f"  {run['processes']!s:<9} {run['eq_per_s']:>6.1f} {run['seconds']:>9.1f} "
            f"{run['written']:>8} {run['failed']:>7}  {stages}"
        )
    pya0 = report["pya0"]
    lines.append(
        f"Approach Zero (pya0): {pya0['eq_per_s']:.1f} eq/s ({pya0['indexed']} indexed, "
        f"{pya0['rejected']} rejected, {pya0['seconds']:.1f} s, searchable: {pya0['searchable']})"
    )
    lines.append(f"best mathsearch run ({report['best']}) / pya0: {report['ratio_vs_pya0']:.2f}x")
    return "\n".join(lines)
