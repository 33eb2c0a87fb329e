"""The Celery application: Redis broker, JSON only, late acknowledgement."""

from __future__ import annotations

from celery import Celery

from workers.queues import DEFAULT, EMBED, PARSE
from workers.settings import WorkerSettings


def create_app(settings: WorkerSettings | None = None) -> Celery:
    """Build the Celery app from ``settings`` (``MATHSEARCH_*`` variables by default)."""
    settings = settings or WorkerSettings.from_env()
    app = Celery(
        "mathsearch",
        broker=settings.redis_url,
        backend=settings.result_backend,
        include=["workers.tasks"],
    )
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=DEFAULT,
        task_routes={
            "mathsearch.parse.*": {"queue": PARSE},
            "mathsearch.embed.*": {"queue": EMBED},
        },
        task_time_limit=settings.task_time_limit,
        result_expires=3600,
        worker_send_task_events=True,
        task_send_sent_event=True,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    return app


app = create_app()
