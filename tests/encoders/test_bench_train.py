"""mathsearch.encoders.bench_train and `mathsearch bench train gcn`: what is timed and reported
(real data).

Speeds are measured by the command, never asserted here: these tests check that the loop and
the network alone run on the same batches and that the report is complete.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mathsearch.cli.main import main
from mathsearch.core.machine import describe_cpu
from mathsearch.encoders.bench_train import (
    bench_train,
    format_bench_train,
    product_flops,
    product_rate,
)
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.gcn import GCNConfig
from mathsearch.encoders.train_config import TrainConfig
from mathsearch.encoders.train_state import TrainState, TripletBatches
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.vocabulary import default_vocabulary
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
    products = report["products"]
    assert products["passes"] == 2  # masking on its own pass (the default)
    assert products["gflop_per_step"] == pytest.approx(
        product_flops(products["nodes_per_step"], 16, 3, passes=2) / 1e9, abs=0.01
    )
    assert products["gflop_per_s"] > 0 and products["bound_items_per_s"] > 0
    assert products["network_over_bound"] == pytest.approx(  # rounded to 3 decimals
        report["network"]["items_per_s"] / products["bound_items_per_s"], rel=2e-2, abs=6e-4
    )
    assert report["cpu"]["summary"] == describe_cpu().summary() and report["gpu"] is None
    table = format_bench_train([report])
    assert "loop/net" in table and "16 x 3" in table and "bound/s" in table
    assert f"cpu: {describe_cpu().summary()}" in table


class _HiddenProducts(TorchDispatchMode):
    """Adds up the FLOPs of every dense ``mm`` that multiplies by, or yields, a
    (hidden, hidden) matrix: the graph convolutions' products, forward and backward."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden, self.flops = hidden, 0

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.mm.default and not args[0].is_sparse:
            a, b, h = args[0], args[1], self.hidden
            if tuple(b.shape) == (h, h) or tuple(out.shape) == (h, h):
                self.flops += 2 * a.shape[0] * a.shape[1] * b.shape[1]
        return out


@pytest.mark.parametrize("shared", [False, True])
def test_product_flops_counts_the_steps_hidden_products(shared: bool) -> None:
    # hidden 48, not the output's 64, so that the projection is not counted as a hidden layer
    corpus = EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))
    config = TrainConfig(
        batch_size=4, model=GCNConfig(hidden=48), threads=1, device="cpu",
        shared_masking_pass=shared, checkpoint_dir=None, progress=False,
    )  # fmt: skip
    state = TrainState(config, corpus, default_vocabulary(), 1000)
    prepared = state.prepare(TripletBatches(corpus, config, 1000)(0), 0)
    with _HiddenProducts(48) as counted:
        state.optimise(prepared)
    nodes = int(prepared.batch.pos.numel())
    expected = product_flops(nodes, 48, 3, passes=1 if shared else 2)
    assert counted.flops == pytest.approx(expected, rel=1e-9)
    assert product_flops(nodes, 48, 3, passes=2) == 2 * product_flops(nodes, 48, 3)


def test_product_rate_is_flops_over_the_median_time(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([0.0, 10.0, 10.5, 11.0, 11.25, 12.0, 13.0])  # untimed; 0.5, 0.25, 1.0 s

    class _Clock:
        @staticmethod
        def perf_counter() -> float:
            return next(ticks)

    monkeypatch.setattr("mathsearch.encoders.bench_train.time", _Clock)
    rate = product_rate(512, 64, torch.device("cpu"), repeat=3)
    assert rate == pytest.approx(2 * 512 * 64 * 64 / 0.5)


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
