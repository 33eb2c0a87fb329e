"""The indexing pipeline against the real node and Redis: inline, through workers, enrichment."""

from __future__ import annotations

import urllib.request
import uuid

import pytest
from opensearchpy import OpenSearch

from mathsearch.indexer.opensearch_source import iter_opensearch_index
from mathsearch.indexer.records import Failure, make_eq_id
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.documents import failure_actions, failure_id
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.workers.embedding import process_embedder
from mathsearch.workers.index_job import IndexJobError, run_index
from mathsearch.workers.pipeline import JobSpec, embed_write_stage, parse_stage, write_outcome
from mathsearch.workers.settings import WorkerSettings
from tests.conftest import DEFAULT_DIM, DEFAULT_FIELD

from .conftest import accounted, free_port, scratch_alias, versions

pytestmark = pytest.mark.services


@pytest.fixture
def alias(client: OpenSearch, settings: OpenSearchSettings):
    with scratch_alias(client, settings, "pipe") as name:
        yield name


def test_inline_job_accounts_for_every_equation_and_a_rerun_changes_nothing(
    client, settings, alias, corpus
) -> None:
    items = corpus[:300]
    report = run_index(items, alias, inline=True, batch_size=64, progress=False)
    assert report.complete and report.equations == 300
    indexed, failed = accounted(client, alias, settings, items)
    assert report.written == len(indexed) > 250 and report.failed == len(failed) > 0
    assert report.batches == -(-sum(1 for i in items if hasattr(i, "latex")) // 64)
    assert set(report.stage_seconds) == {"parse", "embed", "write"}
    hit = client.get(index=alias, id=sorted(indexed)[0])["_source"]
    assert len(hit[DEFAULT_FIELD]) == DEFAULT_DIM and hit["math_tokens"]
    assert hit["mathml"] == "" and hit["latex"]  # LaTeX input: MathML rendered when asked
    before = versions(client, alias)
    again = run_index(items, alias, inline=True, batch_size=64, progress=False)
    assert versions(client, alias) == before
    assert (again.written, again.failed) == (report.written, report.failed)
    accounted(client, alias, settings, items)


def test_job_through_worker_processes_with_metrics(client, settings, alias, corpus, pipeline):
    port = free_port()
    pipeline["spawn"](concurrency=2, metrics_port=port)
    items = corpus[300:700]
    report = run_index(
        items, alias, worker_settings=pipeline["settings"], batch_size=32, progress=False
    )
    assert report.mode == "workers" and report.complete
    indexed, failed = accounted(client, alias, settings, items)
    assert report.written == len(indexed) and report.failed == len(failed)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line.startswith("mathsearch_") and " " in line
    }
    prefix = pipeline["settings"].queue_prefix
    parsed_ok = samples['mathsearch_equations_total{outcome="ok",stage="parse"}']
    written_ok = samples['mathsearch_equations_total{outcome="ok",stage="write"}']
    assert parsed_ok == written_ok == len(indexed)
    assert samples[f'mathsearch_queue_depth{{queue="{prefix}parse"}}'] == 0
    assert samples['mathsearch_batch_seconds_count{stage="embed"}'] == report.batches


def test_no_worker_is_a_clear_error(client, alias, corpus, worker_settings) -> None:
    lonely = WorkerSettings(**{**worker_settings.__dict__, "queue_prefix": "nobody-"})
    with pytest.raises(IndexJobError, match="no worker consumes"):
        run_index(corpus[:5], alias, worker_settings=lonely, progress=False)
    assert not client.indices.exists(index=alias)  # a job that cannot run leaves no index


def test_enrichment_of_a_library_index_through_the_workers(client, settings, alias, pipeline):
    library = f"{settings.index_prefix}-test-lib-{uuid.uuid4().hex[:8]}"
    docs = {
        "p1": "We have \\begin{equation} E = mc^2 \\end{equation} and "
        "\\begin{equation} \\frac{a}{b} + x^2 \\end{equation} here.",
        "p2": "Only \\[ \\int_0^1 f(x)\\,dx \\] and a broken \\[ \\frac{a}{b \\] one.",
        "p3": "No mathematics at all.",
    }
    client.indices.create(index=library, body={"settings": {"number_of_replicas": 0}})
    for doc_id, body in docs.items():
        client.index(index=library, id=doc_id, body={"body": body, "year": 2003})
    client.indices.refresh(index=library)
    untouched = client.get(index=library, id="p3")["_version"]
    pipeline["spawn"]()
    try:
        items = list(iter_opensearch_index(client, library, "body", mode="text"))
        report = run_index(
            items,
            alias,
            enrich_index=library,
            worker_settings=pipeline["settings"],
            batch_size=1,
            progress=False,
        )
        assert report.complete
        accounted(client, alias, settings, items)
        p1 = client.get(index=library, id="p1")["_source"]
        assert p1["year"] == 2003 and p1["math"]["equation_count"] == 2
        assert len(p1["math"]["vector"]) == DEFAULT_DIM
        assert client.get(index=library, id="p2")["_source"]["math"]["equation_count"] == 1
        assert client.get(index=library, id="p3")["_version"] == untouched
    finally:
        client.indices.delete(index=library, ignore_unavailable=True)


def test_bad_graphs_model_mismatch_and_stale_failure_records(
    client, settings, alias, corpus
) -> None:
    spec = VectorSpec.from_card(process_embedder().card)
    ensure_equation_index(client, alias, [spec], settings)
    failures_index = ensure_failures_index(client, settings)
    job = JobSpec.create(alias, spec.field, failures_index)
    records = [item.to_dict() for item in corpus[:40] if hasattr(item, "latex")][:6]
    payload = parse_stage(job, "b0", records)
    assert len(payload["parsed"]) == 6
    payload["parsed"][0]["graph"] = {"tags": [1], "attrs": []}  # corrupt in transit
    # a failure record left by an earlier run for an equation that now goes through
    stale = payload["parsed"][1]
    list(client.bulk(body=list(_bulk(failure_actions(failures_index, [
        {"eq_id": stale["eq_id"], "doc_id": "", "stage": "convert", "reason": "old"}
    ], target=alias))), refresh=True)["items"])  # fmt: skip
    entry = embed_write_stage(job, "b0", payload, client=client)
    assert (entry["written"], entry["failed"]) == (5, 1)
    assert entry["failures_by_stage"] == {"embed": 1}
    assert not client.exists(index=failures_index, id=failure_id(alias, stale["eq_id"]))
    record = client.get(index=failures_index, id=failure_id(alias, records[0]["eq_id"]))
    assert record["_source"]["reason"] == "invalid-graph"
    # a worker whose model writes another field refuses the batch instead of mixing vectors
    other = JobSpec.create(alias, "vec_other_v9", failures_index)
    refused = embed_write_stage(other, "b1", parse_stage(other, "b1", records[2:4]), client=client)
    # both equations are already in the index: no failure record is added for them
    assert (refused["written"], refused["failed"]) == (2, 0)
    # the same for equations the index does not hold: recorded, once
    new = [item.to_dict() for item in corpus[40:80] if hasattr(item, "latex")][:2]
    refused = embed_write_stage(other, "b2", parse_stage(other, "b2", new), client=client)
    assert refused["failed"] == 2
    held, recorded = write_outcome(client, other, [], [], [])
    assert (held, recorded) == (0, [])


def _bulk(actions):
    for action in actions:
        yield {"update": {"_index": action["_index"], "_id": action["_id"]}}
        yield {"doc": action["doc"], "upsert": action["upsert"]}


def test_prune_removes_what_revised_documents_lost_and_keeps_unreadable_ones(
    client, settings, alias, corpus
) -> None:
    items = corpus[:110]  # 40 real hep-th papers, 9 extraction failures among them
    run_index(items, alias, inline=True, batch_size=32, progress=False)
    by_doc: dict[str, list] = {}
    for item in items:
        by_doc.setdefault(item.doc_id, []).append(item)
    # revised: 0301026 lost its last equation and its failed one; 0301005 is unreadable now;
    # 0301004 is not in this run at all
    lost_eq = [i for i in by_doc["0301026"] if hasattr(i, "latex")][-1]
    lost_failure = next(i for i in by_doc["0301026"] if not hasattr(i, "latex"))
    unreadable = Failure(make_eq_id("0301005", "*"), "0301005", "extract", "unreadable-source")
    revised = [
        i
        for i in items
        if i.doc_id not in {"0301004", "0301005"} and i not in (lost_eq, lost_failure)
    ] + [unreadable]
    untouched = by_doc["0301004"] + by_doc["0301005"]
    plain = run_index(revised, alias, inline=True, batch_size=32, progress=False)
    assert plain.pruned is None
    stale = accounted(client, alias, settings, revised + untouched + [lost_eq, lost_failure])
    assert lost_eq.eq_id in stale[0] and lost_failure.eq_id in stale[1]  # without --prune
    report = run_index(revised, alias, inline=True, batch_size=32, progress=False, prune=True)
    assert report.pruned is not None
    assert report.pruned["documents"] == len(by_doc) - 2
    assert (report.pruned["equations"], report.pruned["failure_records"]) == (1, 1)
    assert report.pruned["kept_unreadable"] == ["0301005"]
    # exactly the revision's equations and records, the unread paper's and the unreadable one's
    accounted(client, alias, settings, revised + untouched)
    again = run_index(revised, alias, inline=True, batch_size=32, progress=False, prune=True)
    assert again.pruned is not None and again.pruned["equations"] == 0
