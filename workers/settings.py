"""Settings of the workers package, read from ``MATHSEARCH_*`` environment variables.

==============================  ========================================  ========================
variable                        meaning                                   default
==============================  ========================================  ========================
MATHSEARCH_REDIS_URL            Celery broker (Redis)                     redis://127.0.0.1:6379/0
MATHSEARCH_RESULT_BACKEND       Celery result backend                     MATHSEARCH_REDIS_URL
MATHSEARCH_WORKER_CONCURRENCY   processes per ``mathsearch worker``       number of CPUs
MATHSEARCH_TASK_TIME_LIMIT      hard time limit of one task, seconds      600
==============================  ========================================  ========================
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from opensearch.errors import ConfigurationError


@dataclass(frozen=True)
class WorkerSettings:
    redis_url: str = "redis://127.0.0.1:6379/0"
    result_backend: str = "redis://127.0.0.1:6379/0"
    concurrency: int = max(1, os.cpu_count() or 1)
    task_time_limit: int = 600

    @classmethod
    def from_env(cls) -> WorkerSettings:
        env = os.environ
        redis_url = env.get("MATHSEARCH_REDIS_URL") or cls.redis_url
        if not redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(f"MATHSEARCH_REDIS_URL={redis_url!r} is not a redis:// URL")
        try:
            concurrency = int(env.get("MATHSEARCH_WORKER_CONCURRENCY") or cls.concurrency)
            time_limit = int(env.get("MATHSEARCH_TASK_TIME_LIMIT") or cls.task_time_limit)
        except ValueError as exc:
            raise ConfigurationError(f"worker setting is not an integer: {exc}") from exc
        if concurrency < 1:
            raise ConfigurationError("MATHSEARCH_WORKER_CONCURRENCY must be at least 1")
        return cls(
            redis_url=redis_url,
            result_backend=env.get("MATHSEARCH_RESULT_BACKEND") or redis_url,
            concurrency=concurrency,
            task_time_limit=time_limit,
        )
