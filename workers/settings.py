"""Settings of the workers package, read from ``MATHSEARCH_*`` environment variables.

==================================  =====================================  ========================
variable                            meaning                                default
==================================  =====================================  ========================
MATHSEARCH_REDIS_URL                Celery broker (Redis)                  redis://127.0.0.1:6379/0
MATHSEARCH_RESULT_BACKEND           Celery result backend                  MATHSEARCH_REDIS_URL
MATHSEARCH_WORKER_CONCURRENCY       processes per ``mathsearch worker``    number of CPUs
MATHSEARCH_TASK_TIME_LIMIT          hard time limit of one batch, s        300
MATHSEARCH_VISIBILITY_TIMEOUT       a batch taken by a worker that died    600
                                    hard is redelivered after this, s
                                    (looked for every fifth of it, <=30 s)
MATHSEARCH_QUEUE_PREFIX             prefix of the queue names (isolates    "" (queues ``parse``,
                                    deployments sharing one Redis)         ``embed``, ``default``)
MATHSEARCH_BATCH_SIZE               equations per task                     128
MATHSEARCH_MAX_QUEUED_BATCHES       backpressure: ``mathsearch index``     16
                                    waits while more batches than this
                                    wait in the queues
MATHSEARCH_TASK_MAX_RETRIES         retries of a batch on transient        12
                                    errors (OpenSearch or Redis away)
MATHSEARCH_TASK_RETRY_BACKOFF       first retry delay, s (doubles)         2
MATHSEARCH_TASK_RETRY_MAX_BACKOFF   longest retry delay, s                 120
MATHSEARCH_METRICS_PORT             Prometheus ``/metrics`` of a worker    9808 (0: off)
MATHSEARCH_ENCODERS                 encoders a worker serves and a job     gcn
                                    writes (families or ``.onnx`` paths,
                                    comma-separated; one vector field
                                    each, the first is the primary)
MATHSEARCH_RERANK_ENCODERS          encoders whose fields a job writes     the default search
                                    for the second stage only (no ANN      profile's ``rerank``
                                    graph), served by every worker too;
                                    ``none``: no such fields
MATHSEARCH_RERANK_STORAGE           how those fields are kept: float16     float16
                                    or int8 (bytes in binary doc values)
==================================  =====================================  ========================

``MATHSEARCH_ENCODERS`` (``mathsearch worker --encoders``, ``mathsearch index --encoders``)
names the encoders by family (``gcn``, ``bitmap``, ``seq2seq``, ``figure``: the family's default
model, see :func:`mathsearch.runtime.embedders.default_model_path`) or by ``.onnx`` path. A worker
loads each
once per pool process and refuses (``model-mismatch``) a batch whose job wants a vector field
none of its models writes; see docs/encoders.md.

``MATHSEARCH_RERANK_ENCODERS`` follows the search side: unset, it is the ``rerank`` list of
:meth:`mathsearch.opensearch.search_profile.SearchProfile.default` (``MATHSEARCH_SEARCH_PROFILE``,
else the shipped profile), so that an index built with the defaults holds every vector the
default search reads and no query embeds a candidate
(:mod:`mathsearch.opensearch.window_rerank`). Those fields are ``binary`` doc values
(:mod:`mathsearch.opensearch.stored_vectors`): no graph is built for them.

``MATHSEARCH_BATCH_SIZE`` defaults to 128 equations: embedding dominates a batch, and
``mathsearch bench embed`` measured ONNX Runtime's throughput on this CPU as flat from 64 to 1,024
equations per call (docs/export.md), while a smaller batch is less work to redo when a worker dies
mid-batch and gives a finer progress bar; below 64 the per-call overhead starts to show.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from mathsearch.core.errors import ConfigurationError
from mathsearch.core.redact import redact_url
from mathsearch.runtime.embedders import parse_encoders
from mathsearch.runtime.errors import ModelCardError


def _cpus() -> int:
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class WorkerSettings:
    # repr=False: a Redis URL may carry a password (redis://:PASSWORD@host); see
    # mathsearch.core.redact
    redis_url: str = field(default="redis://127.0.0.1:6379/0", repr=False)
    result_backend: str = field(default="redis://127.0.0.1:6379/0", repr=False)
    concurrency: int = _cpus()
    task_time_limit: int = 300
    visibility_timeout: int = 600
    queue_prefix: str = ""
    batch_size: int = 128
    max_queued_batches: int = 16
    task_max_retries: int = 12
    retry_backoff: float = 2.0
    retry_max_backoff: float = 120.0
    metrics_port: int = 9808
    encoders: tuple[str, ...] = ("gcn",)
    #: the second stage's encoders (exact-only fields); from_env: the default profile's
    rerank_encoders: tuple[str, ...] = ()
    rerank_storage: str = "float16"

    @property
    def served(self) -> tuple[str, ...]:
        """Every encoder a worker loads: the kNN fields' then the second stage's."""
        return tuple(dict.fromkeys((*self.encoders, *self.rerank_encoders)))

    def queue(self, name: str) -> str:
        """The broker's name of queue ``name`` (``parse``, ``embed``, ``default``)."""
        return f"{self.queue_prefix}{name}"

    def retry_delay(self, retries: int) -> float:
        """Exponential backoff of the ``retries``-th retry (0-based), capped."""
        return min(self.retry_max_backoff, self.retry_backoff * 2**retries)

    @classmethod
    def from_env(cls) -> WorkerSettings:
        env = os.environ
        redis_url = env.get("MATHSEARCH_REDIS_URL") or cls.redis_url
        if not redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                f"MATHSEARCH_REDIS_URL={redact_url(redis_url)!r} is not a redis:// URL"
            )

        def number(name: str, default: float, kind: type = int, minimum: float = 0) -> float:
            raw = env.get(f"MATHSEARCH_{name}")
            try:
                value = kind(raw) if raw not in (None, "") else default
            except ValueError as exc:
                raise ConfigurationError(f"MATHSEARCH_{name}={raw!r} is not a number") from exc
            if value < minimum:
                raise ConfigurationError(f"MATHSEARCH_{name} must be at least {minimum}")
            return value

        prefix = env.get("MATHSEARCH_QUEUE_PREFIX", cls.queue_prefix)
        if prefix and not prefix.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ConfigurationError(f"MATHSEARCH_QUEUE_PREFIX={prefix!r}: letters, digits, -_.")
        try:
            encoders = tuple(parse_encoders(env.get("MATHSEARCH_ENCODERS") or "gcn"))
        except ModelCardError as exc:
            raise ConfigurationError(f"MATHSEARCH_ENCODERS: {exc}") from exc
        rerank = _rerank_encoders(env.get("MATHSEARCH_RERANK_ENCODERS", ""))
        storage = (env.get("MATHSEARCH_RERANK_STORAGE") or cls.rerank_storage).strip().lower()
        if storage not in _EXACT_STORAGES:
            raise ConfigurationError(
                f"MATHSEARCH_RERANK_STORAGE={storage!r}: one of {', '.join(_EXACT_STORAGES)}"
            )
        return cls(
            redis_url=redis_url,
            result_backend=env.get("MATHSEARCH_RESULT_BACKEND") or redis_url,
            concurrency=int(number("WORKER_CONCURRENCY", _cpus(), minimum=1)),
            task_time_limit=int(number("TASK_TIME_LIMIT", cls.task_time_limit, minimum=1)),
            visibility_timeout=int(number("VISIBILITY_TIMEOUT", cls.visibility_timeout, minimum=1)),
            queue_prefix=prefix,
            batch_size=int(number("BATCH_SIZE", cls.batch_size, minimum=1)),
            max_queued_batches=int(number("MAX_QUEUED_BATCHES", cls.max_queued_batches, minimum=1)),
            task_max_retries=int(number("TASK_MAX_RETRIES", cls.task_max_retries)),
            retry_backoff=number("TASK_RETRY_BACKOFF", cls.retry_backoff, float),
            retry_max_backoff=number("TASK_RETRY_MAX_BACKOFF", cls.retry_max_backoff, float),
            metrics_port=int(number("METRICS_PORT", cls.metrics_port)),
            encoders=encoders,
            rerank_encoders=rerank,
            rerank_storage=storage,
        )


_EXACT_STORAGES = ("float16", "int8")


def _rerank_encoders(raw: str) -> tuple[str, ...]:
    """``MATHSEARCH_RERANK_ENCODERS``: ``none``, a list, or (unset) the default profile's."""
    raw = raw.strip()
    if raw.lower() == "none":
        return ()
    if not raw:
        from mathsearch.opensearch.search_profile import SearchProfile

        return tuple(SearchProfile.default().rerank)
    try:
        return tuple(parse_encoders(raw))
    except ModelCardError as exc:
        raise ConfigurationError(f"MATHSEARCH_RERANK_ENCODERS: {exc}") from exc
