"""Shared fixtures. Service tests talk to the real stack started by `mathsearch stack up`."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.export.embedders import default_model_path
from mathsearch.export.model_card import card_path, load_card
from mathsearch.opensearch import OpenSearchSettings, connect
from mathsearch.workers import WorkerSettings

#: The shipped default graph CNN's card. Tests that mean "the default model" take its field and
#: space type from here rather than from a version literal (the default moves with new releases).
DEFAULT_CARD = load_card(default_model_path("gcn"), verify_sha256=False)
DEFAULT_FIELD = DEFAULT_CARD.vector_field
DEFAULT_SPACE = DEFAULT_CARD.space_type
DEFAULT_DIM = DEFAULT_CARD.embedding_dim
#: The field of the default's int8 variant (tests/opensearch/second_models.gcn_int8).
DEFAULT_INT8_FIELD = f"{DEFAULT_FIELD}_int8"


@pytest.fixture
def field_twin(tmp_path: Path) -> Path:
    """Another model (gcn-v1's file and card) whose card claims the default model's family and
    version, so it would write the default's vector field with other vectors."""
    v1 = default_model_path("gcn").with_name("gcn-v1.onnx")
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
