"""The Celery application: Redis broker, JSON only, late acknowledgement, routed queues.

Batches go to the ``parse`` queue (CPU) and then to the ``embed`` queue (ONNX Runtime on GPU or
CPU, followed by the bulk write); both names carry ``MATHSEARCH_QUEUE_PREFIX``. A batch is
acknowledged only when its task returns (``acks_late``); a pool process that dies mid-batch
gets its batch requeued at once (``reject_on_worker_lost``) and a worker that dies hard gets its
batches redelivered after ``MATHSEARCH_VISIBILITY_TIMEOUT`` seconds (the workers look for such
batches every fifth of that, at most every 30 s). Every task is idempotent
(upserts by equation id, per-batch progress entries), so a redelivery changes nothing twice.
A message that cannot be one of our tasks (not JSON, not an envelope, another content type, an
unknown task, arguments of the wrong shape) is moved to the ``<prefix>dead-letter`` list and the
worker carries on (:mod:`mathsearch.workers.dead_letter`). Workers send task events, so Flower
(``celery -A mathsearch.workers.app flower``) can watch them.
"""

from __future__ import annotations

from celery import Celery

from mathsearch.workers.dead_letter import dead_letter_key
from mathsearch.workers.queues import DEFAULT, EMBED, PARSE
from mathsearch.workers.settings import WorkerSettings


def create_app(settings: WorkerSettings | None = None) -> Celery:
    """Build the Celery app from ``settings`` (``MATHSEARCH_*`` variables by default)."""
    settings = settings or WorkerSettings.from_env()
    app = Celery(
        "mathsearch",
        broker=settings.redis_url,
        backend=settings.result_backend,
        include=["mathsearch.workers.tasks"],
    )
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=settings.queue(DEFAULT),
        task_routes={
            "mathsearch.parse.*": {"queue": settings.queue(PARSE)},
            "mathsearch.embed.*": {"queue": settings.queue(EMBED)},
        },
        task_time_limit=settings.task_time_limit,
        task_soft_time_limit=max(1, settings.task_time_limit - 10),
        result_expires=3600,
        worker_send_task_events=True,
        task_send_sent_event=True,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout,
            # kombu looks for batches past their visibility timeout every interval x throttle
            # seconds (10 x 10 by default, whatever the timeout); look every timeout / 5
            "unacked_restore_interval": max(1, min(30, settings.visibility_timeout // 5)),
            "unacked_restore_throttle": 1,
            # the sweep's lock: a worker killed while holding it (300 s by default) would stop
            # every other worker's sweep, i.e. all redelivery, for that long
            "unacked_mutex_expire": max(5, min(300, settings.visibility_timeout)),
            "dead_letter_key": dead_letter_key(settings.queue_prefix),
        },
        worker_hijack_root_logger=False,
        worker_consumer="mathsearch.workers.dead_letter:PoisonSafeConsumer",
        # a worker that loses Redis gives its running batches back rather than finishing them
        # into a connection it no longer has (they are redelivered; writes are upserts)
        worker_cancel_long_running_tasks_on_connection_loss=True,
        mathsearch_dead_letter_key=dead_letter_key(settings.queue_prefix),
    )
    if settings.redis_url.startswith("redis://"):
        # rediss:// and unix:// keep kombu's own transport (its TLS defaults and socket paths
        # hang on the scheme's name); the consumer and task hooks still dead-letter there
        app.conf.broker_transport = "mathsearch.workers.dead_letter:PoisonSafeTransport"
    return app


app = create_app()
