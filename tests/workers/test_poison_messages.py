"""Poison messages with a real worker: each kind is dead-lettered, the worker lives on, and a
real job through the same worker still accounts for every equation.

Before :mod:`mathsearch.workers.dead_letter`, one ``LPUSH`` of a non-JSON string onto the parse
queue
killed the whole worker (``Unrecoverable error: JSONDecodeError``).
"""

from __future__ import annotations

import base64
import json
import pickle
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from opensearchpy import OpenSearch

from mathsearch.workers.dead_letter import (
    dead_letter_key,
    entry,
    envelope_problem,
    read_dead_letters,
)
from mathsearch.workers.index_job import run_index
from mathsearch.workers.job_progress import RedisProgress
from mathsearch.workers.queues import PARSE
from tests.conftest import DEFAULT_FIELD

from .conftest import accounted, fresh_alias

pytestmark = pytest.mark.services

PICKLE = "application/x-python-serialize"

RUN = uuid.uuid4().hex[:8]
JOB = {  # names no index of the suite; anything a poison batch writes is deleted after the test
    "job_id": f"poison-{RUN}",
    "index": f"mathsearch-test-poison-x-{RUN}",
    "vector_field": DEFAULT_FIELD,  # the worker's model
    "failures_index": f"mathsearch-test-poison-f-{RUN}",
}


def envelope(
    task: str,
    args: list[Any],
    queue: str,
    *,
    content_type: str = "application/json",
    body: bytes | None = None,
    headers: dict[str, Any] | None = None,
) -> bytes:
    """A kombu Redis envelope of a Celery (protocol 2) task message, as the client sends it."""
    task_id = uuid.uuid4().hex
    if body is None:
        body = json.dumps([args, {}, {"callbacks": None, "errbacks": None, "chain": None}]).encode()
    default = {"lang": "py", "task": task, "id": task_id, "root_id": task_id, "retries": 0}
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-encoding": "utf-8",
            "content-type": content_type,
            "headers": default if headers is None else headers,
            "properties": {
                "correlation_id": task_id,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
    ).encode()


def poisons(queue: str) -> dict[str, tuple[bytes, str]]:
    """Each kind of poison and the reason it must be dead-lettered with."""
    parse = "mathsearch.parse.batch"
    return {
        "not JSON": (b"\xff\xfe this is {not json", "not-json"),
        "JSON object, no envelope": (b'{"hello": "world"}', "not-an-envelope"),
        "JSON list": (b"[1, 2, 3]", "not-an-envelope"),
        "no task header": (envelope("x", [], queue, headers={}), "not-a-task-message"),
        "unknown task": (envelope("mathsearch.nope", [1], queue), "unknown-task"),
        "pickle": (
            envelope(parse, [], queue, content_type=PICKLE, body=pickle.dumps({"a": 1})),
            "content-type",
        ),
        "body not JSON": (envelope(parse, [], queue, body=b"not json"), "undecodable-body"),
        "body not base64": (
            json.dumps({**json.loads(envelope(parse, [], queue)), "body": "abcde"}).encode(),
            "undecodable-body",
        ),
        "job missing keys": (envelope(parse, [{"job_id": "p"}, "b0", []], queue), "bad-arguments"),
        "records not a list": (envelope(parse, [JOB, "b0", "oops"], queue), "bad-arguments"),
        "wrong arity": (envelope(parse, [JOB], queue), "bad-arguments"),
        "payload not an object": (
            envelope("mathsearch.embed.batch", [JOB, "b0", [1, 2]], queue),
            "bad-arguments",
        ),
    }


@pytest.fixture
def alias(client: OpenSearch, settings) -> Iterator[str]:
    with fresh_alias(client, settings, "poison") as name:
        yield name


def test_entry_truncates_the_body_and_keeps_its_size() -> None:
    record = entry("not-json", "x" * 900, "parse", b"a" * 100_000)
    assert len(record["body"]) == 2000 and record["bytes"] == 100_000
    assert len(record["detail"]) == 500
    assert envelope_problem([1]) and envelope_problem({"properties": {}})
    assert envelope_problem(json.loads(envelope("t", [], "q"))) is None


def test_poison_is_dead_lettered_and_the_worker_carries_on(
    client, settings, alias, corpus, pipeline
) -> None:
    ws = pipeline["settings"]
    worker = pipeline["spawn"](concurrency=1)
    pid, children = worker.process.pid, worker.children()
    broker = redis.Redis.from_url(ws.redis_url)
    queue, key = ws.queue(PARSE), dead_letter_key(ws.queue_prefix)
    kinds = poisons(queue)
    try:
        for body, _ in kinds.values():
            broker.lpush(queue, body)
        deadline = time.monotonic() + 60
        while broker.llen(key) < len(kinds) and time.monotonic() < deadline:
            time.sleep(0.2)
        letters = read_dead_letters(broker, key)
        assert len(letters) == len(kinds), worker.output()
        assert worker.process.poll() is None, worker.output()
        reasons = sorted(letter["reason"] for letter in letters)
        assert reasons == sorted(reason for _, reason in kinds.values())
        assert all(letter["queue"] == queue and letter["detail"] for letter in letters)
        assert any("not json" in letter["body"] for letter in letters)
        # the pickle was refused, never unpickled; no body is dumped in full
        assert all(len(letter["body"]) <= 2000 for letter in letters)
        # a poison batch whose job is readable is marked lost, so that job can finish
        assert "b0" in RedisProgress(broker, JOB["job_id"]).snapshot().lost
        # the same worker (same main process) runs a real job to the end
        items = corpus[:300]
        report = run_index(items, alias, worker_settings=ws, batch_size=50, progress=False)
        assert report.complete and not report.lost_batches and not report.missing_batches
        indexed, _ = accounted(client, alias, settings, items)
        assert report.written == len(indexed) > 200
        assert worker.process.poll() is None and worker.process.pid == pid
        assert worker.children() == children  # not even a pool process was replaced
        assert broker.llen(key) == len(kinds)  # the real job added no dead letter
    finally:
        broker.delete(key)
        RedisProgress(broker, JOB["job_id"]).delete()
        client.indices.delete(index=[JOB["index"], JOB["failures_index"]], ignore_unavailable=True)
