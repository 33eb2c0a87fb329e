"""Celery workers of mathsearch (Redis broker): the indexing pipeline, queues, tasks, metrics.

Modules that import prometheus_client (the pipeline, the metrics) are loaded on first use of one
of their names: ``mathsearch worker`` must set up the metrics' multiprocess folder first.
"""

from __future__ import annotations

import importlib

from workers.health import describe_worker
from workers.job_progress import LocalProgress, RedisProgress, Snapshot
from workers.settings import WorkerSettings

_LAZY = {
    "JobSpec": "workers.pipeline",
    "parse_stage": "workers.pipeline",
    "embed_write_stage": "workers.pipeline",
    "write_outcome": "workers.pipeline",
    "run_index": "workers.index_job",
    "IndexReport": "workers.index_job",
    "IndexJobError": "workers.index_job",
    "batches": "workers.index_job",
    "run_demo": "workers.demo",
    "enrich_index": "workers.enrich",
    "reembed": "workers.reembed",
    "index_with_pya0": "workers.pya0_peer",
    "Pya0Result": "workers.pya0_peer",
    "Embedded": "workers.pipeline",
    "job_embedders": "workers.pipeline",
    "process_embedders": "workers.embedding",
    "encoder_card": "export.embedders",
    "refusal_totals": "workers.index_job",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "Embedded",
    "IndexJobError",
    "IndexReport",
    "JobSpec",
    "LocalProgress",
    "Pya0Result",
    "RedisProgress",
    "Snapshot",
    "WorkerSettings",
    "batches",
    "describe_worker",
    "embed_write_stage",
    "encoder_card",
    "enrich_index",
    "index_with_pya0",
    "job_embedders",
    "parse_stage",
    "process_embedders",
    "reembed",
    "refusal_totals",
    "run_demo",
    "run_index",
    "write_outcome",
]
