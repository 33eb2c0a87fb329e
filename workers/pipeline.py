"""The indexing pipeline's stages as plain functions (run by Celery tasks or inline).

A job's equations travel in batches (JSON lists of ``EquationRecord`` dicts):

1. :func:`parse_stage` featurises a batch (LaTeX -> MathML graph, math tokens, symbols;
   :mod:`mathsearch.indexer.parse`) and returns the payload of the embed stage;
2. :func:`embed_write_stage` embeds the parsed equations with every encoder of the job (this
   process's embedders, loaded once per process,
   :func:`mathsearch.workers.embedding.process_embedders`),
   upserts them into the job's equation index, one vector field per encoder (and, when the job
   enriches a library index, one partial ``math`` update per document, from the primary
   encoder's vectors) and writes the failure records.

A job names its vector fields (:attr:`JobSpec.fields`, the primary first). The primary
encoder's refusal of an equation makes a failure record (stage ``embed``, the refusal's reason);
another encoder's refusal keeps the equation with the vectors it has and records the refusal in
the document (``embed_refusals: ["vec_seq2seq_v1:sympy-parse"]``), counted in the batch's
``done`` entry (``refusals``). The parse stage computes SymPy prefix tokens only when a
``seq2seq`` encoder is in the job.

Every equation of a batch ends in exactly one place: the equation index, or the failures index with
its stage and reason (docs/architecture.md, rule 3). :func:`write_outcome` keeps that true across
re-runs: an equation that is written has its stale failure record removed, and a failure is not
recorded for an equation the index already holds. Transient trouble (OpenSearch refusing or away)
raises :class:`~mathsearch.core.errors.WriteError` or a connection error, for the caller to retry
the whole batch - safe, because every write is an upsert by equation id.

Example (inline, no broker)::

    job = JobSpec.create("mathsearch-equations", ["vec_gcn_v1"], "mathsearch-failures")
    payload = parse_stage(job, "b0", [record.to_dict() for record in records])
    entry = embed_write_stage(job, "b0", payload, client=connect())
    entry["written"], entry["failed"]
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opensearchpy import OpenSearch

from mathsearch.indexer.records import Failure, scrub_surrogates, storable_id
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.documents import equation_actions, failure_actions, failure_id
from mathsearch.opensearch.enrichment import enrichment_actions, group_by_document
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.stored_vectors import encode_stored
from mathsearch.runtime.embedder_base import Embedder, EmbedRefusal
from mathsearch.runtime.families import needs_prefix
from mathsearch.workers import metrics
from mathsearch.workers.embedding import embed_items, process_embedders
from mathsearch.workers.job_progress import Progress
from mathsearch.workers.parsing import parse_records

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSpec:
    """What every batch of a job needs to know (JSON, sent with each task).

    Attributes:
        job_id: the job's id (progress keys, logs).
        index: the equation index alias the equations are upserted into.
        vector_field: the primary encoder's field (``vec_gcn_v1``): its refusal of an equation
            is a failure record. A worker without a model for one of the job's fields refuses
            the batch (``model-mismatch`` failure records) instead of mixing.
        failures_index: where failure records go.
        enrich_index: a library index whose documents get ``math.*`` partial updates (or None).
        vector_fields: every field of the job, the primary first; empty in payloads of older
            clients, which meant ``[vector_field]``.
        stored: the job's exact-only fields (a second stage's, no ANN graph) and how each is
            kept (``float16`` / ``int8``: :mod:`mathsearch.opensearch.stored_vectors`); their
            vectors are written as encoded bytes. Empty: every field is a kNN field.
    """

    job_id: str
    index: str
    vector_field: str
    failures_index: str
    enrich_index: str | None = None
    vector_fields: tuple[str, ...] = field(default=())
    stored: dict[str, str] = field(default_factory=dict)
    #: whether the library index maps ``math.index`` (an older enrichment's does not, and adding
    #: it is left out: see :func:`~mathsearch.opensearch.enrichment.ensure_math_mapping`)
    enrich_names_index: bool = True

    @classmethod
    def create(
        cls, index: str, vector_fields: str | Sequence[str], failures_index: str, **kw: Any
    ) -> JobSpec:
        """A new job writing ``vector_fields`` (one field, or several: the primary first)."""
        fields = (vector_fields,) if isinstance(vector_fields, str) else tuple(vector_fields)
        if not fields:
            raise ValueError("a job needs at least one vector field")
        extra = fields if len(fields) > 1 else ()
        job_id = uuid.uuid4().hex[:12]
        return cls(job_id, index, fields[0], failures_index, vector_fields=extra, **kw)

    @property
    def fields(self) -> tuple[str, ...]:
        """The job's vector fields, the primary first."""
        return self.vector_fields or (self.vector_field,)

    @property
    def needs_prefix(self) -> bool:
        """Whether an encoder of the job reads SymPy prefix tokens (a ``seq2seq`` field)."""
        return needs_prefix(self.fields)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["vector_fields"] = list(self.vector_fields)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        values = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        values["vector_fields"] = tuple(values.get("vector_fields") or ())
        values["stored"] = dict(values.get("stored") or {})
        return cls(**values)


@dataclass
class Embedded:
    """A batch after the embed stage: the kept equations, one vector column per field (``None``
    where a secondary encoder refused), each equation's refusals, and the failures."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    vectors: dict[str, list[list[float] | None]] = field(default_factory=dict)
    refusals: list[list[str]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def refusal_counts(self) -> dict[str, int]:
        """``{"vec_x_v1:reason": equations}`` over the batch."""
        counts: dict[str, int] = {}
        for row in self.refusals:
            for key in row:
                counts[key] = counts.get(key, 0) + 1
        return counts


def parse_stage(
    job: JobSpec, batch: str, records: list[dict[str, Any]], progress: Progress | None = None
) -> dict[str, Any]:
    """Featurise ``records``; the payload for :func:`embed_write_stage`.

    The BoW vector is left out of the payload (nothing downstream reads it).
    """
    start = time.perf_counter()
    parsed: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for item in parse_records(records, with_prefix=job.needs_prefix):
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


def embed(parsed: Sequence[dict[str, Any]], embedders: Sequence[Embedder]) -> Embedded:
    """Every encoder over the batch: the first (primary) one's refusal is a failure, another's a
    refusal recorded on the equation (which keeps the vectors it has)."""
    out = Embedded()
    if not parsed or not embedders:
        return out
    primary = embedders[0]
    for item, result in zip(parsed, embed_items(primary, parsed), strict=True):
        if isinstance(result, EmbedRefusal):
            out.failures.append(_failure(item, "embed", result.reason, result.detail))
        else:
            out.kept.append(item)
            out.vectors.setdefault(primary.vector_field, []).append(result)
    out.refusals = [[] for _ in out.kept]
    for embedder in embedders[1:]:
        column: list[list[float] | None] = []
        results = embed_items(embedder, out.kept) if out.kept else []
        for number, result in enumerate(results):
            if isinstance(result, EmbedRefusal):
                column.append(None)
                out.refusals[number].append(f"{embedder.vector_field}:{result.reason}")
            else:
                column.append(result)
        out.vectors[embedder.vector_field] = column
    return out


def job_embedders(
    job: JobSpec, embedders: Sequence[Embedder] | None = None
) -> tuple[list[Embedder], str | None]:
    """The embedders of the job's fields in the job's order (default: this process's), or why
    this process cannot serve the job (``model-mismatch``)."""
    available = list(embedders) if embedders is not None else process_embedders()
    by_field = {embedder.vector_field: embedder for embedder in available}
    missing = [name for name in job.fields if name not in by_field]
    if missing:
        have = ", ".join(by_field) or "nothing"
        wants = ", ".join(job.fields)
        if len(job.fields) == 1 and len(by_field) == 1:
            detail = f"this worker's model writes {have}, the job wants {wants}"
        else:
            detail = f"this worker's models write {have}, the job wants {wants}"
        return [], detail
    return [by_field[name] for name in job.fields], None


def embed_write_stage(
    job: JobSpec,
    batch: str,
    payload: dict[str, Any],
    *,
    client: OpenSearch,
    settings: OpenSearchSettings | None = None,
    progress: Progress | None = None,
    embedders: Sequence[Embedder] | None = None,
) -> dict[str, Any]:
    """Embed and write one parsed batch; returns its ``done`` progress entry.

    ``embedders`` default to this process's (``MATHSEARCH_ENCODERS``, loaded once); they must
    write every field of the job, else the batch is refused (``model-mismatch``).

    Raises:
        WriteError / opensearchpy ConnectionError: OpenSearch refused or was away after the
            writer's own retries; nothing of the batch is lost, retry it whole.
    """
    parsed = list(payload.get("parsed") or [])
    failures = [Failure.from_dict(item) for item in payload.get("failures") or []]
    seconds = dict(payload.get("seconds") or {})
    start = time.perf_counter()
    chosen, mismatch = job_embedders(job, embedders)
    if mismatch is not None:
        failures += [_failure(item, "embed", "model-mismatch", mismatch) for item in parsed]
        result = Embedded()
    else:
        result = embed(parsed, chosen)
        failures += result.failures
    refusals = result.refusal_counts()
    seconds["embed"] = time.perf_counter() - start
    metrics.batch_done("embed", seconds["embed"], ok=len(result.kept), failed=failures)
    for key, count in refusals.items():
        metrics.EQUATIONS.labels(f"embed:{key.split(':', 1)[0]}", "refused").inc(count)
    if progress is not None:
        entry = {"n": len(result.kept), "seconds": {"embed": seconds["embed"]}}
        progress.mark("embedded", batch, entry)
    start = time.perf_counter()
    written, failures = write_outcome(
        client,
        job,
        result.kept,
        result.vectors,
        failures,
        settings=settings,
        refusals=result.refusals if len(job.fields) > 1 else None,
    )
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
    if refusals:
        entry["refusals"] = refusals
    if progress is not None:
        progress.mark("done", batch, entry)
    return {**entry, "seconds": seconds}


def write_outcome(
    client: OpenSearch,
    job: JobSpec,
    parsed: Sequence[dict[str, Any]],
    vectors: Mapping[str, Sequence[Sequence[float] | None]] | Sequence[Sequence[float]],
    failures: Sequence[Failure],
    *,
    settings: OpenSearchSettings | None = None,
    refusals: Sequence[Sequence[str]] | None = None,
) -> tuple[int, list[Failure]]:
    """Upsert equations (+ enrichment) and failure records so each id is in one place.

    ``vectors`` maps each field to one vector per equation (``None``: refused), or is the
    primary field's vectors alone; ``refusals`` (one list per equation) become the documents'
    ``embed_refusals``. Returns the number of equations in the index (written now, or held
    already by an earlier run) and the failure records written.
    """
    writer = BulkWriter(client, settings, refresh="false")
    given = dict(vectors) if isinstance(vectors, Mapping) else {job.vector_field: vectors}
    primary = given.get(job.vector_field) or []
    columns = encode_stored(given, job.stored)  # exact-only fields hold encoded bytes
    # one bad action must not sink a bulk request: strings become valid UTF-8 (lone surrogates
    # -> U+FFFD) and ids storable (OpenSearch validates ids per request, not per item)
    parsed = [writable(item) for item in parsed]
    failures = [writable_failure(failure) for failure in failures]
    actions = list(equation_actions(job.index, parsed, columns, refusals=refusals))
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
            [primary[n] for n, item in enumerate(parsed) if item["eq_id"] not in refused],
        )
        enriched = writer.write(
            enrichment_actions(
                job.enrich_index,
                documents,
                model_field=job.vector_field,
                equations_index=job.index if job.enrich_names_index else None,
            )
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
        report = writer.write(
            [*failure_actions(job.failures_index, recorded, target=job.index), *cleanup]
        )
        lost = {f.doc_id for f in report.failures}
        if lost:  # never silent: these equations are in neither place
            logger.error(
                "%d failure records refused by OpenSearch: %s",
                len(lost),
                "; ".join(f"{f.doc_id}: {f.reason}" for f in report.failures[:3]),
            )
            recorded = [f for f in recorded if failure_id(job.index, f.eq_id) not in lost]
    for failure in recorded:
        metrics.failure(failure.stage, failure.reason)
    return len(written_ids) + len(held), recorded


#: Longest equation id written (a failure record's id adds the target index name).
WRITE_ID_BYTES = 384


def writable(item: dict[str, Any]) -> dict[str, Any]:
    """A parsed equation OpenSearch can take: strings valid UTF-8 (lone surrogates -> U+FFFD),
    the id :func:`~mathsearch.indexer.records.storable_id` (the numeric ``graph`` and ``bow``
    untouched)."""
    out = {
        key: value if key in ("graph", "bow") else scrub_surrogates(value, depth=2)
        for key, value in item.items()
    }
    out["eq_id"] = storable_id(str(out.get("eq_id", "")), WRITE_ID_BYTES)
    extra = out.get("extra")
    if isinstance(extra, dict) and "keywords" in extra:  # the one extra field written
        words = extra["keywords"]
        words = [words] if isinstance(words, str) else words if isinstance(words, list) else []
        out["extra"] = {**extra, "keywords": [w for w in words if isinstance(w, str)]}
    elif extra is not None and not isinstance(extra, dict):
        out["extra"] = {}
    return out


def writable_failure(failure: Failure) -> Failure:
    """A failure record OpenSearch can take (see :func:`writable`)."""
    clean = Failure.from_dict(scrub_surrogates(failure.to_dict(), depth=1))
    clean.eq_id = storable_id(clean.eq_id, WRITE_ID_BYTES)
    return clean


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
