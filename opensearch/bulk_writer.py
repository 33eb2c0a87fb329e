"""The bulk writer: streaming_bulk in chunks, retries with backoff, per-item failures as data.

Actions go through :func:`opensearchpy.helpers.streaming_bulk` in chunks bounded by count and
bytes (``MATHSEARCH_BULK_CHUNK_DOCS`` / ``_BYTES``). Every item's outcome is checked:

* transient - 429 (a full write queue, a read-only-allow-delete block), any 5xx, or no answer at
  all (connection refused, timeout): retried with exponential backoff and jitter, up to
  ``MATHSEARCH_BULK_MAX_RETRIES`` rounds;
* permanent - anything else (a mapping conflict, a missing document for an update): one
  :class:`WriteFailure` with the item's status and reason, and the rest of the batch goes on.

Because every action carries its id and equations are upserts, a retried action that had in fact
been applied changes nothing the second time. ``refresh`` is per request (``false`` /
``wait_for`` / ``true``) or once at the end (``end``, the default).

Example::

    report = BulkWriter(client).write(equation_actions(alias, parsed, vectors))
    report.written, report.noop, report.failures
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import TransportError

from mathsearch.core.cluster_faults import client_url, cluster_fault
from mathsearch.core.errors import WriteError
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteFailure:
    """One action the cluster refused for good: its index, id, HTTP status and reason."""

    index: str
    doc_id: str
    status: int | str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.doc_id,
            "status": self.status,
            "reason": self.reason,
        }


@dataclass
class WriteReport:
    """What one :meth:`BulkWriter.write` did."""

    created: int = 0
    updated: int = 0
    noop: int = 0
    retries: int = 0
    failures: list[WriteFailure] = field(default_factory=list)

    @property
    def written(self) -> int:
        """Actions the cluster accepted (created, updated or unchanged)."""
        return self.created + self.updated + self.noop

    def to_dict(self) -> dict[str, Any]:
        return {
            "written": self.written,
            "created": self.created,
            "updated": self.updated,
            "noop": self.noop,
            "retries": self.retries,
            "failed": len(self.failures),
            "failures": [f.to_dict() for f in self.failures[:100]],
        }


def is_transient(status: int | str | None) -> bool:
    """429, 5xx and "no HTTP answer" (connection errors) are worth retrying."""
    if isinstance(status, int):
        return status == 429 or status >= 500
    return True


class BulkWriter:
    """Writes action streams with retries; see the module docstring.

    Args:
        client: an OpenSearch client.
        settings: chunking, retries, backoff and refresh (``MATHSEARCH_*`` by default).
        refresh: overrides ``settings.refresh``.
        sleep: how to wait between retry rounds (tests pass a recorder).
    """

    def __init__(
        self,
        client: OpenSearch,
        settings: OpenSearchSettings | None = None,
        *,
        refresh: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.settings = settings or OpenSearchSettings.from_env()
        self.refresh = refresh or self.settings.refresh
        self._sleep = sleep
        #: the exception of the last request that failed as a whole (unreachable cluster)
        self._request_error: BaseException | None = None

    def write(self, actions: Iterable[dict[str, Any]]) -> WriteReport:
        """Write every action; transient refusals are retried, permanent ones reported.

        Raises:
            WriteError: actions still refused after the last retry round because the cluster
                was unreachable or overloaded (their ids are in the message); permanent
                per-item refusals never raise.
        """
        report = WriteReport()
        touched: set[str] = set()
        stream = iter(actions)
        window = max(1, self.settings.bulk_chunk_docs) * 8
        while pending := list(itertools.islice(stream, window)):
            self._write_window(pending, report, touched)
        if self.refresh == "end" and touched:
            self._call(lambda: self.client.indices.refresh(index=",".join(sorted(touched))))
        return report

    def _write_window(
        self, pending: list[dict[str, Any]], report: WriteReport, touched: set[str]
    ) -> None:
        attempt = 0
        while pending:
            retry = self._round(pending, report, touched)
            if not retry:
                return
            statuses = ", ".join(sorted({str(status) for _, status in retry}))
            if attempt >= self.settings.bulk_max_retries:
                ids = ", ".join(str(a.get("_id")) for a, _ in retry[:5])
                error = self._request_error
                fault = cluster_fault(error, client_url(self.client)) if error else None
                if fault:  # the cluster cannot be reached: say where and what to change
                    raise WriteError(
                        f"{len(retry)} actions not written after {attempt} retries (first ids: "
                        f"{ids}): {fault}"
                    )
                raise WriteError(
                    f"{len(retry)} actions still refused after {attempt} retries "
                    f"(status {statuses}; first ids: {ids})"
                )
            delay = self._delay(attempt) * (0.5 + random.random() / 2)
            logger.warning(
                "%d actions refused (status %s); retry %d in %.1f s",
                len(retry),
                statuses,
                attempt + 1,
                delay,
            )
            self._sleep(delay)
            attempt += 1
            report.retries += len(retry)
            pending = [action for action, _ in retry]

    def _round(
        self, actions: list[dict[str, Any]], report: WriteReport, touched: set[str]
    ) -> list[tuple[dict[str, Any], int | str]]:
        by_key = {(a.get("_index"), str(a.get("_id"))): a for a in actions}
        retry: list[tuple[dict[str, Any], int | str]] = []
        self._request_error = None
        refresh = "false" if self.refresh == "end" else self.refresh
        results = helpers.streaming_bulk(
            self.client,
            actions,
            chunk_size=self.settings.bulk_chunk_docs,
            max_chunk_bytes=self.settings.bulk_chunk_bytes,
            raise_on_error=False,
            raise_on_exception=False,
            max_retries=0,
            refresh=refresh,
        )
        for ok, item in results:
            info = next(iter(item.values()))
            index, doc_id = info.get("_index"), str(info.get("_id"))
            status = info.get("status", "N/A")
            if isinstance(info.get("exception"), BaseException):  # the whole request failed
                self._request_error = info["exception"]
            if ok:
                touched.add(str(index))
                result = info.get("result")
                if result == "created":
                    report.created += 1
                elif result == "noop":
                    report.noop += 1
                else:
                    report.updated += 1
                continue
            action = by_key.get((index, doc_id))
            if action is None:  # an alias in the action, the concrete index in the answer
                action = next((a for (_, i), a in by_key.items() if i == doc_id), None)
            if is_transient(status) and action is not None:
                retry.append((action, status))
            else:
                report.failures.append(
                    WriteFailure(
                        index=str(index), doc_id=doc_id, status=status, reason=_reason(info)
                    )
                )
        return retry

    def _call(self, request: Callable[[], Any]) -> Any:
        for attempt in range(self.settings.bulk_max_retries + 1):
            try:
                return request()
            except (OSConnectionError, TransportError) as exc:
                status = getattr(exc, "status_code", None)
                if not is_transient(status) or attempt == self.settings.bulk_max_retries:
                    fault = cluster_fault(exc, client_url(self.client))
                    raise WriteError(
                        f"{fault} (after {attempt} retries)"
                        if fault
                        else f"OpenSearch refused the request: {exc}"
                    ) from exc
                self._sleep(self._delay(attempt))
        return None

    def _delay(self, attempt: int) -> float:
        """Exponential backoff: ``MATHSEARCH_BULK_BACKOFF * 2**attempt``, capped."""
        return min(self.settings.bulk_max_backoff, self.settings.bulk_backoff * 2**attempt)


def _reason(info: dict[str, Any]) -> str:
    error = info.get("error")
    if isinstance(error, dict):
        reason = f"{error.get('type', 'error')}: {error.get('reason', '')}"
        cause = error.get("caused_by")
        if isinstance(cause, dict) and cause.get("reason"):
            reason += f" ({cause.get('reason')})"
        return reason[:500]
    return str(error or info.get("exception") or "refused")[:500]
