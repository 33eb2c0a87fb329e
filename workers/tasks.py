"""Celery tasks: thin wrappers over plain functions, JSON arguments, ids not objects.

``mathsearch.parse.batch`` (queue ``parse``) featurises a batch and hands it to
``mathsearch.embed.batch`` (queue ``embed``), which embeds it with the process's ONNX session
and writes it. Both are idempotent and acknowledged late. Only transient errors are retried
(OpenSearch or Redis away or refusing, with exponential backoff); anything else about a batch
becomes failure records with their reason, so a job always finishes. A batch still failing
after the last retry is marked ``lost`` in the job's progress with the reason, for the client
to report and record.

Poison (see :mod:`mathsearch.workers.dead_letter`): a batch whose arguments have the wrong
shape (a job that is not a job, records that are not a list of equation dicts, a payload that is
not an object) is not run: it goes to the dead-letter list (``bad-arguments``) and, when its job and
batch id are readable, the batch is marked ``lost`` (with the equations that were readable) so
the client's job still finishes; the wrong number of arguments is ``bad-arguments`` too. Any
other task that fails for good (a bug) is dead-lettered as ``task-failed`` and its batch, unless
already ``done`` or ``lost``, marked ``lost`` (its equations become failure records on the
client). Neither is retried.

The tasks are ``shared_task`` s: this module does not import the app; the app
(:mod:`mathsearch.workers.app`) includes it, and clients send tasks by name.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

import redis
from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import TransportError

from mathsearch.core.errors import WriteError
from mathsearch.indexer.records import Failure
from mathsearch.opensearch.client import connect
from mathsearch.workers.dead_letter import dead_letter, dead_letter_key
from mathsearch.workers.health import describe_worker
from mathsearch.workers.job_progress import RedisProgress
from mathsearch.workers.parsing import parse_records
from mathsearch.workers.pipeline import (
    JobSpec,
    batch_failures,
    embed_write_stage,
    parse_stage,
    write_outcome,
)
from mathsearch.workers.settings import WorkerSettings

logger = logging.getLogger(__name__)

TRANSIENT = (WriteError, OSConnectionError, redis.ConnectionError, redis.TimeoutError)


@cache
def _settings() -> WorkerSettings:
    return WorkerSettings.from_env()


@cache
def _client() -> OpenSearch:
    return connect()


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(_settings().redis_url)


def _progress(job: JobSpec) -> RedisProgress:
    return RedisProgress(_redis(), job.job_id)


class BadArgumentsError(ValueError):
    """A task's arguments have the wrong shape (a poison message)."""


class PoisonSafeTask(Task):
    """A task that fails for good is dead-lettered with its arguments (truncated)."""

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # the wrong number of arguments fails the call itself: "parse_batch() missing ..."
        call = isinstance(exc, TypeError) and f"{self.run.__name__}()" in str(exc)
        bad = call or isinstance(exc, BadArgumentsError)
        reason = "bad-arguments" if bad else "task-failed"
        queue = (self.request.delivery_info or {}).get("routing_key")
        body = {"task": self.name, "id": task_id, "args": args, "kwargs": kwargs}
        key = dead_letter_key(_settings().queue_prefix)
        detail = f"{type(exc).__name__}: {exc}"[:300]
        dead_letter(_redis(), key, reason, detail, queue=queue, body=body)
        if not bad and isinstance(args, list | tuple) and len(args) == 3:
            # a batch that failed for good (a bug): lost, so its job finishes and records it
            records = args[2].get("parsed") if isinstance(args[2], dict) else args[2]
            _refuse(args[0], args[1], records, exc, unless_finished=True)


def check_job(job: Any) -> JobSpec:
    """The job of a task's arguments, or :class:`BadArgumentsError`."""
    if not isinstance(job, dict):
        raise BadArgumentsError(f"job is a {type(job).__name__}, not an object")
    missing = [k for k in ("job_id", "index", "vector_field", "failures_index") if k not in job]
    if missing:
        raise BadArgumentsError(f"job lacks {', '.join(missing)}")
    if not all(isinstance(job[k], str) for k in ("job_id", "index", "vector_field")):
        raise BadArgumentsError("job_id, index and vector_field must be strings")
    try:
        return JobSpec.from_dict(job)
    except (TypeError, ValueError) as exc:
        raise BadArgumentsError(f"job: {exc}") from exc


def check_records(records: Any) -> list[dict]:
    """Equation dicts of a task's arguments, or :class:`BadArgumentsError`."""
    if not isinstance(records, list):
        raise BadArgumentsError(f"records is a {type(records).__name__}, not a list")
    bad = sum(1 for r in records if not isinstance(r, dict) or not isinstance(r.get("eq_id"), str))
    if bad:
        raise BadArgumentsError(f"{bad} of {len(records)} records are not equation objects")
    return records


def _refuse(
    job: Any, batch: Any, records: Any, exc: BaseException, *, unless_finished: bool = False
) -> None:
    """Mark a poison batch ``lost`` (if its job and id are readable) so its job finishes; the
    task then fails with ``exc`` and :class:`PoisonSafeTask` dead-letters it. With
    ``unless_finished``, a batch already ``done`` or ``lost`` (after its retries) is left."""
    try:
        spec = check_job(job)
    except BadArgumentsError:
        return
    if not isinstance(batch, str):
        return
    progress = _progress(spec)
    try:
        if unless_finished and any(
            progress.redis.hexists(progress.key(stage), batch) for stage in ("done", "lost")
        ):
            return
    except redis.RedisError:
        logger.exception("could not read the progress of batch %s", batch)
        return
    ok = [
        r for r in (records if isinstance(records, list) else [])
        if isinstance(r, dict) and isinstance(r.get("eq_id"), str)
    ]  # fmt: skip
    entry = {
        "reason": f"{type(exc).__name__}: {exc}"[:500],
        "records": [{k: r.get(k) for k in ("eq_id", "doc_id", "source", "latex")} for r in ok],
        "failures": [],
    }
    try:
        progress.mark("lost", batch, entry)
    except redis.RedisError:
        logger.exception("could not mark poison batch %s lost", batch)


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, TransportError) and not isinstance(exc, OSConnectionError):
        status = exc.status_code
        return isinstance(status, int) and (status == 429 or status >= 500)
    return isinstance(exc, TRANSIENT)


@shared_task(name="mathsearch.ping", acks_late=True)
def ping(payload: dict) -> dict:
    """Round-trip check: returns the payload and the worker's pid and host."""
    return describe_worker(payload)


@shared_task(name="mathsearch.parse.records", acks_late=True)
def parse(records: list[dict]) -> list[dict]:
    """Featurise equation records (JSON dicts); see
    :func:`mathsearch.workers.parsing.parse_records`."""
    return parse_records(records)


@shared_task(
    name="mathsearch.parse.batch", bind=True, acks_late=True, ignore_result=True,
    base=PoisonSafeTask,
)  # fmt: skip
def parse_batch(self: Any, job: dict, batch: str, records: list[dict]) -> None:
    """Featurise one batch, then send it to the embed queue."""
    try:
        spec = check_job(job)
        records = check_records(records)
        if not isinstance(batch, str):
            raise BadArgumentsError(f"batch id is a {type(batch).__name__}")
    except BadArgumentsError as exc:
        _refuse(job, batch, records, exc)
        raise
    try:
        payload = parse_stage(spec, batch, records, _progress(spec))
    except SoftTimeLimitExceeded:
        detail = f"parsing the batch ran past {_settings().task_time_limit} s"
        failures = batch_failures(records, "parse", "batch-time-limit", detail)
        payload = {"parsed": [], "failures": [f.to_dict() for f in failures]}
    except TRANSIENT as exc:
        raise _retry(self, spec, batch, records, exc) from exc
    embed_batch.apply_async(args=[job, batch, payload], retry=True)


@shared_task(
    name="mathsearch.embed.batch", bind=True, acks_late=True, ignore_result=True,
    base=PoisonSafeTask,
)  # fmt: skip
def embed_batch(self: Any, job: dict, batch: str, payload: dict) -> dict:
    """Embed and write one parsed batch; see
    :func:`mathsearch.workers.pipeline.embed_write_stage`."""
    try:
        spec = check_job(job)
        if not isinstance(payload, dict) or not isinstance(batch, str):
            raise BadArgumentsError(f"payload is a {type(payload).__name__}, not an object")
        check_records(payload.get("parsed") or [])
        if not isinstance(payload.get("failures") or [], list):
            raise BadArgumentsError("payload failures is not a list")
    except BadArgumentsError as exc:
        parsed = payload.get("parsed") if isinstance(payload, dict) else None
        _refuse(job, batch, parsed, exc)
        raise
    try:
        return embed_write_stage(spec, batch, payload, client=_client(), progress=_progress(spec))
    except Exception as exc:
        if _transient(exc):
            parsed = payload.get("parsed") or []
            raise _retry(self, spec, batch, parsed, exc, payload=payload) from exc
        # not transient (a bug, a time limit): the batch's equations become failure records
        logger.exception("batch %s of job %s failed", batch, spec.job_id)
        reason = "batch-time-limit" if isinstance(exc, SoftTimeLimitExceeded) else "internal-error"
        parsed = payload.get("parsed") or []
        failures = batch_failures(parsed, "embed", reason, f"{type(exc).__name__}: {exc}")
        failures += [Failure.from_dict(item) for item in payload.get("failures") or []]
        try:
            held, recorded = write_outcome(_client(), spec, [], [], failures)
        except Exception as again:
            raise _retry(self, spec, batch, parsed, again, payload=payload) from again
        entry: dict[str, Any] = {"n": len(failures), "written": held, "failed": len(recorded)}
        entry["failures_by_stage"] = {"embed": len(recorded)}
        _progress(spec).mark("done", batch, entry)
        return entry


def _retry(
    task: Any,
    job: JobSpec,
    batch: str,
    records: list[dict],
    exc: BaseException,
    *,
    payload: dict | None = None,
) -> Any:
    """Retry with backoff; after the last retry mark the batch ``lost``.

    The ``lost`` entry keeps the batch's equations (and the failure records it already had),
    so the client records every one of them.
    """
    settings = _settings()
    retries = task.request.retries
    if retries >= settings.task_max_retries:
        logger.error("batch %s of %s lost after %d retries: %s", batch, job.job_id, retries, exc)
        entry = {
            "reason": f"{type(exc).__name__}: {exc}"[:500],
            "records": [
                {k: r.get(k) for k in ("eq_id", "doc_id", "source", "latex")} for r in records
            ],
            "failures": (payload or {}).get("failures") or [],
        }
        try:
            _progress(job).mark("lost", batch, entry)
        except redis.RedisError:
            logger.exception("could not mark batch %s lost", batch)
        return exc
    delay = settings.retry_delay(retries)
    logger.warning("batch %s: %s; retry %d in %.0f s", batch, exc, retries + 1, delay)
    return task.retry(exc=exc, countdown=delay, max_retries=settings.task_max_retries)
