"""mathsearch.encoders.bench_train and `mathsearch bench train gcn`: what is timed and reported
(real data).

Speeds are measured by the command, never asserted here: these tests check that the loop and
the network alone run on the same batches and that the report is complete.
"""

from __future__ import annotations

import json

import pytest

from mathsearch.cli.main import main
from mathsearch.encoders.bench_train import bench_train, format_bench_train
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.gcn import GCNConfig
from mathsearch.encoders.train_config import TrainConfig
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from tests.encoders.test_training import SAMPLE


def test_report_has_loop_network_and_legacy() -> None:
    corpus = EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))
    config = TrainConfig(batch_size=4, model=GCNConfig(hidden=16), threads=1, device="cpu")
    report = bench_train(corpus, config, steps=2, warmup=1, legacy=True)
    assert (report["hidden"], report["layers"], report["graphs_per_step"]) == (16, 3, 12)
    for part in ("loop", "network", "legacy"):
        assert report[part]["items_per_s"] > 0 and report[part]["steps"] >= 2
    assert report["loop"]["median_prepare_s"] > 0
    assert report["loop_over_network"] == pytest.approx(
        report["loop"]["items_per_s"] / report["network"]["items_per_s"], rel=1e-2
    )
    assert report["threads"] == 1
    table = format_bench_train([report])
    assert "loop/net" in table and "16 x 3" in table


def test_cli_json_for_two_widths_and_infonce(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["bench", "train", "gcn", str(SAMPLE), "--format", "hepth", "--hidden", "16,8",
         "--layers", "2", "--loss", "infonce", "--batch-size", "4", "--steps", "2", "--json"]
    )  # fmt: skip
    assert code == 0
    reports = json.loads(capsys.readouterr().out)
    assert [(r["hidden"], r["layers"], r["loss"]) for r in reports] == [
        (16, 2, "infonce"),
        (8, 2, "infonce"),
    ]
    assert all(r["graphs_per_step"] == 8 for r in reports)  # pairs: 2 graphs per item


def test_cli_amp_runs_bf16_on_the_cpu_with_masking(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["bench", "train", "gcn", str(SAMPLE), "--format", "hepth", "--hidden", "16",
         "--layers", "3", "--batch-size", "4", "--steps", "2", "--amp", "--json"]
    )  # fmt: skip
    assert code == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["amp"] is True and report["device"] == "cpu" and report["masking"] is True
    assert report["loop"]["items_per_s"] > 0 and report["network"]["items_per_s"] > 0


def test_cli_refuses_a_bad_width_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "train", "gcn", "--hidden", "0,x"])
    assert "comma-separated" in capsys.readouterr().err
