"""Scaling down with real processes: two workers share a job, one leaves mid-batch.

* SIGTERM (Celery's warm shutdown, what ``stop_worker`` and a scale-down send): the leaving
  worker finishes its running batch, gives back what it had not started, and exits 0;
* SIGKILL of the whole worker (main process and pool) mid-batch: its unacknowledged batch is
  redelivered to the other worker after ``MATHSEARCH_VISIBILITY_TIMEOUT``.

Either way the job completes with every equation indexed or recorded as failed, once: no lost
batch, no failure record other than the corpus' own extraction and parse failures, and the
job's ``written`` equal to the documents in the index (progress entries are idempotent).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator

import pytest
from opensearchpy import OpenSearch

from mathsearch.workers.app import create_app
from mathsearch.workers.index_job import IndexReport

from .conftest import WorkerProcess, accounted, fresh_alias
from .test_pipeline_faults import Job

pytestmark = pytest.mark.services

SHORT_VISIBILITY = {"MATHSEARCH_VISIBILITY_TIMEOUT": "5"}
OWN_FAILURE_STAGES = {"extract", "convert", "parse"}  # the corpus's own bad input


@pytest.fixture
def alias(client: OpenSearch, settings) -> Iterator[str]:
    with fresh_alias(client, settings, "scale-down") as name:
        yield name


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def busy(app, worker: WorkerProcess, workers: int = 2) -> bool:
    """Whether a pool process of ``worker`` runs a batch now.

    The broadcast returns as soon as all ``workers`` have answered (not after the whole
    timeout), so a poll takes milliseconds and a batch of a fraction of a second is caught.
    """
    children = set(worker.children())
    active = app.control.inspect(timeout=1, limit=workers).active() or {}
    return any(task.get("worker_pid") in children for tasks in active.values() for task in tasks)


def check(report: IndexReport, client, settings, alias: str, items) -> None:
    assert report.complete, report.to_dict()
    assert not report.lost_batches and not report.missing_batches
    assert set(report.failures_by_stage) <= OWN_FAILURE_STAGES, report.failures_by_stage
    indexed, failed = accounted(client, alias, settings, items)
    assert report.written == len(indexed) == client.count(index=alias)["count"]
    assert report.failed == len(failed)


def test_warm_shutdown_of_one_of_two_workers_loses_nothing(
    client, settings, alias, corpus, pipeline
) -> None:
    leaving = pipeline["spawn"](concurrency=1)
    pipeline["spawn"](concurrency=1)
    app = create_app(pipeline["settings"])
    items = corpus  # 1,225 items, 62 batches: long enough to catch one mid-batch
    job = Job(items=items, index=alias, worker_settings=pipeline["settings"], batch_size=20)
    job.start()
    wait_for(lambda: busy(app, leaving), "a batch on the leaving worker")
    leaving.process.send_signal(signal.SIGTERM)  # warm shutdown, mid-batch
    assert leaving.wait_exit(timeout=90) == 0, leaving.output()
    assert "warm shutdown" in leaving.output().lower()
    report = job.finish()
    check(report, client, settings, alias, items)


def test_kill_9_of_one_of_two_workers_mid_batch_is_redelivered(
    client, settings, alias, corpus, pipeline
) -> None:
    killed = pipeline["spawn"](concurrency=1, **SHORT_VISIBILITY)
    pipeline["spawn"](concurrency=1, **SHORT_VISIBILITY)
    app = create_app(pipeline["settings"])
    items = corpus  # 1,225 items, 62 batches: long enough to catch one mid-batch
    job = Job(items=items, index=alias, worker_settings=pipeline["settings"], batch_size=20)
    job.start()
    wait_for(lambda: busy(app, killed), "a batch on the worker to kill")
    killed.kill_hard()  # main process and pool: the batch stays unacknowledged in Redis
    report = job.finish()
    check(report, client, settings, alias, items)
