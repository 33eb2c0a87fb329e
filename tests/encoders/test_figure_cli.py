"""`mathsearch train figure` and `mathsearch eval figure` on the real fixture documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mathsearch.cli.main import main

FIGURES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "figures"


def test_train_then_eval_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    args = ["train", "figure", str(FIGURES), "--out", str(out), "--epochs", "2"]
    args += ["--min-words", "1", "--image-size", "24", "--val-fraction", "0.2"]
    args += ["--test-fraction", "0.2", "--batch-size", "8", "--no-progress", "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (out / "checkpoint.pt").is_file() and (out / "vocabulary.json").is_file()
    assert summary["corpus"]["articles"] == 5 and summary["corpus"]["citing_article_pairs"] == 1
    assert set(summary["metrics"]["similarity"]) >= {"tfidf", "untrained", "lstm+cnn"}
    assert set(summary["history"]["losses"]) == {"text", "image", "fusion"}
    # the seed's paired t-test of each re-ranking against tf-idf over the same test targets
    paired = summary["metrics"]["paired"]["tfidf+lstm+cnn"]["p@5"]
    targets = summary["metrics"]["recommendation"]["tfidf"]["targets"]
    assert paired["n"] == targets
    assert paired["ci_low"] <= paired["mean_difference"] <= paired["ci_high"]
    assert "per_target" not in summary["metrics"]["recommendation"]["tfidf"]
    code = main(
        [
            "eval",
            "figure",
            str(FIGURES),
            "--checkpoint",
            str(out / "checkpoint.pt"),
            "--min-words",
            "1",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["corpus"]["figures"] == summary["corpus"]["figures"]
    assert "model" in report["metrics"]["similarity"]


def test_bad_input_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "figure", str(tmp_path), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mathsearch: error:") and err.count("\n") == 1
    assert main(["eval", "figure", str(FIGURES), "--onnx", str(tmp_path / "none.onnx")]) == 1
