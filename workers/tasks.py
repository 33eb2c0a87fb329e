"""Celery tasks: thin wrappers over plain functions, JSON arguments, ids not objects.

``mathsearch.parse.batch`` (queue ``parse``) featurises a batch and hands it to
``mathsearch.embed.batch`` (queue ``embed``), which embeds it with the process's ONNX session
and writes it. Both are idempotent and acknowledged late. Only transient errors are retried
(OpenSearch or Redis away or refusing, with exponential backoff); anything else about a batch
becomes failure records with their reason, so a job always finishes. A batch still failing
after the last retry is marked ``lost`` in the job's progress with the reason, for the client
to report and record.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import TransportError

from indexer.records import Failure
from opensearch.client import connect
from opensearch.errors import WriteError
from workers.app import app
from workers.health import describe_worker
from workers.job_progress import RedisProgress
from workers.parsing import parse_records
from workers.pipeline import JobSpec, batch_failures, embed_write_stage, parse_stage, write_outcome
from workers.settings import WorkerSettings

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


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, TransportError) and not isinstance(exc, OSConnectionError):
        status = exc.status_code
        return isinstance(status, int) and (status == 429 or status >= 500)
    return isinstance(exc, TRANSIENT)


@app.task(name="mathsearch.ping", acks_late=True)
def ping(payload: dict) -> dict:
    """Round-trip check: returns the payload and the worker's pid and host."""
    return describe_worker(payload)


@app.task(name="mathsearch.parse.records", acks_late=True)
def parse(records: list[dict]) -> list[dict]:
    """Featurise equation records (JSON dicts); see :func:`workers.parsing.parse_records`."""
    return parse_records(records)


@app.task(name="mathsearch.parse.batch", bind=True, acks_late=True, ignore_result=True)
def parse_batch(self: Any, job: dict, batch: str, records: list[dict]) -> None:
    """Featurise one batch, then send it to the embed queue."""
    spec = JobSpec.from_dict(job)
    try:
        payload = parse_stage(spec, batch, records, _progress(spec))
    except SoftTimeLimitExceeded:
        detail = f"parsing the batch ran past {_settings().task_time_limit} s"
        failures = batch_failures(records, "parse", "batch-time-limit", detail)
        payload = {"parsed": [], "failures": [f.to_dict() for f in failures]}
    except TRANSIENT as exc:
        raise _retry(self, spec, batch, records, exc) from exc
    embed_batch.apply_async(args=[job, batch, payload], retry=True)


@app.task(name="mathsearch.embed.batch", bind=True, acks_late=True, ignore_result=True)
def embed_batch(self: Any, job: dict, batch: str, payload: dict) -> dict:
    """Embed and write one parsed batch; see :func:`workers.pipeline.embed_write_stage`."""
    spec = JobSpec.from_dict(job)
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
            raise _retry(self, spec, batch, parsed, again, payload) from again
        entry = {"n": len(failures), "written": held, "failed": len(recorded)}
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
