"""``mathsearch index``: a source's equations through the pipeline into an equation index.

The client side of the pipeline. It reads any source the indexer supports (files, or a library's
OpenSearch index, whose documents are enriched with ``math.*`` on the way), cuts the equations
into batches and either

* enqueues them on the ``parse`` queue for the Celery workers, waiting while more than
  ``max_queued`` batches wait in the queues (backpressure on queue depth), or
* with ``inline=True`` runs the same stages in this process (no broker, small jobs).

The job writes one vector field per encoder (``encoders``, default ``MATHSEARCH_ENCODERS``:
``gcn``); the index gets every field (dimension and space type from each model card) before
the first batch, and the report counts the equations a secondary encoder refused
(``refusals``; they are indexed with the other vectors, see :mod:`mathsearch.workers.pipeline`).

A progress bar shows enqueued / parsed / embedded / written / failed equations; the job ends
when every batch is done (or was given up after its retries: its equations are then written as
failure records here) and the index is refreshed, i.e. searchable. Extraction failures (an
unreadable file, a macro fragment) are written as failure records by the client.

Example::

    report = run_index(extract(["paper.tex"]), "mathsearch-equations", inline=True)
    report.written, report.failed, report.eq_per_s
    run_index(items, "eq", encoders=["gcn", "bitmap"], inline=True).refusals
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from opensearchpy import OpenSearch
from tqdm import tqdm

from mathsearch.core.errors import MappingError, MathsearchOpenSearchError
from mathsearch.core.redact import redact_url
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.opensearch.client import connect
from mathsearch.opensearch.document_removal import ProducedIds, remove_equations
from mathsearch.opensearch.enrichment import ensure_math_mapping
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.opensearch.vector_fields import field_storages
from mathsearch.runtime.embedders import Embedder, encoder_card
from mathsearch.workers.embedding import process_embedders
from mathsearch.workers.job_progress import LocalProgress, Progress, RedisProgress, Snapshot
from mathsearch.workers.pipeline import (
    JobSpec,
    batch_failures,
    embed_write_stage,
    parse_stage,
    write_outcome,
)
from mathsearch.workers.queues import EMBED, PARSE
from mathsearch.workers.settings import WorkerSettings

logger = logging.getLogger(__name__)


class IndexJobError(MathsearchOpenSearchError):
    """The job cannot start (no worker, Redis away) or did not finish."""


@dataclass
class IndexReport:
    """What one ``mathsearch index`` run did."""

    job_id: str
    index: str
    mode: str
    equations: int = 0
    written: int = 0
    failed: int = 0
    batches: int = 0
    failures_by_stage: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    lost_batches: list[str] = field(default_factory=list)
    missing_batches: list[str] = field(default_factory=list)
    resent_batches: list[str] = field(default_factory=list)
    enriched_index: str | None = None
    vector_fields: list[str] = field(default_factory=list)
    refusals: dict[str, int] = field(default_factory=dict)
    #: with ``prune``: what the pruning removed (``RemovalReport.to_dict()``), or why it did not run
    pruned: dict[str, Any] | None = None

    @property
    def eq_per_s(self) -> float:
        return self.equations / self.seconds if self.seconds > 0 else 0.0

    @property
    def complete(self) -> bool:
        return not self.missing_batches and self.written + self.failed == self.equations

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "eq_per_s": round(self.eq_per_s, 1), "complete": self.complete}


def batches(
    items: Iterable[EquationRecord | Failure], size: int, *, whole_documents: bool = False
) -> Iterator[list[EquationRecord] | Failure]:
    """Batches of ``size`` records; failures pass through one by one.

    With ``whole_documents`` a batch never splits a document (enrichment needs all of a
    document's equations together), so it may exceed ``size``.
    """
    batch: list[EquationRecord] = []
    for item in items:
        if isinstance(item, Failure):
            yield item
            continue
        if len(batch) >= size and (not whole_documents or item.doc_id != batch[-1].doc_id):
            yield batch
            batch = []
        batch.append(item)
    if batch:
        yield batch


class Broker:
    """The client's side of the broker: send parse tasks, read queue depth, check for workers."""

    def __init__(self, settings: WorkerSettings) -> None:
        from mathsearch.workers.app import create_app

        self.settings = settings
        self.app = create_app(settings)
        self.redis = redis.Redis.from_url(settings.redis_url, socket_timeout=10)
        self.queues = [settings.queue(PARSE), settings.queue(EMBED)]

    def check_workers(self) -> None:
        try:
            self.redis.ping()
        except redis.RedisError as exc:
            raise IndexJobError(
                f"Redis at {redact_url(self.settings.redis_url)} does not answer ({exc}): "
                "`mathsearch stack up`, or run the job with --inline"
            ) from exc
        answers = self.app.control.inspect(timeout=2.0).active_queues() or {}
        consumed = {queue["name"] for queues in answers.values() for queue in queues}
        if self.queues[0] not in consumed:
            raise IndexJobError(
                f"no worker consumes the {self.queues[0]!r} queue: start one with "
                f"`mathsearch worker --queues {','.join(self.queues)}`, or use --inline"
            )
        if self.queues[1] not in consumed:
            logger.warning("no worker consumes %r yet: batches wait there", self.queues[1])

    def depth(self) -> int | None:
        """Batches waiting in the parse and embed queues (None while Redis is away)."""
        from mathsearch.workers.metrics import queue_depths

        try:
            return sum(queue_depths(self.redis, self.queues))
        except redis.RedisError as exc:
            logger.warning("queue depth unavailable (%s); waiting", exc)
            return None

    def send(self, job: JobSpec, batch: str, records: list[dict[str, Any]]) -> None:
        deadline = time.monotonic() + 300
        while True:
            try:
                self.app.send_task(
                    "mathsearch.parse.batch",
                    args=[job.to_dict(), batch, records],
                    queue=self.queues[0],
                    retry=True,
                    retry_policy={"max_retries": 3, "interval_start": 0.5, "interval_max": 2},
                )
                return
            except Exception as exc:  # kombu/redis errors while Redis restarts
                if time.monotonic() > deadline:
                    raise IndexJobError(f"cannot enqueue batch {batch}: {exc}") from exc
                logger.warning("enqueue of %s failed (%s); retrying", batch, exc)
                time.sleep(2)


def run_index(
    items: Iterable[EquationRecord | Failure],
    index: str,
    *,
    inline: bool = False,
    enrich_index: str | None = None,
    client: OpenSearch | None = None,
    settings: OpenSearchSettings | None = None,
    worker_settings: WorkerSettings | None = None,
    batch_size: int | None = None,
    max_queued: int | None = None,
    stall_timeout: float = 600.0,
    progress: bool = True,
    encoders: Sequence[str] | None = None,
    rerank: Sequence[str] | None = None,
    resend_after: float | None = None,
    prune: bool = False,
) -> IndexReport:
    """Run one indexing job (see the module docstring); returns its report.

    A batch whose message the broker lost (a worker killed between Redis' ``BRPOP`` and its
    ``unacked`` entry: kombu cannot redeliver what it never recorded) is sent again, once,
    when nothing moved for ``resend_after`` seconds (default ``stall_timeout / 2``); tasks
    are idempotent, so a batch that was only slow costs a duplicate, never a double write
    (``report.resent_batches``). To do so the job keeps the records of the batches it has not
    yet seen finished, no more.

    ``encoders`` (families or ``.onnx`` paths, the primary first; default
    ``worker_settings.encoders``) each fill their own vector field; the workers must serve all
    of them (``mathsearch worker --encoders``), inline this process loads them. ``rerank``
    (default ``worker_settings.rerank_encoders``: the default search profile's second stage)
    fill exact-only fields beside them, kept as ``worker_settings.rerank_storage`` without an
    ANN graph (:mod:`mathsearch.opensearch.stored_vectors`); a field the index already has as
    a kNN field stays one.

    With ``prune`` a complete job then removes, for each document it read, the equations and
    failure records of this index that it did not produce: the positions a revised document
    no longer has (:mod:`mathsearch.opensearch.document_removal`). A document that could not
    be read as a whole keeps its equations; a job with batches that did not finish removes
    nothing (``report.pruned`` says why).

    Raises:
        IndexJobError: no worker consumes the parse queue, or Redis does not answer.
        ModelCardError: an encoder whose model or card is missing.
        MappingError: two encoders that write the same field, or a field that exists with
            another shape.
    """
    settings = settings or OpenSearchSettings.from_env()
    worker_settings = worker_settings or WorkerSettings.from_env()
    client = client or connect(settings)
    size = batch_size or worker_settings.batch_size
    limit = max_queued or worker_settings.max_queued_batches
    plan = vector_field_plan(encoders, rerank, worker_settings)
    run = _start_job(
        client, index, plan, settings=settings, worker_settings=worker_settings,
        inline=inline, enrich_index=enrich_index,
    )  # fmt: skip
    report = IndexReport(
        run.job.job_id, index, "inline" if inline else "workers", enriched_index=enrich_index,
        vector_fields=plan.fields,
    )  # fmt: skip
    produced = ProducedIds() if prune else None
    outcome = _run_batches(
        run, items, report, produced=produced, size=size, limit=limit,
        whole_documents=enrich_index is not None, progress=progress,
        stall_timeout=stall_timeout, resend_after=resend_after,
    )  # fmt: skip
    _count_outcome(report, outcome, run.tracker)
    _record_failures(run, report, outcome)
    _finish(run, report, outcome, enrich_index=enrich_index, produced=produced)
    return report


@dataclass
class FieldPlan:
    """The job's encoders (the primary first, then the second stage's) and their fields."""

    names: list[str]
    specs: list[VectorSpec]
    fields: list[str]


@dataclass
class _Job:
    """A started job and what its stages need: where it writes and how batches run."""

    job: JobSpec
    client: OpenSearch
    settings: OpenSearchSettings
    failures_index: str
    queue: Broker | None
    embedders: list[Embedder] | None
    tracker: Progress


@dataclass
class _Batches:
    """How the job's batches went: the last progress snapshot, the batches sent, the
    extraction failures and when the batches started (``time.perf_counter()``)."""

    snap: Snapshot
    sent: set[str]
    extraction: list[Failure]
    started: float


def vector_field_plan(
    encoders: Sequence[str] | None,
    rerank: Sequence[str] | None,
    worker_settings: WorkerSettings,
) -> FieldPlan:
    """The fields a job writes: each encoder's vector field from its model card (the workers
    load the same models), ``encoders`` (default ``worker_settings.encoders``) as kNN fields,
    then ``rerank`` (default ``worker_settings.rerank_encoders``) as exact-only ones in
    ``worker_settings.rerank_storage``, unless a kNN field of the job is theirs already.

    Raises:
        MappingError: two encoders of the job write the same field.
    """
    # each model's card names its vector field (the workers load the same models)
    names = list(encoders or worker_settings.encoders)
    specs = [VectorSpec.from_card(encoder_card(name)) for name in names]
    fields = [spec.field for spec in specs]
    if len(set(fields)) != len(fields):
        raise MappingError(f"encoders {', '.join(names)} write the same field: {fields}")
    second = list(worker_settings.rerank_encoders if rerank is None else rerank)
    for name in second:
        spec = VectorSpec.from_card(encoder_card(name), worker_settings.rerank_storage)
        if spec.field not in fields:  # a kNN field of the job serves the second stage too
            specs.append(spec)
            fields.append(spec.field)
            names.append(name)
    return FieldPlan(names, specs, fields)


def _start_job(
    client: OpenSearch,
    index: str,
    plan: FieldPlan,
    *,
    settings: OpenSearchSettings,
    worker_settings: WorkerSettings,
    inline: bool,
    enrich_index: str | None,
) -> _Job:
    """Check the workers (or load the models), create the indexes and the job's spec."""
    # the workers (or this process's models) first: a job that cannot run creates no index
    embedders = process_embedders(plan.names) if inline else None
    queue = None if inline else Broker(worker_settings)
    if queue is not None:
        queue.check_workers()
    ensure_equation_index(client, index, plan.specs, settings)
    failures_index = ensure_failures_index(client, settings)
    names_index = True
    if enrich_index:
        names_index = "index" in ensure_math_mapping(client, enrich_index, plan.specs[0])
    # how the index keeps each field decides how it is written (an older kNN field stays one)
    storages = field_storages(client, index)
    fields = plan.fields
    stored = {name: storages[name].value for name in fields if storages[name].exact_only}
    job = JobSpec.create(
        index, fields, failures_index, enrich_index=enrich_index, stored=stored,
        enrich_names_index=names_index,
    )  # fmt: skip
    tracker: Progress = LocalProgress() if queue is None else RedisProgress(queue.redis, job.job_id)
    return _Job(job, client, settings, failures_index, queue, embedders, tracker)


def _enqueue(
    run: _Job,
    stream: Iterable[EquationRecord | Failure],
    report: IndexReport,
    *,
    pending: _Pending,
    bar: _ProgressBar,
    size: int,
    limit: int,
    whole_documents: bool,
) -> tuple[set[str], list[Failure]]:
    """Send (or, inline, run) every batch; returns the batches sent and extraction failures."""
    sent: set[str] = set()
    extraction: list[Failure] = []
    for item in batches(stream, size, whole_documents=whole_documents):
        if isinstance(item, Failure):
            extraction.append(item)
            continue
        batch = f"b{len(sent)}"
        records = [record.to_dict() for record in item]
        sent.add(batch)
        report.equations += len(records)
        if run.queue is None:
            payload = parse_stage(run.job, batch, records, run.tracker)
            embed_write_stage(
                run.job,
                batch,
                payload,
                client=run.client,
                settings=run.settings,
                progress=run.tracker,
                embedders=run.embedders,
            )
        else:
            while (depth := run.queue.depth()) is None or depth >= limit:
                bar.poll(run.tracker, report.equations)
                pending.prune()
                time.sleep(0.1)
            run.queue.send(run.job, batch, records)
            pending.add(batch, records)
        bar.poll(run.tracker, report.equations)
    return sent, extraction


def _resender(run: _Job, pending: _Pending, report: IndexReport) -> Callable[[set[str]], None]:
    """What :func:`_wait` calls with the unfinished batches: send each kept one again, once."""

    def resend(missing: set[str]) -> None:
        for batch in sorted(missing - set(report.resent_batches)):
            records = pending.records.get(batch)
            if run.queue is not None and records is not None:
                logger.warning("batch %s not finished: sent again", batch)
                run.queue.send(run.job, batch, records)
                report.resent_batches.append(batch)

    return resend


def _run_batches(
    run: _Job,
    items: Iterable[EquationRecord | Failure],
    report: IndexReport,
    *,
    produced: ProducedIds | None,
    size: int,
    limit: int,
    whole_documents: bool,
    progress: bool,
    stall_timeout: float,
    resend_after: float | None,
) -> _Batches:
    """Send every batch, then wait until all are done or lost (a progress bar meanwhile)."""
    # the records of batches not yet seen finished, to send again if the broker loses them
    pending = _Pending(run.tracker, interval=10.0)
    bar = _ProgressBar(progress)
    start = time.perf_counter()
    try:
        stream = items if produced is None else _recorded(items, produced)
        sent, extraction = _enqueue(
            run, stream, report, pending=pending, bar=bar, size=size, limit=limit,
            whole_documents=whole_documents,
        )  # fmt: skip
        wait_for_resend = stall_timeout / 2 if resend_after is None else resend_after
        snap = _wait(
            run.tracker,
            sent,
            bar,
            report.equations,
            stall_timeout,
            resend=_resender(run, pending, report),
            resend_after=wait_for_resend,
        )
    finally:
        bar.close()
    return _Batches(snap, sent, extraction, start)


def _count_outcome(report: IndexReport, outcome: _Batches, tracker: Progress) -> None:
    """The last progress snapshot's counts into the report."""
    snap, sent = outcome.snap, outcome.sent
    report.batches = len(sent)
    report.written, report.failed = snap.written, snap.failed
    report.failures_by_stage = dict(snap.failures_by_stage)
    report.stage_seconds = {k: round(v, 3) for k, v in snap.seconds.items()}
    report.missing_batches = sorted(sent - snap.finished)
    report.refusals = refusal_totals(tracker)


def _record_failures(run: _Job, report: IndexReport, outcome: _Batches) -> None:
    """Write failure records for the batches given up and the extraction failures; count them."""
    extraction = outcome.extraction
    # batches given up after their last retry, and extraction failures: recorded here
    given_up: list[Failure] = []
    for batch, entry in outcome.snap.lost.items():
        report.lost_batches.append(batch)
        given_up += batch_failures(entry["records"], "write", "gave-up", entry["reason"])
        given_up += [Failure.from_dict(item) for item in entry.get("failures") or []]
    if extraction or given_up:
        _, recorded = write_outcome(
            run.client, run.job, [], [], extraction + given_up, settings=run.settings
        )
        for failure in recorded:
            report.failures_by_stage[failure.stage] = (
                report.failures_by_stage.get(failure.stage, 0) + 1
            )
        report.failed += len(recorded)
        report.equations += len(extraction)


def _finish(
    run: _Job,
    report: IndexReport,
    outcome: _Batches,
    *,
    enrich_index: str | None,
    produced: ProducedIds | None,
) -> None:
    """Make the job searchable (refresh), prune, drop the job's progress and log the totals."""
    index = report.index
    targets = [index, run.failures_index] + ([enrich_index] if enrich_index else [])
    run.client.indices.refresh(index=",".join(targets))
    report.seconds = time.perf_counter() - outcome.started
    if produced is not None:
        report.pruned = _prune(
            run.client, index, run.failures_index, produced, report, settings=run.settings
        )
    if isinstance(run.tracker, RedisProgress):
        run.tracker.delete()
    logger.info(
        "job %s: %d equations, %d written, %d failed in %.1f s",
        run.job.job_id,
        report.equations,
        report.written,
        report.failed,
        report.seconds,
    )


def _recorded(
    items: Iterable[EquationRecord | Failure], produced: ProducedIds
) -> Iterator[EquationRecord | Failure]:
    for item in items:
        produced.add(item)
        yield item


def _prune(
    client: OpenSearch,
    index: str,
    failures_index: str,
    produced: ProducedIds,
    report: IndexReport,
    *,
    settings: OpenSearchSettings,
) -> dict[str, Any]:
    """Remove what the job's documents no longer have, once every batch is accounted for."""
    if report.missing_batches:
        logger.warning("job %s: batches did not finish, nothing pruned", report.job_id)
        return {"skipped": "batches of the job did not finish; nothing was removed"}
    start = time.perf_counter()
    removal = remove_equations(
        client, index, failures_index, produced.documents, keep=produced.ids, settings=settings
    )
    removal.kept_unreadable = sorted(produced.unreadable)
    return {**removal.to_dict(), "seconds": round(time.perf_counter() - start, 3)}


def refusal_totals(tracker: Progress) -> dict[str, int]:
    """``{"<field>:<reason>": equations}`` over the job's finished batches (the ``refusals``
    of their ``done`` entries: equations indexed without that encoder's vector)."""
    if isinstance(tracker, LocalProgress):
        entries = list(tracker.entries.get("done", {}).values())
    elif isinstance(tracker, RedisProgress):
        try:
            raw = tracker.redis.hgetall(tracker.key("done"))
        except redis.RedisError as exc:
            logger.warning("refusal counts unavailable (%s)", exc)
            return {}
        entries = [json.loads(value) for value in raw.values()]
    else:
        return {}
    totals: dict[str, int] = {}
    for entry in entries:
        for key, count in (entry.get("refusals") or {}).items():
            totals[key] = totals.get(key, 0) + int(count)
    return dict(sorted(totals.items()))


class _ProgressBar:
    """enqueued / parsed / embedded / written / failed, on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.bar = tqdm(
            total=0, unit="eq", desc="indexing", disable=not enabled, dynamic_ncols=True
        )
        self.shown = 0.0

    def show(self, snap: Snapshot, enqueued: int) -> None:
        if self.bar.disable:
            return
        self.bar.total = enqueued
        self.bar.n = snap.written + snap.failed
        self.bar.set_postfix(
            enqueued=enqueued,
            parsed=snap.parsed,
            embedded=snap.embedded,
            written=snap.written,
            failed=snap.failed,
            refresh=False,
        )
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()

    def poll(self, tracker: Progress, enqueued: int) -> None:
        """Refresh while enqueuing, at most twice a second (a snapshot reads every batch)."""
        if self.bar.disable or time.monotonic() - self.shown < 0.5:
            return
        self.shown = time.monotonic()
        try:
            self.show(tracker.snapshot(), enqueued)
        except redis.RedisError:
            return


class _Pending:
    """The records of sent batches, dropped once the progress shows them finished."""

    def __init__(self, tracker: Progress, interval: float) -> None:
        self.tracker = tracker
        self.interval = interval
        self.records: dict[str, list[dict[str, Any]]] = {}
        self.pruned = time.monotonic()

    def add(self, batch: str, records: list[dict[str, Any]]) -> None:
        self.records[batch] = records
        self.prune()

    def prune(self, finished: set[str] | None = None) -> None:
        """Forget finished batches (reads the progress at most every ``interval`` s)."""
        if finished is None:
            if time.monotonic() - self.pruned < self.interval:
                return
            self.pruned = time.monotonic()
            try:
                finished = self.tracker.snapshot().finished
            except redis.RedisError:
                return
        for batch in finished & self.records.keys():
            del self.records[batch]


def _wait(
    tracker: Progress,
    sent: set[str],
    bar: _ProgressBar,
    enqueued: int,
    stall_timeout: float,
    *,
    resend: Callable[[set[str]], None] | None = None,
    resend_after: float = 300.0,
) -> Snapshot:
    """Poll until every batch is done or lost, or nothing moved for ``stall_timeout`` s.

    After ``resend_after`` s without movement, ``resend`` gets the unfinished batches (once).
    """
    last: tuple[int, ...] = ()
    moved = time.monotonic()
    resent = False
    while True:
        try:
            snap = tracker.snapshot()
        except redis.RedisError as exc:  # Redis restarting: keep waiting
            logger.warning("progress unavailable (%s); waiting", exc)
            time.sleep(1)
            continue
        bar.show(snap, enqueued)
        if sent <= snap.finished:
            return snap
        state = (snap.parsed, snap.embedded, snap.written, snap.failed, len(snap.finished))
        if state != last:
            last, moved = state, time.monotonic()
        elif resend is not None and not resent and time.monotonic() - moved > resend_after:
            resent = True
            resend(sent - snap.finished)
            moved = time.monotonic()
        elif time.monotonic() - moved > stall_timeout:
            logger.error("no progress for %.0f s; giving up waiting", stall_timeout)
            return snap
        time.sleep(0.2)
