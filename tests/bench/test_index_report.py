"""``mathsearch bench index``: its table (format_bench_index; every figure of the report, and
the CPU it ran on) and, against the real node, the stage limits over every field the pipeline
writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.bench.index import format_bench_index, stage_limits
from mathsearch.core.machine import describe_cpu
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.stack.demo import demo_records
from mathsearch.workers.index_job import vector_field_plan
from mathsearch.workers.settings import WorkerSettings


def _report(cpuinfo: Path) -> dict:
    def run(processes: object, eq_per_s: float) -> dict:
        return {
            "processes": processes,
            "eq_per_s": eq_per_s,
            "seconds": 8.1,
            "written": 3000,
            "failed": 0,
            "stage_seconds": {"write": 3.5, "embed": 2.8, "parse": 1.7},
        }

    return {
        "equations": 3000,
        "source": "equation.txt",
        "cpus": 2,
        "cpu": describe_cpu(cpuinfo).as_dict(),
        "stage_limits": {"parse": {"eq_per_s": 2394.3}, "embed": {"eq_per_s": 1073.2}},
        "runs": [run("inline", 371.4), run(2, 548.8)],
        "pya0": {
            "eq_per_s": 98.0,
            "indexed": 2722,
            "rejected": 278,
            "seconds": 30.6,
            "searchable": True,
        },
        "best": 2,
        "ratio_vs_pya0": 5.6,
    }


def test_the_table_names_the_cpu_and_every_run(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
        "flags\t\t: avx2 fma avx512f avx512_vnni avx512_bf16\n"
    )
    lines = format_bench_index(_report(cpuinfo)).splitlines()
    assert lines[0] == "3000 real equations from equation.txt, 2 CPUs"
    assert lines[1].startswith("cpu: AMD EPYC (family 25 model 17), ")
    assert lines[1].endswith("units: avx2 fma avx512f avx512_vnni avx512_bf16")
    assert "  parse    2394.3" in lines and "  embed    1073.2" in lines
    assert "  inline     371.4       8.1     3000       0  embed 2.8, parse 1.7, write 3.5" in lines
    assert lines[-2].startswith("Approach Zero (pya0): 98.0 eq/s (2722 indexed, 278 rejected")
    assert lines[-1] == "best mathsearch run (2) / pya0: 5.60x"


def test_a_report_without_the_cpu_still_formats(tmp_path: Path) -> None:
    report = _report(tmp_path / "missing")
    del report["cpu"]  # a report written before the field existed
    table = format_bench_index(report)
    assert "cpu:" not in table and table.splitlines()[1].startswith("each stage alone")


def test_the_table_gives_each_fields_embedding_rate_when_there_are_several(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path / "missing")
    report["stage_limits"]["embed"]["by_field"] = {"vec_gcn_v7": 2100.0, "vec_gcn_v9_int8": 1800.5}
    lines = format_bench_index(report).splitlines()
    assert "  embed    1073.2  (vec_gcn_v7 2100.0, vec_gcn_v9_int8 1800.5)" in lines


@pytest.mark.services
def test_each_stage_alone_embeds_and_writes_every_field_the_pipeline_writes(
    client: OpenSearch, settings: OpenSearchSettings
) -> None:
    """The stage limits measure the same work as the pipeline: the kNN field and the default
    profile's second-stage fields, each embedded and written."""
    parsed, _ = demo_records()
    records = [p.record for p in parsed[:40]]
    workers = WorkerSettings.from_env()
    plan = vector_field_plan(None, None, workers)
    assert len(plan.fields) >= 2  # gcn-v7's kNN field and the second stage's
    limits = stage_limits(client, records, settings, 16, workers)
    assert set(limits["embed"]["by_field"]) == set(plan.fields) == set(limits["write"]["fields"])
    assert all(rate > 0 for rate in limits["embed"]["by_field"].values())
    # every encoder in turn: the whole stage is slower than its fastest encoder alone
    assert limits["embed"]["eq_per_s"] < max(limits["embed"]["by_field"].values())
    assert limits["parse"]["equations"] == limits["write"]["equations"] == 40
    leftover = client.indices.get(index=f"{settings.index_prefix}-bench-write-*")
    assert not leftover  # the write stage's index is dropped
