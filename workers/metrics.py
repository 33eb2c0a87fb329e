"""Prometheus metrics of the workers, and the ``/metrics`` endpoint of ``mathsearch worker``.

Series (every worker serves them at ``:MATHSEARCH_METRICS_PORT/metrics``):

* ``mathsearch_equations_total{stage, outcome}`` - equations through ``parse`` / ``embed`` /
  ``write``, ``ok`` or ``failed`` (equations/s: ``rate(...[1m])``);
* ``mathsearch_batch_seconds{stage}`` - time per batch and stage (histogram);
* ``mathsearch_failures_total{stage, reason}`` - failure records by stage and reason;
* ``mathsearch_queue_depth{queue}`` - batches waiting in each Redis queue, read at scrape time;
* ``mathsearch_poison_messages_total{queue, reason}`` - messages moved to the dead-letter list
  (:mod:`mathsearch.workers.dead_letter`).

Celery's prefork pool runs tasks in child processes, so the counters use prometheus_client's
multiprocess mode: ``mathsearch worker`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh folder
before anything imports prometheus_client, the children write their values there, and the main
process's endpoint adds them up. Without that variable (an inline job, a test) the metrics live
in the process's own registry.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

logger = logging.getLogger(__name__)

BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

EQUATIONS = Counter(
    "mathsearch_equations",
    "Equations through a pipeline stage, by outcome",
    ["stage", "outcome"],
)
BATCH_SECONDS = Histogram(
    "mathsearch_batch_seconds", "Seconds per batch and stage", ["stage"], buckets=BUCKETS
)
FAILURES = Counter(
    "mathsearch_failures", "Failure records written, by stage and reason", ["stage", "reason"]
)

POISON = Counter(
    "mathsearch_poison_messages",
    "Messages moved to the dead-letter list, by queue and reason",
    ["queue", "reason"],
)


def batch_done(stage: str, seconds: float, *, ok: int, failed: Sequence[Any]) -> None:
    """Count one batch of ``stage``: ``ok`` equations through, ``failed`` failures."""
    BATCH_SECONDS.labels(stage).observe(seconds)
    EQUATIONS.labels(stage, "ok").inc(ok)
    if failed:
        EQUATIONS.labels(stage, "failed").inc(len(failed))


def failure(stage: str, reason: str) -> None:
    FAILURES.labels(stage, reason).inc()


def poison(queue: str, reason: str) -> None:
    POISON.labels(queue, reason).inc()


class QueueDepthCollector:
    """``mathsearch_queue_depth{queue}``: the length of each Celery queue's Redis list."""

    def __init__(self, redis: Any, queues: Iterable[str]) -> None:
        self.redis = redis
        self.queues = list(queues)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "mathsearch_queue_depth", "Batches waiting in a queue", labels=["queue"]
        )
        try:
            depths = queue_depths(self.redis, self.queues)
            for queue, depth in zip(self.queues, depths, strict=True):
                gauge.add_metric([queue], depth)
        except Exception as exc:  # Redis away: no sample rather than a failed scrape
            logger.warning("queue depth unavailable: %s", exc)
        yield gauge


def queue_depths(redis: Any, queues: Sequence[str]) -> list[int]:
    """Messages waiting per queue (Celery's Redis transport keeps a list per queue and
    priority: ``name`` plus ``name\\x06\\x16N``)."""
    pipe = redis.pipeline()
    for queue in queues:
        pipe.llen(queue)
        for priority in (3, 6, 9):
            pipe.llen(f"{queue}\x06\x16{priority}")
    counts = pipe.execute()
    return [sum(counts[i * 4 : i * 4 + 4]) for i in range(len(queues))]


def serve(port: int, redis: Any, queues: Iterable[str]) -> CollectorRegistry:
    """Serve ``/metrics`` on ``port`` from this (main) process; returns the registry."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    registry.register(QueueDepthCollector(redis, queues))
    start_http_server(port, registry=registry)
    logger.info("metrics on http://0.0.0.0:%d/metrics", port)
    return registry
