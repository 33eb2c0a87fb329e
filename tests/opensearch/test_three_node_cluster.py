"""`stack up --nodes 3`: a real three-node cluster on loopback, replicas, a node stopped and back.

Runs on its own ports (9210-9212) and state folder so it never touches the suite's node. While
node-1 is down and coming back, a real indexing job (inline: parse, embed, bulk upserts) keeps
writing hep-th equations into an index with a replica; it ends with every equation in the index
exactly once or recorded as failed.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opensearchpy import helpers

from mathsearch.indexer.hepth import iter_hepth
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.opensearch import connect
from mathsearch.opensearch.schema import ensure_failures_index
from mathsearch.stack import Stack
from mathsearch.workers.index_job import IndexReport, run_index

CORPUS = Path(__file__).parents[1] / "resources" / "export" / "hepth2003-every12th.txt"

pytestmark = [pytest.mark.services, pytest.mark.cluster]


def _wait(predicate, timeout: float = 180.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as exc:
            last = exc
        time.sleep(1.0)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def cluster(settings, worker_settings):
    state = settings.state_dir / "test-cluster-3"
    shutil.rmtree(state, ignore_errors=True)
    cluster_settings = dataclasses.replace(settings, url="http://127.0.0.1:9210", state_dir=state)
    stack = Stack(cluster_settings, worker_settings.redis_url)
    try:
        stack.up(3, with_redis=False)
        yield stack, connect(stack.node_settings(3))
    finally:
        stack.stop_nodes(3)
        shutil.rmtree(state, ignore_errors=True)


class OutageJob(threading.Thread):
    """An inline indexing job whose items come in three parts: before node-1 stops, while it
    is down, and after it is back - so the job writes through the whole outage."""

    def __init__(self, stack: Stack, items: list[EquationRecord | Failure], alias: str) -> None:
        super().__init__(daemon=True)
        self.settings = dataclasses.replace(stack.node_settings(3), shards=3, replicas=1)
        self.items, self.alias = items, alias
        self.stopped, self.back = threading.Event(), threading.Event()
        self.report: IndexReport | None = None
        self.failures = ""
        self.error: BaseException | None = None

    def source(self) -> Iterator[EquationRecord | Failure]:
        third = len(self.items) // 3
        yield from self.items[:third]
        assert self.stopped.wait(300)
        yield from self.items[third : 2 * third]
        assert self.back.wait(300)
        yield from self.items[2 * third :]

    def run(self) -> None:
        try:
            client = connect(self.settings)
            self.failures = ensure_failures_index(client, self.settings)  # a replica: it stays up
            client.indices.put_settings(index=self.failures, body={"number_of_replicas": 1})
            self.report = run_index(
                self.source(), self.alias, inline=True, client=client, settings=self.settings,
                batch_size=25, progress=False,
            )  # fmt: skip
        except BaseException as exc:
            self.error = exc


def test_three_nodes_with_replicas_survive_one_node_stopped_and_restarted(cluster) -> None:
    stack, client = cluster
    items = list(iter_hepth(str(CORPUS)))[:240]
    job = OutageJob(stack, items, "mathsearch-test-outage-job")
    status = stack.status()
    assert status["number_of_nodes"] == 3
    assert status["health"] == "green"
    assert status["missing_plugins"] == []
    assert all(len(entry["nodes"]) == 3 for entry in status["plugins"].values())

    index = "mathsearch-test-replicas"
    client.indices.create(
        index=index,
        body={
            "settings": {"number_of_shards": 3, "number_of_replicas": 1, "index.knn": True},
            "mappings": {
                "properties": {
                    "vec": {
                        "type": "knn_vector",
                        "dimension": 2,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "l2"},
                    }
                }
            },
        },
    )
    docs = [
        {"_index": index, "_id": str(i), "_source": {"n": i, "vec": [i, 1.0]}} for i in range(300)
    ]
    helpers.bulk(client, docs, refresh=True)
    _wait(lambda: client.cluster.health(index=index)["status"] == "green", what="green")
    shards = client.cat.shards(index=index, format="json")
    assert sum(1 for s in shards if s["prirep"] == "r" and s["state"] == "STARTED") == 3

    # node-1 is the node behind the base URL (and often the cluster manager): the client, which
    # knows every node, and `status` keep working while it is down
    job.start()
    _wait(lambda: client.count(index=job.alias)["count"] > 0, what="the job's first batches")
    stack.node_stop(1)
    job.stopped.set()
    _wait(lambda: client.cluster.health()["number_of_nodes"] == 2, what="node-1 to leave")
    assert stack.status()["number_of_nodes"] == 2
    # every document is still searchable with one node down (replicas are promoted)
    _wait(lambda: client.count(index=index)["count"] == 300, what="all docs searchable")
    hits = client.search(
        index=index, body={"size": 1, "query": {"knn": {"vec": {"vector": [42, 1.0], "k": 1}}}}
    )["hits"]["hits"]
    assert hits[0]["_id"] == "42"

    stack.node_start(1)
    job.back.set()
    _wait(lambda: client.cluster.health()["number_of_nodes"] == 3, what="node-1 to rejoin")
    _wait(lambda: client.cluster.health(index=index)["status"] == "green", what="green again")
    assert client.count(index=index)["count"] == 300

    # the job wrote before, during and after the outage: each equation once, or failed once
    job.join(300)
    assert not job.is_alive() and job.error is None, job.error
    report = job.report
    assert report is not None and report.complete and not report.lost_batches
    assert report.written + report.failed == len(items) and report.written > 150
    client.indices.refresh(index=f"{job.alias},{job.failures}")
    indexed = [hit["_id"] for hit in helpers.scan(client, index=job.alias, _source=False)]
    failed = [
        hit["_source"]["eq_id"]
        for hit in helpers.scan(
            client, index=job.failures, _source=["eq_id"],
            query={"query": {"term": {"index": job.alias}}},
        )
    ]  # fmt: skip
    count = client.count(index=job.alias)["count"]
    assert len(indexed) == len(set(indexed)) == report.written == count
    assert len(failed) == len(set(failed)) == report.failed
    assert set(indexed) | set(failed) == {item.eq_id for item in items}
    assert not set(indexed) & set(failed)
