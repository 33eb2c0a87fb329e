"""Faults with real processes: every input equation ends indexed or recorded as failed, once.

A pool process killed mid-batch, a whole worker killed, Redis restarted and OpenSearch refusing
writes for a while (a ``read_only_allow_delete`` block: real 429s) - and a refusal that outlasts
every retry, whose batches are given up and recorded, then indexed by a re-run.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from opensearchpy import OpenSearch

from mathsearch.opensearch.schema import resolve_alias
from mathsearch.stack.redis_server import RedisSpec
from mathsearch.stack.redis_server import start as redis_start
from mathsearch.stack.redis_server import stop as redis_stop
from mathsearch.workers.app import create_app
from mathsearch.workers.index_job import IndexReport, run_index
from mathsearch.workers.queues import PARSE

from .conftest import accounted, free_port, fresh_alias

pytestmark = pytest.mark.services

FAST_RETRIES = {
    "MATHSEARCH_BULK_MAX_RETRIES": "1",
    "MATHSEARCH_BULK_BACKOFF": "0.2",
    "MATHSEARCH_TASK_RETRY_BACKOFF": "0.5",
    "MATHSEARCH_TASK_RETRY_MAX_BACKOFF": "2",
    "MATHSEARCH_VISIBILITY_TIMEOUT": "6",
}


@pytest.fixture
def alias(client: OpenSearch, settings) -> Iterator[str]:
    with fresh_alias(client, settings, "fault") as name:
        yield name


class Job(threading.Thread):
    """``run_index`` in a thread, so the test can break things while it runs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.kwargs = kwargs
        self.report: IndexReport | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.report = run_index(progress=False, stall_timeout=120, **self.kwargs)
        except BaseException as exc:
            self.error = exc

    def finish(self, timeout: float = 300) -> IndexReport:
        self.join(timeout)
        assert not self.is_alive(), "the job did not finish"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def indexed_count(client: OpenSearch, alias: str) -> int:
    return client.count(index=alias)["count"]


def test_kill_9_of_a_pool_process_mid_batch(client, settings, alias, corpus, pipeline) -> None:
    worker = pipeline["spawn"](concurrency=1, **FAST_RETRIES)
    app = create_app(pipeline["settings"])
    job = Job(items=corpus, index=alias, worker_settings=pipeline["settings"], batch_size=20)
    job.start()
    wait_for(lambda: indexed_count(client, alias) > 40, "the first batches")
    # kill the pool process while it runs a batch. limit=1: the poll returns on the one
    # worker's reply instead of waiting out the timeout, so the polls keep up with a job
    # whose remaining batches take only seconds (a 3 s wait per poll could outlast the job);
    # the timeout still gives a loaded worker 3 s to reply.
    wait_for(
        lambda: any((app.control.inspect(timeout=3, limit=1).active() or {}).values()), "a batch"
    )
    (child,) = worker.children()
    os.kill(child, signal.SIGKILL)
    report = job.finish()
    assert report.complete and not report.lost_batches
    # a new pool process takes over (the pool reaps and replaces the killed one on its own
    # schedule, which may come after the job's last batch)
    wait_for(
        lambda: child not in worker.children() and len(worker.children()) == 1, "a new pool process"
    )
    indexed, _ = accounted(client, alias, settings, corpus)
    assert report.written == len(indexed) > 1000


def test_kill_9_of_the_whole_worker(client, settings, alias, corpus, pipeline) -> None:
    first = pipeline["spawn"](concurrency=1, **FAST_RETRIES)
    job = Job(items=corpus, index=alias, worker_settings=pipeline["settings"], batch_size=20)
    job.start()
    wait_for(lambda: indexed_count(client, alias) > 100, "the first batches")
    first.kill_hard()  # main process and pool: its batch stays unacknowledged in Redis
    stalled = indexed_count(client, alias)
    assert stalled < 1100
    pipeline["spawn"](concurrency=1, **FAST_RETRIES)  # redelivers after the visibility timeout
    report = job.finish()
    assert report.complete
    accounted(client, alias, settings, corpus)


def _batch_of(message: bytes) -> str:
    """The batch id in a kombu envelope of a ``mathsearch.parse.batch`` task."""
    body = json.loads(base64.b64decode(json.loads(message)["body"]))
    return body[0][1]


def test_a_batch_the_broker_lost_is_sent_again(client, settings, alias, corpus, pipeline) -> None:
    """A message gone from Redis (popped, never recorded as unacked: nothing to redeliver)."""
    worker = pipeline["spawn"](concurrency=1)
    queue = pipeline["settings"].queue(PARSE)
    broker = redis.Redis.from_url(pipeline["settings"].redis_url)
    items = corpus[:300]
    job = Job(
        items=items,
        index=alias,
        worker_settings=pipeline["settings"],
        batch_size=20,
        resend_after=8,
    )
    job.start()
    wait_for(lambda: broker.llen(queue) > 0, "the first batch in the parse queue")
    os.killpg(worker.process.pid, signal.SIGSTOP)  # the queue fills while the worker waits
    try:
        wait_for(lambda: broker.llen(queue) >= 8, "batches waiting in the parse queue")
        lost = _batch_of(broker.rpop(queue))  # the next one a worker would take: gone
    finally:
        os.killpg(worker.process.pid, signal.SIGCONT)
    report = job.finish()
    assert lost in report.resent_batches, report.to_dict()
    assert report.complete, report.to_dict()
    accounted(client, alias, settings, items)


def test_redis_restart_mid_job(client, settings, alias, corpus, pipeline, tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    spec = RedisSpec(url, tmp_path / "redis")
    redis_start(spec)
    try:
        own = dataclasses.replace(pipeline["settings"], redis_url=url, result_backend=url)
        pipeline["settings"] = own
        pipeline["spawn"](**FAST_RETRIES)
        job = Job(items=corpus, index=alias, worker_settings=own, batch_size=20)
        job.start()
        wait_for(lambda: indexed_count(client, alias) > 100, "the first batches")
        redis_stop(spec)  # a clean shutdown: the append-only file keeps the queues
        time.sleep(3)
        redis_start(spec)
        report = job.finish()
        assert report.complete
        accounted(client, alias, settings, corpus)
    finally:
        for worker in pipeline["workers"]:
            worker.stop()
        redis_stop(spec)


def block(client: OpenSearch, alias: str, on: bool) -> None:
    client.indices.put_settings(
        index=resolve_alias(client, alias),
        body={"index.blocks.read_only_allow_delete": True if on else None},
    )


def test_opensearch_refusing_writes_for_a_while(
    client, settings, alias, corpus, pipeline, no_disk_monitor
) -> None:
    worker = pipeline["spawn"](concurrency=1, **FAST_RETRIES, MATHSEARCH_TASK_MAX_RETRIES="30")
    job = Job(items=corpus, index=alias, worker_settings=pipeline["settings"], batch_size=20)
    job.start()
    wait_for(lambda: indexed_count(client, alias) > 100, "the first batches")
    block(client, alias, True)  # every write now gets a 429
    try:  # until a batch has been refused and its task retried
        wait_for(lambda: "retry 1 in" in worker.log.read_text(), "a refused write retried")
    finally:
        block(client, alias, False)
    report = job.finish()
    assert report.complete and not report.lost_batches
    accounted(client, alias, settings, corpus)
    assert report.failures_by_stage.get("write", 0) == 0  # transient: retried, not recorded
    assert "retry 1 in" in worker.log.read_text()  # the task-level retry path ran


def test_a_refusal_outlasting_every_retry_is_recorded_then_a_rerun_indexes(
    client, settings, alias, corpus, pipeline, no_disk_monitor
) -> None:
    pipeline["spawn"](concurrency=1, **FAST_RETRIES, MATHSEARCH_TASK_MAX_RETRIES="1")
    items = corpus[:200]
    # The block refuses mapping updates too, so the job adds no second-stage fields (rerank=()):
    # what is refused here is the workers' writes.
    block(client, alias, True)
    try:
        report = run_index(
            items, alias, worker_settings=pipeline["settings"], batch_size=50, progress=False,
            rerank=(),
        )  # fmt: skip
    finally:
        block(client, alias, False)
    assert report.complete and len(report.lost_batches) == report.batches
    indexed, failed = accounted(client, alias, settings, items)
    assert not indexed and report.failures_by_stage["write"] > 150
    again = run_index(
        items, alias, worker_settings=pipeline["settings"], batch_size=50, progress=False,
        rerank=(),
    )  # fmt: skip
    assert again.complete and not again.lost_batches
    indexed, failed = accounted(client, alias, settings, items)
    assert len(indexed) > 150 and len(failed) == again.failed < 50
