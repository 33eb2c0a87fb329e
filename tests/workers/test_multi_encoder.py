"""Jobs with several encoders: one vector field each, secondary refusals as data, workers that
serve several models (real models: the shipped default graph CNN and its int8 variant)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.hepth import iter_hepth
from mathsearch.indexer.records import EquationRecord
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.documents import failure_id
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.query_encoder import ModelQueryEncoder
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.runtime.embedders import load_embedder
from mathsearch.runtime.model_card import load_card
from mathsearch.workers.index_job import run_index
from mathsearch.workers.pipeline import JobSpec, embed_write_stage, parse_stage
from mathsearch.workers.worker_process import start_worker, stop_worker
from tests.conftest import DEFAULT_DIM, DEFAULT_FIELD, DEFAULT_INT8_FIELD, DEFAULT_SPACE

from ..opensearch.second_models import RefusingEmbedder, gcn_int8
from .conftest import CORPUS, accounted, drop_failures

pytestmark = pytest.mark.services

FIELDS = [DEFAULT_FIELD, DEFAULT_INT8_FIELD]


@pytest.fixture(scope="module")
def records() -> list[EquationRecord]:
    """Real hep-th equations (no extraction failures)."""
    items = [item for item in iter_hepth(str(CORPUS)) if isinstance(item, EquationRecord)]
    return items[:90]


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory: pytest.TempPathFactory, records: list) -> Path:
    from mathsearch.indexer.parse import Featuriser, ParsedEquation

    with Featuriser() as featuriser:
        parsed = featuriser.parse_batch(records[:40])
    graphs = [p.graph for p in parsed if isinstance(p, ParsedEquation)]
    return gcn_int8(tmp_path_factory.mktemp("int8"), graphs)


@pytest.fixture
def alias(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[str]:
    name = f"{settings.index_prefix}-test-multi-{uuid.uuid4().hex[:8]}"
    yield name
    client.indices.delete(index=f"{name}-0*", ignore_unavailable=True)
    client.indices.delete_index_template(name=f"{name}-template", ignore=404)
    drop_failures(client, settings, name)


def test_old_payloads_and_the_prefix_stage() -> None:
    old = JobSpec.from_dict({"job_id": "j", "index": "i", "vector_field": "vec_gcn_v1",
                             "failures_index": "f"})  # fmt: skip
    assert old.fields == ("vec_gcn_v1",) and not old.needs_prefix
    job = JobSpec.create("i", ["vec_gcn_v1", "vec_seq2seq_v1"], "f")
    assert JobSpec.from_dict(job.to_dict()) == job and job.vector_field == "vec_gcn_v1"
    assert job.needs_prefix and job.fields == ("vec_gcn_v1", "vec_seq2seq_v1")
    records = [{"eq_id": f"d#{n}", "doc_id": "d", "position": n, "latex": latex}
               for n, latex in enumerate(["x^2 + 2x + 1", r"\frac{a}{b} = c"])]  # fmt: skip
    parsed = parse_stage(job, "b0", records)["parsed"]
    assert all("prefix" in item or "prefix_error" in item for item in parsed)
    assert any(item.get("prefix") for item in parsed)
    plain = parse_stage(JobSpec.create("i", "vec_gcn_v1", "f"), "b0", records)["parsed"]
    assert not any("prefix" in item for item in plain)


def test_inline_job_with_two_encoders_writes_both_fields_and_reruns_change_nothing(
    client, settings, alias, records, int8_model
) -> None:
    encoders = ["gcn", str(int8_model)]
    report = run_index(records, alias, inline=True, batch_size=32, progress=False,
                       encoders=encoders, rerank=())  # fmt: skip
    assert report.complete and report.vector_fields == FIELDS
    indexed, _ = accounted(client, alias, settings, records)
    assert report.written == len(indexed) > 80 and report.refusals == {}
    mapping = client.indices.get_mapping(index=alias)
    properties = next(iter(mapping.values()))["mappings"]["properties"]
    assert properties[DEFAULT_INT8_FIELD]["dimension"] == DEFAULT_DIM
    # the int8 variant scores like its float32 source: its card's space type, the default's
    space_type = properties[DEFAULT_INT8_FIELD]["method"]["space_type"]
    assert space_type == load_card(int8_model).space_type == DEFAULT_SPACE
    found = client.search(index=alias, body={"size": 200, "query": {"match_all": {}}})
    for hit in found["hits"]["hits"]:
        source = hit["_source"]
        assert len(source[DEFAULT_FIELD]) == len(source[DEFAULT_INT8_FIELD]) == DEFAULT_DIM
        assert source["model_versions"] == FIELDS
        assert source["embed_refusals"] == []
    some = found["hits"]["hits"][0]["_source"]
    assert some[DEFAULT_FIELD] != some[DEFAULT_INT8_FIELD]  # two real models, two vectors
    before = {h["_id"]: h["_version"] for h in client.search(
        index=alias, body={"size": 200, "version": True})["hits"]["hits"]}  # fmt: skip
    run_index(records, alias, inline=True, batch_size=32, progress=False, encoders=encoders,
              rerank=())  # fmt: skip
    after = {h["_id"]: h["_version"] for h in client.search(
        index=alias, body={"size": 200, "version": True})["hits"]["hits"]}  # fmt: skip
    assert after == before


def test_secondary_refusal_is_recorded_and_the_equation_stays_searchable(
    client, settings, alias, records, int8_model
) -> None:
    gcn, int8 = load_embedder("gcn"), load_embedder(int8_model)
    refusing = RefusingEmbedder(int8, lambda item: "frac" in item.get("latex", ""), "sympy-parse")
    specs = [VectorSpec.from_card(gcn.card), VectorSpec.from_card(int8.card)]
    ensure_equation_index(client, alias, specs, settings)
    failures_index = ensure_failures_index(client, settings)
    job = JobSpec.create(alias, [s.field for s in specs], failures_index)
    batch = [r.to_dict() for r in records[:30]]
    payload = parse_stage(job, "b0", batch)
    entry = embed_write_stage(job, "b0", payload, client=client, embedders=[gcn, refusing])
    refused_ids = [i["eq_id"] for i in payload["parsed"] if "frac" in i["latex"]]
    refusal = f"{DEFAULT_INT8_FIELD}:sympy-parse"
    assert refused_ids and entry["refusals"] == {refusal: len(refused_ids)}
    assert entry["written"] == len(payload["parsed"])
    client.indices.refresh(index=alias)
    doc = client.get(index=alias, id=refused_ids[0])["_source"]
    assert doc["embed_refusals"] == [refusal]
    assert DEFAULT_INT8_FIELD not in doc and len(doc[DEFAULT_FIELD]) == DEFAULT_DIM
    assert doc["model_versions"] == [DEFAULT_FIELD]
    assert not client.exists(index=failures_index, id=failure_id(alias, refused_ids[0]))
    # searchable with both fields: BM25 and gcn find it, the int8 field adds nothing for it
    searcher = Searcher(client, alias, encoder=ModelQueryEncoder(encoders=["gcn", int8]))
    for mode in (Mode.FUSION, Mode.RRF, Mode.RESCORE, Mode.KNN):
        request = SearchRequest(doc["latex"], mode=mode, k=10, explain=True,
                                vector_fields=tuple(FIELDS))  # fmt: skip
        hits = {hit.eq_id: hit for hit in searcher.search(request).hits}
        if mode in (Mode.FUSION, Mode.RESCORE):  # BM25 carries it; rrf / knn may rank it lower
            assert refused_ids[0] in hits, mode
        for eq_id in set(hits) & set(refused_ids):
            explanation = hits[eq_id].explanation
            int8_part = explanation.fields[1]
            assert int8_part.field == DEFAULT_INT8_FIELD and int8_part.raw is None, mode
    # the primary's refusal is still a failure record; a worker without the field refuses
    primary = RefusingEmbedder(gcn, lambda item: True, "invalid-graph")
    entry = embed_write_stage(job, "b1", parse_stage(job, "b1", batch[:2]), client=client,
                              embedders=[primary, int8])  # fmt: skip
    assert (entry["written"], entry["failed"]) == (2, 0)  # already indexed: not recorded
    new = [r.to_dict() for r in records[30:32]]
    entry = embed_write_stage(job, "b2", parse_stage(job, "b2", new), client=client,
                              embedders=[gcn])  # fmt: skip
    assert entry["failed"] == 2
    record = client.get(index=failures_index, id=failure_id(alias, new[0]["eq_id"]))["_source"]
    assert record["reason"] == "model-mismatch" and DEFAULT_INT8_FIELD in record["detail"]


def test_a_worker_with_two_encoders_embeds_both(
    client, settings, alias, records, int8_model, pipeline, tmp_path
) -> None:
    process = start_worker(
        pipeline["settings"], 1, hostname=f"multi-{uuid.uuid4().hex[:6]}",
        log=tmp_path / "worker.log", timeout=90, encoders=["gcn", str(int8_model)],
    )  # fmt: skip
    try:
        items = records[:40]
        report = run_index(items, alias, worker_settings=pipeline["settings"], batch_size=16,
                           progress=False, encoders=["gcn", str(int8_model)],
                           rerank=())  # fmt: skip
        assert report.mode == "workers" and report.complete and report.failed == 0
        indexed, _ = accounted(client, alias, settings, items)
        found = client.search(index=alias, body={"size": 100, "_source": ["model_versions"]})
        assert len(found["hits"]["hits"]) == len(indexed) == report.written
        for hit in found["hits"]["hits"]:
            assert hit["_source"]["model_versions"] == FIELDS
    finally:
        stop_worker(process)
