"""The indexing pipeline's stages as plain functions (run by Celery tasks or inline).

A job's equations travel in batches (JSON lists of ``EquationRecord`` dicts):

1. :func:`parse_stage` featurises a batch (LaTeX -> MathML graph, math tokens, symbols;
   :mod:`indexer.parse`) and returns the payload of the embed stage;
2. :func:`embed_write_stage` embeds the parsed equations with this process's ONNX session
   (loaded once per process, :func:`workers.embedding.process_encoder`), upserts them into the
   job's equation index (and, when the job enriches a library index, one partial ``math``
   update per document) and writes the failure records.

Every equation of a batch ends in exactly one place: the equation index, or the failures index
with its stage and reason (DESIGN.md rule 3). :func:`write_outcome` keeps that true across
re-runs: an equation that is written has its stale failure record removed, and a failure is not
recorded for an equation the index already holds. Transient trouble (OpenSearch refusing or away)
raises :class:`~opensearch.errors.WriteError` or a connection error, for the caller to retry
the whole batch - safe, because every write is an upsert by equation id.

Example (inline, no broker)::

    job = JobSpec.create("mathsearch-equations", "vec_gcn_v1", "mathsearch-failures")
    payload = parse_stage(job, "b0", [record.to_dict() for record in records])
    entry = embed_write_stage(job, "b0", payload, client=connect())
    entry["written"], entry["failed"]
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from opensearchpy import OpenSearch

from indexer.errors import MathMLError
from indexer.mathml_graph import EquationGraph
from indexer.records import Failure
from opensearch.bulk_writer import BulkWriter
from opensearch.documents import equation_actions, failure_actions, failure_id
from opensearch.enrichment import enrichment_actions, group_by_document
from opensearch.settings import OpenSearchSettings
from workers import metrics
from workers.embedding import graph_vectors, process_encoder
from workers.job_progress import Progress
from workers.parsing import parse_records

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSpec:
    """What every batch of a job needs to know (JSON, sent with each task).

    Attributes:
        job_id: the job's id (progress keys, logs).
        index: the equation index alias the equations are upserted into.
        vector_field: the model's field (``vec_gcn_v1``); a worker whose model writes another
            field refuses the batch (``model-mismatch`` failure records) instead of mixing.
        failures_index: where failure records go.
        enrich_index: a library index whose documents get ``math.*`` partial updates (or None).
    """

    job_id: str
    index: str
    vector_field: str
    failures_index: str
    enrich_index: str | None = None

    @classmethod
    def create(cls, index: str, vector_field: str, failures_index: str, **kw: Any) -> JobSpec:
        return cls(uuid.uuid4().hex[:12], index, vector_field, failures_index, **kw)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


def parse_stage(
    job: JobSpec, batch: str, records: list[dict[str, Any]], progress: Progress | None = None
) -> dict[str, Any]:
    """Featurise ``records``; the payload for :func:`embed_write_stage`.

    The BoW vector is left out of the payload (nothing downstream reads it).
    """
    start = time.perf_counter()
    parsed: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for item in parse_records(records):
        if item.get("failure"):
            failures.append(item)
        else:
            item.pop("bow", None)
            parsed.append(item)
    seconds = time.perf_counter() - start
    metrics.batch_done("parse", seconds, ok=len(parsed), failed=failures)
    if progress is not None:
        entry = {"n": len(parsed) + len(failures), "failed": len(failures)}
        progress.mark("parsed", batch, {**entry, "seconds": {"parse": seconds}})
    return {"parsed": parsed, "failures": failures, "seconds": {"parse": seconds}}


def embed(parsed: Sequence[dict[str, Any]]) -> tuple[list[dict], list[list[float]], list[Failure]]:
    """Vectors of parsed equations; an equation the model cannot take becomes a failure."""
    graphs: list[EquationGraph] = []
    kept: list[dict[str, Any]] = []
    failures: list[Failure] = []
    for item in parsed:
        try:
            graphs.append(EquationGraph.from_dict(item["graph"]))
            kept.append(item)
        except (MathMLError, KeyError, TypeError) as exc:
            failures.append(_failure(item, "embed", "invalid-graph", exc))
    if not kept:
        return [], [], failures
    encoder = process_encoder()
    try:
        return kept, graph_vectors(encoder, graphs), failures
    except Exception:  # one bad graph must not sink the batch: find it
        logger.warning("batch of %d failed to embed; embedding one by one", len(kept))
    alone: list[dict[str, Any]] = []
    vectors: list[list[float]] = []
    for item, graph in zip(kept, graphs, strict=True):
        try:
            vectors.append(graph_vectors(encoder, [graph])[0])
            alone.append(item)
        except Exception as exc:
            failures.append(_failure(item, "embed", "encoder-error", exc))
    return alone, vectors, failures


def embed_write_stage(
    job: JobSpec,
    batch: str,
    payload: dict[str, Any],
    *,
    client: OpenSearch,
    settings: OpenSearchSettings | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Embed and write one parsed batch; returns its ``done`` progress entry.

    Raises:
        WriteError / opensearchpy ConnectionError: OpenSearch refused or was away after the
            writer's own retries; nothing of the batch is lost, retry it whole.
    """
    parsed = list(payload.get("parsed") or [])
    failures = [Failure.from_dict(item) for item in payload.get("failures") or []]
    seconds = dict(payload.get("seconds") or {})
    start = time.perf_counter()
    field = process_encoder().card.vector_field
    if field != job.vector_field:
        detail = f"this worker's model writes {field}, the job wants {job.vector_field}"
        failures += [_failure(item, "embed", "model-mismatch", detail) for item in parsed]
        parsed, vectors = [], []
    else:
        parsed, vectors, embed_failures = embed(parsed)
        failures += embed_failures
    seconds["embed"] = time.perf_counter() - start
    metrics.batch_done("embed", seconds["embed"], ok=len(parsed), failed=failures)
    if progress is not None:
        entry = {"n": len(parsed), "seconds": {"embed": seconds["embed"]}}
        progress.mark("embedded", batch, entry)
    start = time.perf_counter()
    written, failures = write_outcome(client, job, parsed, vectors, failures, settings=settings)
    seconds["write"] = time.perf_counter() - start
    metrics.batch_done("write", seconds["write"], ok=written, failed=[])
    by_stage: dict[str, int] = {}
    for failure in failures:
        by_stage[failure.stage] = by_stage.get(failure.stage, 0) + 1
    entry = {
        "n": written + len(failures),
        "written": written,
        "failed": len(failures),
        "failures_by_stage": by_stage,
        "seconds": {"write": seconds["write"]},
    }
    if progress is not None:
        progress.mark("done", batch, entry)
    return {**entry, "seconds": seconds}


def write_outcome(
    client: OpenSearch,
    job: JobSpec,
    parsed: Sequence[dict[str, Any]],
    vectors: Sequence[Sequence[float]],
    failures: Sequence[Failure],
    *,
    settings: OpenSearchSettings | None = None,
) -> tuple[int, list[Failure]]:
    """Upsert equations (+ enrichment) and failure records so each id is in one place.

    Returns the number of equations in the index (written now, or held already by an earlier
    run) and the failure records written.
    """
    writer = BulkWriter(client, settings, refresh="false")
    actions = list(equation_actions(job.index, parsed, {job.vector_field: vectors}))
    report = writer.write(actions)
    ids = {item["eq_id"] for item in parsed}
    by_id = {item["eq_id"]: item for item in parsed}
    failures = list(failures)
    refused = {f.doc_id for f in report.failures if f.doc_id in ids}
    failures += [
        _failure(by_id[f.doc_id], "write", "write-refused", f"{f.status} {f.reason}")
        for f in report.failures
        if f.doc_id in ids
    ]
    written_ids = [eq_id for eq_id in by_id if eq_id not in refused]
    if job.enrich_index and written_ids:
        documents = group_by_document(
            [by_id[i] for i in written_ids],
            [vectors[n] for n, item in enumerate(parsed) if item["eq_id"] not in refused],
        )
        enriched = writer.write(
            enrichment_actions(job.enrich_index, documents, model_field=job.vector_field)
        )
        failures += [
            Failure(f"doc:{f.doc_id}", f.doc_id, "enrich", "write-refused", f"{f.status}")
            for f in enriched.failures
        ]
    # exactly one place per equation: no failure record for what the index holds ...
    held = existing_ids(client, job.index, [f.eq_id for f in failures if f.stage != "enrich"])
    recorded = [f for f in failures if f.eq_id not in held]
    if held:
        logger.info("%d failures not recorded: the index already holds them", len(held))
    # ... and no stale failure record (from an earlier run) for what was just written
    keys = [failure_id(job.index, eq_id) for eq_id in written_ids]
    stale = existing_ids(client, job.failures_index, keys)
    cleanup = [{"_op_type": "delete", "_index": job.failures_index, "_id": i} for i in stale]
    if recorded or cleanup:
        writer.write([*failure_actions(job.failures_index, recorded, target=job.index), *cleanup])
    for failure in recorded:
        metrics.failure(failure.stage, failure.reason)
    return len(written_ids) + len(held), recorded


def existing_ids(client: OpenSearch, index: str, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` the index holds right now (a real-time ``mget``, refresh not needed)."""
    if not ids:
        return set()
    answer = client.mget(index=index, body={"ids": list(ids)}, _source=False)
    return {doc["_id"] for doc in answer.get("docs", []) if doc.get("found")}


def batch_failures(
    records: Sequence[dict[str, Any]], stage: str, reason: str, detail: str
) -> list[Failure]:
    """Every equation of a batch as a failure (a batch given up as a whole)."""
    return [_failure(record, stage, reason, detail) for record in records]


def _failure(item: dict[str, Any], stage: str, reason: str, detail: object) -> Failure:
    return Failure(
        eq_id=str(item.get("eq_id", "")),
        doc_id=str(item.get("doc_id", "")),
        stage=stage,
        reason=reason,
        detail=str(detail)[:500],
        source=str(item.get("source", "")),
        excerpt=" ".join(str(item.get("latex") or "").split())[:120],
    )
