"""Shared fixtures. Service tests talk to the real stack started by `mathsearch stack up`."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.hepth import iter_hepth
from mathsearch.indexer.parse import ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.opensearch import OpenSearchSettings, connect
from mathsearch.opensearch.searcher import Searcher
from mathsearch.runtime.embedders import ARCHIVE_DIR, Embedder, default_model_path, load_embedder
from mathsearch.runtime.model_card import card_path, load_card
from mathsearch.stack.demo import demo_records
from mathsearch.workers import WorkerSettings
from mathsearch.workers.embedding import vectors_of
from tests.opensearch.conftest import drop_alias, fill, new_alias
from tests.workers.conftest import CORPUS, WorkerProcess

#: The shipped default graph CNN's card. Tests that mean "the default model" take its field and
#: space type from here rather than from a version literal (the default moves with new releases).
DEFAULT_CARD = load_card(default_model_path("gcn"), verify_sha256=False)
DEFAULT_FIELD = DEFAULT_CARD.vector_field
DEFAULT_SPACE = DEFAULT_CARD.space_type
DEFAULT_DIM = DEFAULT_CARD.embedding_dim
#: The field of the default's int8 variant (tests/opensearch/second_models.gcn_int8).
DEFAULT_INT8_FIELD = f"{DEFAULT_FIELD}_int8"


#: Markers of the tests that may talk to the stack (the node, Redis, a three-node cluster).
SERVICE_MARKERS = ("services", "cluster")


def _service_ports() -> frozenset[int]:
    """The ports of the configured OpenSearch node(s) and Redis, and the three-node cluster's,
    as the session starts (a test that points a setting at a dead port on purpose may use it)."""
    ports = {9210, 9211, 9212}
    urls = [*OpenSearchSettings.from_env().urls, WorkerSettings.from_env().redis_url]
    for url in urls:
        parts = urlsplit(url)
        ports.add(parts.port or {"https": 443, "http": 80, "redis": 6379}.get(parts.scheme, 0))
    return frozenset(ports)


SERVICE_PORTS = _service_ports()


@contextlib.contextmanager
def _stack_guard(item: pytest.Item) -> Iterator[None]:
    """Around a test without a service marker: a connection to the stack fails the test, naming
    the marker to add (the stack-free stage of the test command runs with the stack down, where
    such a test would fail less clearly)."""
    if any(item.get_closest_marker(name) for name in SERVICE_MARKERS):
        yield
        return
    ports = SERVICE_PORTS
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and len(address) >= 2 and address[1] in ports:
            pytest.fail(
                f"{item.nodeid} connects to {address[0]}:{address[1]} (the stack) without "
                "@pytest.mark.services",
                pytrace=False,
            )
        return real_connect(sock, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _stack_guard(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _stack_guard(item):
        yield


@pytest.fixture
def field_twin(tmp_path: Path) -> Path:
    """Another model (gcn-v1's file and card) whose card claims the default model's family and
    version, so it would write the default's vector field with other vectors."""
    v1 = ARCHIVE_DIR / "gcn-v1.onnx"  # superseded: models/ of the checkout, not the wheel
    twin = tmp_path / "twin" / "gcn-twin.onnx"
    twin.parent.mkdir()
    shutil.copy(v1, twin)
    card = load_card(v1)
    card.version = DEFAULT_CARD.version
    card_path(twin).write_text(json.dumps(card.to_dict()), encoding="utf-8")
    return twin


@pytest.fixture(scope="session")
def settings() -> OpenSearchSettings:
    return OpenSearchSettings.from_env()


@pytest.fixture(scope="session")
def worker_settings() -> WorkerSettings:
    return WorkerSettings.from_env()


@pytest.fixture(scope="session")
def client(settings: OpenSearchSettings) -> OpenSearch:
    """A client of the real node; the test fails (never skips) when the node is not up."""
    client = connect(settings)
    try:
        client.cluster.health()
    except Exception as exc:
        pytest.fail(
            f"OpenSearch at {settings.url} does not answer ({exc!r}); run the suite through "
            "`./deploy/run.sh test` or start the stack with `mathsearch stack up`"
        )
    return client


@pytest.fixture
def index_name(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[str]:
    """A fresh index name, deleted after the test."""
    name = f"{settings.index_prefix}-test-{uuid.uuid4().hex[:10]}"
    yield name
    client.indices.delete(index=name, ignore_unavailable=True)


@pytest.fixture
def no_disk_monitor(client: OpenSearch) -> Iterator[None]:
    """Switch off the disk monitor, which may lift a read_only_allow_delete block by itself."""
    key = "cluster.routing.allocation.disk.threshold_enabled"
    client.cluster.put_settings(body={"transient": {key: False}})
    yield
    client.cluster.put_settings(body={"transient": {key: None}})


#: A library's own documents (tests/resources/library/README.md).
LIBRARY_DOCUMENTS = Path(__file__).parent / "resources" / "library" / "hepth-documents.jsonl"


@pytest.fixture(scope="session")
def library_index(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[tuple[str, str]]:
    """``(library index, equation alias)``: twelve real hep-th papers in a library's own index
    (``title``, ``body``), enriched with ``math.*`` by an inline job that indexed their
    equations into the alias (no second-stage fields); both dropped afterwards."""
    from mathsearch.indexer.opensearch_source import iter_opensearch_index
    from mathsearch.workers.index_job import run_index

    tag = uuid.uuid4().hex[:8]
    library = f"{settings.index_prefix}-test-library-{tag}"
    alias = f"{settings.index_prefix}-test-library-eq-{tag}"
    mapping = {"properties": {"title": {"type": "text"}, "body": {"type": "text"}}}
    client.indices.create(
        index=library, body={"settings": {"number_of_replicas": 0}, "mappings": mapping}
    )
    try:
        for line in LIBRARY_DOCUMENTS.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            client.index(
                index=library, id=doc["id"], body={"title": doc["title"], "body": doc["body"]}
            )
        client.indices.refresh(index=library)
        items = list(iter_opensearch_index(client, library, "body", mode="text"))
        report = run_index(items, alias, inline=True, enrich_index=library, rerank=(),
                           progress=False)  # fmt: skip
        assert report.complete and report.written > 100
        client.indices.refresh(index=f"{library},{alias}")
        yield library, alias
    finally:
        client.indices.delete(index=library, ignore_unavailable=True)
        client.indices.delete(index=f"{alias}-0*", ignore_unavailable=True)
        client.indices.delete_index_template(name=f"{alias}-template", ignore=404)


# The sample index and the Celery pipeline, shared by every package's tests (built once).


@pytest.fixture(scope="session")
def encoder() -> Embedder:
    return load_embedder("gcn")


@pytest.fixture(scope="session")
def demo_parsed() -> list[ParsedEquation]:
    """The bundled sample's 206 real hep-th equations, featurised."""
    kept, _ = demo_records()
    return kept


@pytest.fixture(scope="session")
def demo_dicts(demo_parsed: list[ParsedEquation]) -> list[dict[str, Any]]:
    return [p.to_dict() for p in demo_parsed]


@pytest.fixture(scope="session")
def demo_vectors(encoder: Embedder, demo_parsed: list[ParsedEquation]) -> list[list[float]]:
    return vectors_of(encoder, demo_parsed)


@pytest.fixture
def fresh_alias(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[str]:
    """An unused alias name; its indexes are deleted after the test."""
    alias = new_alias(settings)
    yield alias
    drop_alias(client, alias)


@pytest.fixture(scope="session")
def equation_alias(
    client: OpenSearch,
    settings: OpenSearchSettings,
    encoder: Embedder,
    demo_dicts: list[dict[str, Any]],
    demo_vectors: list[list[float]],
) -> Iterator[str]:
    """A read-only equation index of the 206 sample equations with the default model's vectors
    (field ``DEFAULT_FIELD``)."""
    alias = new_alias(settings)
    fill(client, alias, settings, encoder, demo_dicts, demo_vectors)
    yield alias
    drop_alias(client, alias)


@pytest.fixture(scope="session")
def searcher(client: OpenSearch, equation_alias: str) -> Searcher:
    return Searcher(client, equation_alias)


@pytest.fixture(scope="session")
def corpus() -> list[EquationRecord | Failure]:
    """1,225 real hep-th 2003 items (every 12th equation; 49 are extraction failures)."""
    return list(iter_hepth(str(CORPUS)))


@pytest.fixture
def pipeline(worker_settings: WorkerSettings, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Queues of this test only; ``spawn(**env)`` starts workers on them (stopped afterwards)."""
    prefix = f"t{uuid.uuid4().hex[:6]}-"
    settings = dataclasses.replace(worker_settings, queue_prefix=prefix)
    workers: list[WorkerProcess] = []

    def spawn(concurrency: int = 1, metrics_port: int = 0, **overrides: str) -> WorkerProcess:
        """A worker on ``state["settings"]`` (a test may point it at another Redis)."""
        log = tmp_path / f"worker-{len(workers)}.log"
        worker = WorkerProcess(state["settings"], {**os.environ, **overrides}, log)
        workers.append(worker)
        return worker.start(concurrency, metrics_port)

    state: dict[str, Any] = {"settings": settings, "spawn": spawn, "workers": workers}
    yield state
    for worker in workers:
        worker.stop()
