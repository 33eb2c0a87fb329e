"""bench train seq2seq on real SemVec pairs: the three timings, padding shares, the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from mathsearch.cli.main import main
from mathsearch.encoders.bench_train_seq2seq import bench_train_seq2seq, format_bench_train_seq2seq
from mathsearch.encoders.seq2seq_data import (
    EncodedPairs,
    TokenVocabulary,
    batch_of_ids,
    make_batch,
    semvec_pairs,
)
from mathsearch.indexer.semvec_prefix import read_semvec_prefix

SEMVEC = Path(__file__).parents[1] / "resources" / "indexer" / "semvec"
SETS = [SEMVEC / "boolean5-validationset.json.gz", SEMVEC / "oneVarPoly10-validationset.json.gz"]


@pytest.fixture(scope="module")
def pairs() -> list:
    rng = random.Random(0)
    return [p for path in SETS for p in semvec_pairs(read_semvec_prefix(path), rng)]


def test_ids_encoded_once_give_the_per_step_batches(pairs: list) -> None:
    vocab = TokenVocabulary.build((s for p in pairs for s in p), 1)
    chunk = pairs[:40]
    table = EncodedPairs.build(chunk, vocab)  # what train seq2seq iterates
    old, new = make_batch(chunk, vocab), batch_of_ids(table.take(range(len(chunk))))
    for name in ("src", "lengths", "tgt_in", "tgt_out"):
        assert torch.equal(getattr(old, name), getattr(new, name)), name


def test_the_report_times_loop_network_and_legacy(pairs: list) -> None:
    report = bench_train_seq2seq(pairs, hidden=16, batch_size=8, steps=3, warmup=1, threads=1)
    for key in ("loop", "network", "legacy"):
        assert report[key]["items_per_s"] > 0 and report[key]["steps"] == 3
    assert report["loop_over_network"] > 0 and report["loop_over_legacy"] > 0
    # length buckets leave less padding than batches drawn at random
    assert 0 <= report["padding"] < report["padding_unbucketed"] < 1
    table = format_bench_train_seq2seq([report])
    assert table.splitlines()[1].split()[0] == "16"


def test_the_cli_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--hidden", "16", "--batch-size", "8", "--steps", "2", "--warmup", "1"]
    options += ["--threads", "1", "--pairs", "200", "--json"]
    code = main(["bench", "train", "seq2seq", *map(str, SETS), *options])
    assert code == 0
    reports = json.loads(capsys.readouterr().out)
    assert [r["hidden"] for r in reports] == [16] and reports[0]["pairs"] <= 200


def test_missing_sets_are_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "train", "seq2seq", str(tmp_path / "nope.json.gz")])
    assert code != 0
    assert "not found" in capsys.readouterr().err


def test_the_report_names_device_and_autocast(pairs: list) -> None:
    report = bench_train_seq2seq(
        pairs, hidden=16, batch_size=8, steps=2, warmup=1, threads=1, legacy=False, amp=True
    )
    assert report["device"] == "cpu" and report["amp"] is True
    assert report["network"]["items_per_s"] > 0 and "legacy" not in report
    assert "cpu bf16 autocast" in format_bench_train_seq2seq([report])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where there is no GPU")
def test_cuda_without_a_gpu_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "train", "seq2seq", *map(str, SETS), "--device", "cuda"])
    assert code != 0
    assert "CUDA is not available" in capsys.readouterr().err
