"""``mathsearch bench index``'s table (format_bench_index): every figure of the report, and the
CPU it ran on."""

from __future__ import annotations

from pathlib import Path

from mathsearch.bench.index import format_bench_index
from mathsearch.core.machine import describe_cpu


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
