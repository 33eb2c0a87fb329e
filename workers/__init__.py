"""Celery workers of mathsearch (Redis broker): queues, tasks, settings."""

from __future__ import annotations

from workers.health import describe_worker
from workers.settings import WorkerSettings

__all__ = ["WorkerSettings", "describe_worker"]
