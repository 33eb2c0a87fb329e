"""``mathsearch extract``, ``parse``, ``vocab`` and ``bench parse`` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mathsearch.cli.main import main

RESOURCES = Path(__file__).resolve().parents[1] / "resources" / "indexer"
SAMPLE = Path(__file__).resolve().parents[2] / "indexer" / "resources" / "hepth2003-sample.txt"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_extract_then_parse_a_tex_paper_and_a_jats_article(tmp_path: Path) -> None:
    tex = next(RESOURCES.glob("*.tex"))
    jats = RESOURCES / "jats-article.xml"
    equations = tmp_path / "equations.jsonl"
    report = tmp_path / "extract.json"
    assert (
        main(["extract", str(tex), str(jats), "-o", str(equations), "--report", str(report)]) == 0
    )
    records = lines(equations)
    assert len(records) >= 4
    assert {r["doc_id"] for r in records} >= {tex.stem}
    assert all(r.get("latex") or r.get("mathml") for r in records)
    extract_report = json.loads(report.read_text())
    assert extract_report["stage_counts"]["extract"] == len(records)

    parsed = tmp_path / "parsed.jsonl"
    coverage = tmp_path / "coverage.json"
    assert main(["parse", str(equations), "-o", str(parsed), "--report", str(coverage)]) == 0
    out = lines(parsed)
    failures_file = tmp_path / "parsed.failures.jsonl"
    failures = lines(failures_file) if failures_file.exists() else []
    assert len(out) + len(failures) == len(records)
    assert len(out) >= len(records) - 1
    first = out[0]
    assert first["mathml"].startswith("<math")
    assert first["graph"] and first["math_tokens"] and first["bow"]
    data = json.loads(coverage.read_text())
    assert data["inputs"] == len(records)
    assert data["stage_counts"]["tokens"] == len(out)
    assert data["equations_per_second"] > 0


def test_parse_report_groups_failures_by_stage_and_reason(tmp_path: Path) -> None:
    equations = tmp_path / "eq.jsonl"
    rows = [
        {"eq_id": "a#0", "doc_id": "a", "position": 0, "latex": r"\frac{1}{2}"},
        {"eq_id": "a#1", "doc_id": "a", "position": 1, "latex": r"\frac{1}{2"},
        {"eq_id": "a#2", "doc_id": "a", "position": 2, "latex": r"\begin{foo}x\end{foo}"},
        {"eq_id": "a#3", "doc_id": "a", "position": 3, "latex": r"\frac{1"},
    ]
    equations.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    coverage = tmp_path / "coverage.json"
    out = tmp_path / "parsed.jsonl"
    assert main(["parse", str(equations), "-o", str(out), "--report", str(coverage)]) == 0
    data = json.loads(coverage.read_text())
    assert data["failures"]["convert"]["unbalanced-braces"]["count"] == 2
    assert data["failures"]["convert"]["unknown-environment"]["count"] == 1
    assert data["failures"]["extract"]["bad-record"]["count"] == 1
    assert data["stage_counts"]["convert"] == 1
    failures = lines(tmp_path / "parsed.failures.jsonl")
    assert {f["eq_id"] for f in failures} >= {"a#1", "a#2", "a#3"}
    assert all(f["failure"] and f["stage"] and f["reason"] for f in failures)


def test_parse_of_a_missing_file_fails_with_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mathsearch.cli.main", "parse", str(tmp_path / "nope.jsonl")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_extract_records_binary_and_unterminated_sources_and_refuses_a_non_hepth_txt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each used to vanish: no equation and no failure record (a .txt read as hep-th)."""
    binary, open_env = tmp_path / "blob.tex", tmp_path / "open.tex"
    binary.write_bytes(bytes(range(256)) * 4)
    open_env.write_text("\\begin{equation} x^2\nand no end\n")
    out = tmp_path / "eq.jsonl"
    for path, reason in ((binary, "binary-source"), (open_env, "unterminated-environment")):
        assert main(["extract", str(path), "-o", str(out)]) == 1  # nothing extracted
        [failure] = lines(tmp_path / "eq.failures.jsonl")
        assert (failure["stage"], failure["reason"]) == ("extract", reason)
        assert reason in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("meeting notes\n")
    assert main(["extract", str(notes), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"mathsearch: error: {notes} is not a hep-th record file")
    assert "pass --format" in err


def test_bench_parse_reports_every_stage(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "parse", str(SAMPLE), "--format", "hepth", "--repeat", "1", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["equations"] > 150
    for stage in ("convert", "graph", "tokens", "canonical", "end_to_end"):
        assert result["stages"][stage]["equations_per_second"] > 0
    assert result["converted"] >= 0.97 * result["equations"]


def test_vocab_fit_writes_a_hashed_vocabulary(tmp_path: Path) -> None:
    target = tmp_path / "vocab.json"
    assert main(["vocab", "fit", str(SAMPLE), "--format", "hepth", "-o", str(target)]) == 0
    data = json.loads(target.read_text())
    assert data["tags"][0] == "#text"
    assert "mi" in data["tags"]
    assert len(data["characters"]) <= 191
