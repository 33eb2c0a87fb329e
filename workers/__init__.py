"""Celery workers of mathsearch (Redis broker): the indexing pipeline, queues, tasks, metrics.

Modules that import prometheus_client (the pipeline, the metrics) are loaded on first use of one
of their names: ``mathsearch worker`` must set up the metrics' multiprocess folder first.
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports
from mathsearch.workers.health import STACK_DUMP_SIGNAL, describe_worker, install_stack_dump
from mathsearch.workers.job_progress import LocalProgress, RedisProgress, Snapshot
from mathsearch.workers.settings import WorkerSettings
from mathsearch.workers.shutdown_watchdog import install_shutdown_watchdog, watch_shutdown

_LAZY = {
    "JobSpec": "mathsearch.workers.pipeline",
    "parse_stage": "mathsearch.workers.pipeline",
    "embed_write_stage": "mathsearch.workers.pipeline",
    "write_outcome": "mathsearch.workers.pipeline",
    "run_index": "mathsearch.workers.index_job",
    "IndexReport": "mathsearch.workers.index_job",
    "IndexJobError": "mathsearch.workers.index_job",
    "batches": "mathsearch.workers.index_job",
    "enrich_index": "mathsearch.workers.enrich",
    "reembed": "mathsearch.workers.reembed",
    "Embedded": "mathsearch.workers.pipeline",
    "job_embedders": "mathsearch.workers.pipeline",
    "process_embedders": "mathsearch.workers.embedding",
    "encoder_card": "mathsearch.runtime.embedders",
    "refusal_totals": "mathsearch.workers.index_job",
    "FieldPlan": "mathsearch.workers.index_job",
    "vector_field_plan": "mathsearch.workers.index_job",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "STACK_DUMP_SIGNAL",
    "Embedded",
    "FieldPlan",
    "IndexJobError",
    "IndexReport",
    "JobSpec",
    "LocalProgress",
    "RedisProgress",
    "Snapshot",
    "WorkerSettings",
    "batches",
    "describe_worker",
    "embed_write_stage",
    "encoder_card",
    "enrich_index",
    "install_shutdown_watchdog",
    "install_stack_dump",
    "job_embedders",
    "parse_stage",
    "process_embedders",
    "reembed",
    "refusal_totals",
    "run_index",
    "vector_field_plan",
    "watch_shutdown",
    "write_outcome",
]
