"""``mathsearch eval compare``: TREC runs against a baseline run, topic by topic (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mathsearch.cli.main import main
from mathsearch.evaluation.paired_test import paired_t_test

# four topics of two papers; each topic has one relevant document
QRELS = "A#1 0 a 1\nA#2 0 b 1\nB#1 0 c 1\nB#2 0 d 1\nC#1 0 e 1\n"  # no run asks C#1
RUNS = {
    # relevant first everywhere: P@1 = 1 on every topic
    "good": ["A#1 Q0 a 1 3 x", "A#2 Q0 b 1 3 x", "B#1 Q0 c 1 3 x", "B#2 Q0 d 1 3 x"],
    # relevant second on A#1 and B#1, missing on B#2
    "weak": ["A#1 Q0 z 1 3 x", "A#1 Q0 a 2 2 x", "A#2 Q0 b 1 3 x", "B#1 Q0 z 1 3 x",
             "B#1 Q0 c 2 2 x"],
}  # fmt: skip


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "qrels.txt").write_text(QRELS, encoding="utf-8")
    paths = {"qrels": str(tmp_path / "qrels.txt")}
    for name, lines in RUNS.items():
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths[name] = str(tmp_path / f"{name}.txt")
    return paths


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["eval", "compare", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_compare_reports_the_paired_test(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--qrels", files["qrels"], files["weak"], files["good"], "--metric", "P@1"]
    code, out, err = run_cli([*argv, "--json", "--group-separator", "#"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert report["baseline"] == files["weak"] and report["groups"] == 2
    assert report["qrels_topics_left_out"] == 1  # C#1: judged, but no run ranks it
    weak, good = report["runs"]
    assert weak["mean"] == pytest.approx(0.25) and "paired" not in weak
    assert weak["missing_topics"] == 1
    assert good["mean"] == pytest.approx(1.0)
    # differences by topic (A#1, A#2, B#1, B#2): 1, 0, 1, 1
    expected = paired_t_test([1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    assert good["paired"]["mean_difference"] == pytest.approx(0.75)
    assert good["paired"]["p_value"] == pytest.approx(expected.p_value)
    assert good["paired"]["ci_low"] == pytest.approx(expected.ci_low)
    assert (good["paired"]["wins"], good["paired"]["losses"]) == (3, 0)
    # by paper: A 0.5, B 1.0
    by_paper = paired_t_test([0.5, 1.0], [0.0, 0.0])
    assert good["paired"]["by_group"]["n"] == 2
    assert good["paired"]["by_group"]["ci_high"] == pytest.approx(by_paper.ci_high)

    code, out, _ = run_cli(argv, capsys)
    assert code == 0
    assert "| difference | 95% interval | p | wins / losses |" in out
    assert "+0.7500" in out and "3 / 0" in out and "baseline" in out
    assert "1 judged topics no run ranks left out" in out

    # --all-topics keeps C#1: both runs score 0 there
    code, out, _ = run_cli([*argv, "--json", "--all-topics"], capsys)
    weak, good = json.loads(out)["runs"]
    assert weak["topics"] == 5 and weak["mean"] == pytest.approx(0.2)
    assert good["paired"]["mean_difference"] == pytest.approx(0.6)


def test_baseline_flag_picks_the_run_compared_with(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--qrels", files["qrels"], files["weak"], "--baseline", files["good"], "--json"]
    code, out, err = run_cli([*argv, "--metric", "P@1"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert [row["run"] for row in report["runs"]] == [files["good"], files["weak"]]
    assert report["runs"][1]["paired"]["mean_difference"] == pytest.approx(-0.75)


def test_errors_are_one_line(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["--qrels", files["qrels"], files["good"]], capsys)
    assert code == 1 and "at least two runs" in err
    bad = tmp_path / "bad.txt"
    bad.write_text("A#1 Q0 a 1\n", encoding="utf-8")
    code, _, err = run_cli(["--qrels", files["qrels"], files["good"], str(bad)], capsys)
    assert code == 1 and "bad.txt:1" in err and len(err.strip().splitlines()) == 1
    missing = str(tmp_path / "none.txt")
    code, _, err = run_cli(["--qrels", files["qrels"], files["good"], missing], capsys)
    assert code == 1 and "cannot read" in err
    code, _, err = run_cli(
        ["--qrels", files["qrels"], files["good"], files["weak"], "--metric", "nonsense@"], capsys
    )
    assert code == 1 and "unknown measure" in err
    other = tmp_path / "other.txt"
    other.write_text("Z#1 Q0 a 1 1 x\n", encoding="utf-8")
    code, _, err = run_cli(["--qrels", files["qrels"], str(other), str(other)], capsys)
    assert code == 1 and "no run ranks a topic" in err
