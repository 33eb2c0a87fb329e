"""`bench train bitmap`: the loop and the network alone on the same rendered crops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mathsearch.cli.main import main
from mathsearch.encoders.bench_train_bitmap import bench_train_bitmap, format_bench_train_bitmap
from mathsearch.encoders.bitmap_data import BitmapCorpus
from mathsearch.encoders.bitmap_training import BitmapTrainConfig

SLICE = Path(__file__).resolve().parents[1] / "resources" / "export" / "hepth2003-every12th.txt"


@pytest.fixture(scope="module")
def corpus() -> BitmapCorpus:
    return BitmapCorpus.from_sources([str(SLICE)], "hepth", 60)


@pytest.mark.parametrize(("task", "loss", "per_anchor"),
                         [("context", "triplet", 3), ("context", "info-nce", 2),
                          ("teacher", "info-nce", 1)])  # fmt: skip
def test_reports_both_rates_per_crop(corpus: BitmapCorpus, task: str, loss: str,
                                     per_anchor: int) -> None:  # fmt: skip
    config = BitmapTrainConfig(task=task, loss=loss, batch_size=8, threads=1, augment=True)
    report = bench_train_bitmap(config, corpus, steps=2, warmup=1)
    assert report["crops_per_step"] == 8 * per_anchor and report["augment"]
    for side in ("loop", "network"):
        rates = report[side]
        assert rates["steps"] == 2
        assert rates["crops_per_s"] == pytest.approx(rates["anchors_per_s"] * per_anchor, rel=0.01)
    assert report["loop_over_network"] > 0
    assert task in format_bench_train_bitmap([report])


def test_cli(tmp_path: Path, capsys) -> None:
    code = main(["bench", "train", "bitmap", str(SLICE), "--format", "hepth", "--limit", "40",
                 "--net", "small", "--runs", "context/siamese", "--batch-size", "4", "--steps",
                 "1", "--warmup", "0", "--cache-dir", str(tmp_path), "--json"])  # fmt: skip
    assert code == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert (report["net"], report["task"], report["loss"]) == ("small", "context", "siamese")
    assert list(tmp_path.glob("bitmaps-*.npz"))  # rendered once, kept
    assert main(["bench", "train", "bitmap", "--net", "huge"]) == 1
    assert "--net" in capsys.readouterr().err
