"""Fixtures of the worker tests: real equations, real `mathsearch worker` processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec
from mathsearch.workers.embedding import process_embedder
from mathsearch.workers.health import STACK_DUMP_SIGNAL
from mathsearch.workers.index_job import IndexJobError
from mathsearch.workers.settings import WorkerSettings
from mathsearch.workers.worker_process import start_worker, stop_worker
from tests.process_tree import live_children

CORPUS = Path(__file__).parents[1] / "resources" / "export" / "hepth2003-every12th.txt"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WorkerProcess:
    """`mathsearch worker` in its own process group, on queues with a prefix of its own."""

    def __init__(self, settings: WorkerSettings, env: dict[str, str], log: Path) -> None:
        self.settings = settings
        self.env = env
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self, concurrency: int = 1, metrics_port: int = 0) -> WorkerProcess:
        try:
            self.process = start_worker(
                self.settings,
                concurrency,
                metrics_port=metrics_port,
                hostname=f"test-{uuid.uuid4().hex[:6]}",
                env=self.env,
                log=self.log,
                loglevel="INFO",
                timeout=90,
            )
        except IndexJobError as exc:
            pytest.fail(str(exc))
        return self

    def children(self) -> list[int]:
        return live_children(self.process.pid) if self.process is not None else []

    def kill_hard(self) -> None:
        """SIGKILL the whole worker: main process and pool."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None:
            stop_worker(self.process)

    def wait_exit(self, timeout: float) -> int:
        """The exit code; if it does not exit in time, fail with every process's stacks.

        The stacks come from the worker's own dump signal (``install_stack_dump``), written to
        its log: where the main process and the pool are stuck, not only that they are.
        """
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            pytest.fail(
                f"the worker did not exit within {timeout:.0f} s; its stacks and log:\n"
                + self.output(limit=30000)
            )

    def dump_stacks(self) -> None:
        """Ask the main process, then each pool process, for its stacks (into the log)."""
        for pid in [self.process.pid, *self.children()]:  # one at a time: no interleaving
            os.kill(pid, STACK_DUMP_SIGNAL)
            time.sleep(1)

    def output(self, limit: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-limit:]


def accounted(
    client: OpenSearch,
    alias: str,
    settings: OpenSearchSettings,
    items: list[EquationRecord | Failure],
) -> tuple[set[str], set[str]]:
    """Every input id is in the index or in the failures index, exactly once (asserted)."""
    client.indices.refresh(index=f"{alias},{settings.index_prefix}-failures")
    indexed = _ids(client, alias, {"match_all": {}}, "_id")
    failed = _ids(client, f"{settings.index_prefix}-failures", {"term": {"index": alias}}, "eq_id")
    expected = {item.eq_id for item in items}
    assert len(expected) == len(items), "the input has duplicate ids"
    assert not indexed & failed, f"in both places: {sorted(indexed & failed)[:5]}"
    missing, extra = expected - indexed - failed, (indexed | failed) - expected
    assert not missing and not extra, f"missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
    return indexed, failed


def _ids(client: OpenSearch, index: str, query: dict, key: str) -> set[str]:
    answer = client.search(index=index, body={"query": query, "size": 10000, "_source": ["eq_id"]})
    hits = answer["hits"]["hits"]
    assert answer["hits"]["total"]["value"] == len(hits) < 10000
    values = [hit["_id"] if key == "_id" else hit["_source"][key] for hit in hits]
    assert len(values) == len(set(values)), "an equation is recorded twice"
    return set(values)


def versions(client: OpenSearch, alias: str) -> dict[str, int]:
    answer = client.search(
        index=alias, body={"query": {"match_all": {}}, "size": 10000, "version": True}
    )
    return {hit["_id"]: hit["_version"] for hit in answer["hits"]["hits"]}


@contextmanager
def scratch_alias(client: OpenSearch, settings: OpenSearchSettings, label: str) -> Iterator[str]:
    """An unused equation alias; its indexes, template and failure records go afterwards."""
    name = f"{settings.index_prefix}-test-{label}-{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        client.indices.delete(index=f"{name}-0*", ignore_unavailable=True)
        client.indices.delete_index_template(name=f"{name}-template", ignore=404)
        drop_failures(client, settings, name)


def drop_failures(client: OpenSearch, settings: OpenSearchSettings, alias: str) -> None:
    """Delete the failure records of ``alias`` (the node has no _delete_by_query module)."""
    index = f"{settings.index_prefix}-failures"
    client.indices.refresh(index=index)
    answer = client.search(
        index=index, body={"query": {"term": {"index": alias}}, "size": 10000, "_source": False}
    )
    body = [{"delete": {"_index": index, "_id": hit["_id"]}} for hit in answer["hits"]["hits"]]
    if body:
        client.bulk(body=body, refresh=True)


@contextmanager
def fresh_alias(client: OpenSearch, settings: OpenSearchSettings, label: str) -> Iterator[str]:
    """A new equation index behind ``<prefix>-test-<label>-<hex>``; index, template and failure
    records deleted afterwards."""
    with scratch_alias(client, settings, label) as name:
        spec = VectorSpec.from_card(process_embedder().card)
        ensure_equation_index(client, name, [spec], settings)
        yield name
