"""The fuzz bench against the real node: every generated input accounted for by id, the watchdog
catching hangs and dying runners, and the pipeline fixes the bench led to (docs/fuzzing.md)."""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch, helpers

from mathsearch.bench import fuzz_runner
from mathsearch.bench.fuzz import FuzzRun, drop_run, run_bench_fuzz
from mathsearch.indexer.records import EquationRecord
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.workers.embedding import process_embedders
from mathsearch.workers.parsing import parse_records
from mathsearch.workers.pipeline import JobSpec, embed_write_stage, parse_stage, writable


def ids_of(client: OpenSearch, index: str, query: dict[str, Any]) -> dict[str, dict]:
    body = {"query": query, "_source": ["eq_id", "reason", "stage"]}
    return {hit["_id"]: hit["_source"] for hit in helpers.scan(client, index=index, query=body)}


@pytest.mark.services
def test_every_generated_input_is_accounted_for(
    client: OpenSearch, settings: OpenSearchSettings
) -> None:
    alias = f"{settings.index_prefix}-test-fuzz-{uuid.uuid4().hex[:8]}"
    run = FuzzRun(inputs=250, seed=11, runners=2, batch_size=128)
    report = run_bench_fuzz(run, client, index=alias, keep=True, progress=False, with_ids=True)
    try:
        assert (report["crashes"], report["hangs"], report["unaccounted"]) == (0, 0, 0)
        assert (report["extra_ids"], report["empty_reasons"]) == (0, 0)
        assert sum(report["outcomes"].values()) == 250 and report["equations"] > 250
        assert report["indexed"] > 0 and report["failed"] > 0
        client.indices.refresh(index=f"{alias},{report['failures_index']}")
        indexed = ids_of(client, alias, {"match_all": {}})
        assert set(indexed) == set(report["indexed_ids"]) and len(indexed) == report["indexed"]
        failed = ids_of(client, report["failures_index"], {"term": {"index": alias}})
        assert len(failed) == report["failed"]
        assert all(record["reason"] and record["stage"] for record in failed.values())
        assert not {record["eq_id"] for record in failed.values()} & set(indexed)
    finally:
        drop_run(client, alias, report["failures_index"])


def _hang_or_die(real: Any) -> Any:
    def run_input(item: Any, *args: Any) -> Any:
        if item.number == 2:
            time.sleep(600)  # a hang: the watchdog must kill this runner
        if item.number == 4:
            os._exit(3)  # a crash that takes the process down (a segfault, say)
        return real(item, *args)

    return run_input


@pytest.mark.services
def test_watchdog_reports_a_hang_and_a_dead_runner_and_goes_on(
    client: OpenSearch, settings: OpenSearchSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fuzz_runner, "run_input", _hang_or_die(fuzz_runner.run_input))
    run = FuzzRun(inputs=8, seed=3, formats=("latex",), input_timeout=3.0, batch_size=2)
    root = Path(fuzz_runner.tmp_root() or tempfile.gettempdir())
    before = set(root.glob("mathsearch-fuzz-*"))
    report = run_bench_fuzz(run, client, progress=False)
    # the killed and the dead runner's input folders are removed too
    assert set(root.glob("mathsearch-fuzz-*")) <= before
    assert [h["number"] for h in report["hang_samples"]] == [2]
    assert [c["number"] for c in report["crash_samples"]] == [4]
    assert "exit code 3" in report["crash_samples"][0]["trace"]
    assert report["restarts"] == 2 and report["unaccounted"] == 0
    assert report["outcomes"]["hang"] == 1 and report["outcomes"]["crash"] == 1
    assert sum(report["outcomes"].values()) == 8


@pytest.fixture
def job(client: OpenSearch, settings: OpenSearchSettings) -> Iterator[JobSpec]:
    alias = f"{settings.index_prefix}-test-fuzzfix-{uuid.uuid4().hex[:8]}"
    spec = process_embedders(["gcn"])[0]
    ensure_equation_index(client, alias, [VectorSpec.from_card(spec.card)], settings)
    job = JobSpec.create(alias, spec.vector_field, ensure_failures_index(client, settings))
    yield job
    drop_run(client, alias, job.failures_index)


@pytest.mark.services
def test_one_bad_record_does_not_sink_its_batch(client: OpenSearch, job: JobSpec) -> None:
    """Regressions: a 600-byte id failed the whole bulk request; a lone surrogate in an excerpt
    raised UnicodeEncodeError; ``keywords: 5`` raised TypeError - each for every equation of
    the batch, and the failure records of a refused batch were dropped silently."""
    good = [EquationRecord(f"ok{n}", "d", n, latex=f"x^{n}+1").to_dict() for n in range(3)]
    bad = [
        EquationRecord("i" * 600, "d", 10, latex="a+b").to_dict(),
        EquationRecord("sur", "d", 11, latex="x + \ud800").to_dict(),
        {**EquationRecord("kw", "d", 12, latex="y").to_dict(), "extra": {"keywords": 5}},
        {**EquationRecord("pos", "d", 13, latex="z").to_dict(), "position": "x"},
    ]
    payload = parse_stage(job, "b0", good + bad)
    entry = embed_write_stage(job, "b0", payload, client=client, embedders=process_embedders())
    client.indices.refresh(index=f"{job.index},{job.failures_index}")
    indexed = set(ids_of(client, job.index, {"match_all": {}}))
    failed = ids_of(client, job.failures_index, {"term": {"index": job.index}})
    reasons = {record["eq_id"]: record["reason"] for record in failed.values()}
    long_id = writable(bad[0])["eq_id"]
    assert {"ok0", "ok1", "ok2", "kw", long_id} == indexed and entry["written"] == 5
    assert reasons == {"sur": "invalid-utf8", "pos": "bad-record"}


def test_records_with_bad_field_types_are_failure_records() -> None:
    out = parse_records(
        [
            {"eq_id": "a", "doc_id": "d", "position": "x", "latex": "y"},
            {"eq_id": "b", "doc_id": "d", "position": 2**40, "latex": "y"},
            {"eq_id": "c", "doc_id": "d", "position": 0, "latex": 5},
            {"doc_id": "d", "position": 0, "latex": "y"},
            ["not", "a", "record"],
            {"eq_id": "e", "doc_id": "d", "position": 0, "latex": "y", "extra": "x"},
        ]
    )
    assert [item.get("reason") for item in out] == ["bad-record"] * 6
    assert [item["eq_id"] for item in out] == ["a", "b", "c", "#3", "#4", "e"]


def test_writable_makes_any_parsed_equation_storable() -> None:
    item = {"eq_id": "\ud800" + "i" * 500, "latex": "x\udfff", "graph": {"tags": [1]}}
    item["extra"] = {"keywords": "kw"}
    clean = writable(item)
    json.dumps(clean, ensure_ascii=False).encode("utf-8")
    assert len(clean["eq_id"].encode()) <= 384 and clean["latex"] == "x\ufffd"
    assert clean["extra"]["keywords"] == ["kw"] and clean["graph"] is item["graph"]
