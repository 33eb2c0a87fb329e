"""Progress entries are set per batch and stage: redelivered batches count once (pure + Redis)."""

from __future__ import annotations

import uuid

import pytest
import redis

from mathsearch.core.errors import ConfigurationError
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.workers.index_job import batches
from mathsearch.workers.job_progress import LocalProgress, RedisProgress, summarise
from mathsearch.workers.settings import WorkerSettings


def test_summary_counts_each_batch_once_and_a_late_done_beats_lost() -> None:
    progress = LocalProgress()
    progress.mark("parsed", "b0", {"n": 10, "failed": 1, "seconds": {"parse": 0.5}})
    progress.mark("parsed", "b0", {"n": 10, "failed": 1, "seconds": {"parse": 0.7}})  # again
    progress.mark("done", "b0", {"written": 9, "failed": 1, "failures_by_stage": {"parse": 1}})
    progress.mark("lost", "b1", {"reason": "WriteError", "records": []})
    snap = progress.snapshot()
    assert (snap.parsed, snap.written, snap.failed) == (10, 9, 1)
    assert snap.seconds == {"parse": 0.7} and snap.finished == {"b0", "b1"}
    assert snap.batches_lost == 1 and set(snap.lost) == {"b1"}
    # a batch marked lost and later done after all (a redelivery) is done, not lost
    progress.mark("done", "b1", {"written": 5, "failed": 0})
    snap = progress.snapshot()
    assert snap.batches_lost == 0 and snap.written == 14
    assert summarise({}).written == 0


@pytest.mark.services
def test_redis_progress_round_trip(worker_settings: WorkerSettings) -> None:
    progress = RedisProgress(redis.Redis.from_url(worker_settings.redis_url), uuid.uuid4().hex)
    progress.mark("embedded", "b3", {"n": 4, "seconds": {"embed": 0.25}})
    progress.mark("done", "b3", {"written": 3, "failed": 1, "failures_by_stage": {"embed": 1}})
    snap = progress.snapshot()
    assert (snap.embedded, snap.written, snap.failures_by_stage) == (4, 3, {"embed": 1})
    with pytest.raises(ValueError, match="unknown stage"):
        progress.mark("nope", "b3", {})
    progress.delete()
    assert progress.snapshot().written == 0


def _record(doc: str, n: int) -> EquationRecord:
    return EquationRecord(eq_id=f"{doc}#{n}", doc_id=doc, position=n, latex="x")


def test_batches_pass_failures_through_and_keep_documents_whole() -> None:
    items = [_record("a", 0), _record("a", 1), Failure("a#2", "a", "extract", "x")]
    items += [_record("a", 3), _record("b", 0), _record("b", 1), _record("c", 0)]
    plain = list(batches(items, 2))
    assert [len(b) if isinstance(b, list) else "F" for b in plain] == ["F", 2, 2, 2]
    whole = [b for b in batches(items, 2, whole_documents=True) if isinstance(b, list)]
    assert [[r.eq_id for r in b] for b in whole] == [
        ["a#0", "a#1", "a#3"],
        ["b#0", "b#1"],
        ["c#0"],
    ]


def test_worker_settings_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("MATHSEARCH_QUEUE_PREFIX", "lib1-")
    monkeypatch.setenv("MATHSEARCH_BATCH_SIZE", "64")
    monkeypatch.setenv("MATHSEARCH_TASK_RETRY_BACKOFF", "1.5")
    settings = WorkerSettings.from_env()
    assert settings.queue("parse") == "lib1-parse" and settings.batch_size == 64
    assert [settings.retry_delay(n) for n in (0, 1, 2)] == [1.5, 3.0, 6.0]
    assert settings.retry_delay(20) == settings.retry_max_backoff
    monkeypatch.setenv("MATHSEARCH_BATCH_SIZE", "0")
    with pytest.raises(ConfigurationError, match="BATCH_SIZE"):
        WorkerSettings.from_env()
    monkeypatch.setenv("MATHSEARCH_BATCH_SIZE", "ten")
    with pytest.raises(ConfigurationError, match="not a number"):
        WorkerSettings.from_env()
    monkeypatch.setenv("MATHSEARCH_BATCH_SIZE", "8")
    monkeypatch.setenv("MATHSEARCH_QUEUE_PREFIX", "a b")
    with pytest.raises(ConfigurationError, match="QUEUE_PREFIX"):
        WorkerSettings.from_env()
