"""`stack up --nodes 3`: a real three-node cluster on loopback, replicas, a node stopped and back.

Runs on its own ports (9210-9212) and state folder so it never touches the suite's node.
"""

from __future__ import annotations

import dataclasses
import shutil
import time

import pytest
from opensearchpy import helpers

from opensearch import connect
from opensearch.stack import Stack

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


def test_three_nodes_with_replicas_survive_one_node_stopped_and_restarted(cluster) -> None:
    stack, client = cluster
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
    stack.node_stop(1)
    _wait(lambda: client.cluster.health()["number_of_nodes"] == 2, what="node-1 to leave")
    assert stack.status()["number_of_nodes"] == 2
    # every document is still searchable with one node down (replicas are promoted)
    _wait(lambda: client.count(index=index)["count"] == 300, what="all docs searchable")
    hits = client.search(
        index=index, body={"size": 1, "query": {"knn": {"vec": {"vector": [42, 1.0], "k": 1}}}}
    )["hits"]["hits"]
    assert hits[0]["_id"] == "42"

    stack.node_start(1)
    _wait(lambda: client.cluster.health()["number_of_nodes"] == 3, what="node-1 to rejoin")
    _wait(lambda: client.cluster.health(index=index)["status"] == "green", what="green again")
    assert client.count(index=index)["count"] == 300
