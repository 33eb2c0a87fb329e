"""Poison messages: logged, counted and moved to a dead-letter list; the worker carries on.

A message on a ``mathsearch`` queue that cannot be a task of ours - not JSON, JSON that is not
a kombu envelope, a body in another content type (pickle is never decoded), an unknown task, or
a task whose arguments have the wrong shape - must neither kill a worker nor block its queue.
Three hooks, each ending in :func:`dead_letter`:

* :class:`PoisonSafeTransport` (kombu's Redis transport with :class:`PoisonSafeChannel`): a
  message that is not JSON, or JSON that is not an envelope, used to raise out of kombu's
  ``BRPOP`` reader and kill the whole worker (``Unrecoverable error: JSONDecodeError``) or
  restart its connection (``KeyError('properties')``);
* :class:`PoisonSafeConsumer` (Celery's ``worker_consumer``): an envelope Celery cannot use
  (undecodable body, a refused content type, no task header, an unknown task) - Celery already
  drops these; we also keep them;
* the tasks themselves (:mod:`mathsearch.workers.tasks`) validate their arguments and dead-letter a
  batch
  of the wrong shape (``bad-arguments``), and any task that fails for good (``task-failed``).

The list is ``<MATHSEARCH_QUEUE_PREFIX>dead-letter`` in the broker's Redis, newest first,
capped at :data:`MAX_ENTRIES`; each entry is JSON: ``reason`` (a short kind, also the label of
``mathsearch_poison_messages_total{queue, reason}``), ``detail``, ``queue``, ``body`` (the first
:data:`BODY_CHARS` characters), ``bytes`` (the whole body's size), ``pid``, ``host``, ``time``.

Example::

    redis-cli LRANGE dead-letter 0 9          # or, in Python:
    read_dead_letters(redis.Redis.from_url(url), "dead-letter")
"""

from __future__ import annotations

import binascii
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, cast

from celery.worker.consumer import Consumer
from kombu.exceptions import ContentDisallowed
from kombu.transport import redis as kombu_redis
from kombu.transport.virtual import Empty

logger = logging.getLogger(__name__)

DEAD_LETTER = "dead-letter"
MAX_ENTRIES = 10_000
BODY_CHARS = 2_000
REASONS = (
    "not-json",
    "not-an-envelope",
    "undecodable-body",
    "content-type",
    "not-a-task-message",
    "unknown-task",
    "bad-arguments",
    "task-failed",
)


def dead_letter_key(queue_prefix: str) -> str:
    """The Redis list of dead letters of the deployment with ``queue_prefix``."""
    return f"{queue_prefix}{DEAD_LETTER}"


def entry(reason: str, detail: str, queue: str | None, body: Any) -> dict[str, Any]:
    """A dead-letter entry (pure): the body as text, truncated."""
    if isinstance(body, bytes | bytearray | memoryview):
        raw = bytes(body)
        text, size = raw[:BODY_CHARS].decode("utf-8", errors="replace"), len(raw)
    else:
        text = body if isinstance(body, str) else _json_or_repr(body)
        size = len(text)
    return {
        "reason": reason,
        "detail": detail[:500],
        "queue": queue,
        "body": text[:BODY_CHARS],
        "bytes": size,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "time": time.time(),
    }


def dead_letter(
    client: Any, key: str, reason: str, detail: str, *, queue: str | None, body: Any
) -> dict[str, Any]:
    """Log, count and push one poison message onto ``key`` (never raises: a Redis error is
    logged and the message is only logged and counted); returns the entry."""
    from mathsearch.workers import metrics

    record = entry(reason, detail, queue, body)
    logger.error(
        "poison message on %s (%s: %s), %d bytes, moved to %s",
        queue or "?",
        reason,
        record["detail"][:200],
        record["bytes"],
        key,
    )
    metrics.poison(queue or "?", reason)
    try:
        pipe = client.pipeline()
        pipe.lpush(key, json.dumps(record))
        pipe.ltrim(key, 0, MAX_ENTRIES - 1)
        pipe.execute()
    except Exception:  # Redis away: the message is gone either way; keep the worker alive
        logger.exception("could not write the dead letter to %s", key)
    return record


def read_dead_letters(client: Any, key: str, count: int = 100) -> list[dict[str, Any]]:
    """The newest ``count`` dead letters of ``key``."""
    return [json.loads(raw) for raw in client.lrange(key, 0, count - 1)]


def envelope_problem(message: Any) -> str | None:
    """Why ``message`` (decoded JSON) is not a kombu envelope, or None."""
    if not isinstance(message, dict):
        return f"a JSON {type(message).__name__}, not an object"
    properties = message.get("properties")
    if not isinstance(properties, dict):
        return "no 'properties' object"
    if "delivery_tag" not in properties:
        return "no delivery_tag"
    if not isinstance(properties.get("delivery_info", {}), dict):
        return "delivery_info is not an object"
    if not isinstance(message.get("headers", {}) or {}, dict):
        return "headers is not an object"
    body = message.get("body")
    if body is not None and not isinstance(body, str):
        return "body is not a string"
    return None


@cache
def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=10)


def _json_or_repr(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


class PoisonSafeChannel(kombu_redis.Channel):
    """kombu's Redis channel; a message that is not JSON is dead-lettered, not raised."""

    dead_letter_key: str = DEAD_LETTER
    # kombu is untyped: mypy takes its tuple's length as part of the attribute's type
    from_transport_options = (  # type: ignore[assignment]
        *kombu_redis.Channel.from_transport_options,
        "dead_letter_key",
    )

    def _brpop_read(self, **options: Any) -> bool:
        try:
            return super()._brpop_read(**options)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            # kombu popped the item and rotated its queue to the end of the cycle
            items = getattr(self._queue_cycle, "items", None) or [None]
            self.poison(items[-1], exc)
            return True

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """kombu's ``_get``; ``timeout`` (the virtual channel's parameter) is not passed on:
        kombu's Redis channel takes none."""
        try:
            return super()._get(queue)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.poison(queue, exc)
            raise Empty() from exc

    def poison(self, queue: str | None, exc: ValueError) -> None:
        body = getattr(exc, "doc", None) or getattr(exc, "object", b"")
        self.dead_letter(queue, "not-json", f"{type(exc).__name__}: {exc}"[:300], body)

    def dead_letter(self, queue: str | None, reason: str, detail: str, body: Any) -> None:
        with self.acquire_client() as client:
            dead_letter(client, self.dead_letter_key, reason, detail, queue=queue, body=body)

    @contextmanager
    def acquire_client(self) -> Iterator[Any]:
        with self.conn_or_acquire() as client:
            yield client


class PoisonSafeTransport(kombu_redis.Transport):
    """kombu's Redis transport: JSON that is not an envelope is dead-lettered before kombu
    builds a message from it."""

    Channel = PoisonSafeChannel

    def _deliver(self, message: Any, queue: str) -> None:
        problem, reason = envelope_problem(message), "not-an-envelope"
        if problem is None:
            try:
                super()._deliver(message, queue)
                return
            except binascii.Error as exc:  # a body that is not the base64 it claims to be
                problem, reason = f"body: {exc}", "undecodable-body"
        channels = cast(list[Any], self.channels)  # a list once the transport is built
        channel = next((c for c in channels if c is not None), None)
        if channel is None:
            dead_letter_log_only(queue, reason, problem)
            return
        channel.dead_letter(queue, reason, problem, message)


def dead_letter_log_only(queue: str | None, reason: str, detail: str) -> None:
    from mathsearch.workers import metrics

    logger.error("poison message on %s (%s: %s) dropped", queue or "?", reason, detail)
    metrics.poison(queue or "?", reason)


class PoisonSafeConsumer(Consumer):
    """Celery's consumer; the envelopes it drops are also dead-lettered (and counted)."""

    def _dead_letter(self, message: Any, reason: str, detail: str) -> None:
        info = getattr(message, "delivery_info", None) or {}
        queue = info.get("routing_key") if isinstance(info, dict) else None
        key = self.app.conf.get("mathsearch_dead_letter_key") or DEAD_LETTER
        client = _redis(self.app.conf.broker_url)
        dead_letter(client, key, reason, detail, queue=queue, body=message.body)

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        reason = "content-type" if isinstance(exc, ContentDisallowed) else "undecodable-body"
        self._dead_letter(message, reason, f"{type(exc).__name__}: {exc}"[:300])
        message.ack()  # as Celery does: acknowledged so it does not come back

    def on_unknown_message(self, body: Any, message: Any) -> None:
        self._dead_letter(message, "not-a-task-message", "no task header")
        super().on_unknown_message(body, message)

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        headers = getattr(message, "headers", None) or {}
        self._dead_letter(message, "unknown-task", f"task {headers.get('task')!r}")
        super().on_unknown_task(body, message, exc)

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        reason = "content-type" if isinstance(exc, ContentDisallowed) else "undecodable-body"
        self._dead_letter(message, reason, f"{type(exc).__name__}: {exc}"[:300])
        super().on_invalid_task(body, message, exc)
