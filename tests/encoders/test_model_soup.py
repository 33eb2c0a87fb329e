"""mathsearch.encoders.model_soup: the uniform soup of fine-tuned runs (pure math, then real
runs on the bundled hep-th sample)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from mathsearch.cli.train import add_train, run_train
from mathsearch.encoders.checkpoints import CheckpointError, load_checkpoint, load_model
from mathsearch.encoders.gcn import GCNConfig
from mathsearch.encoders.model_soup import soup_checkpoints, soup_state
from mathsearch.encoders.training import TrainConfig, train
from tests.encoders.test_training import _small, _split


def test_soup_state_is_the_elementwise_mean_and_keeps_integer_buffers() -> None:
    a = {"w": torch.tensor([[0.0, 2.0]]), "n": torch.tensor(5)}
    b = {"w": torch.tensor([[1.0, 4.0]]), "n": torch.tensor(9)}
    c = {"w": torch.tensor([[2.0, 0.0]]), "n": torch.tensor(1)}
    soup = soup_state([a, b, c])
    assert torch.equal(soup["w"], torch.tensor([[1.0, 2.0]]))
    assert soup["w"].dtype == torch.float32
    assert int(soup["n"]) == 5
    assert torch.equal(a["w"], torch.tensor([[0.0, 2.0]]))  # inputs untouched
    assert torch.equal(soup_state([a])["w"], a["w"])


@pytest.mark.parametrize(
    "other",
    [
        {"v": torch.zeros(1, 2), "n": torch.tensor(1)},
        {"w": torch.zeros(2, 1), "n": torch.tensor(1)},
    ],
)
def test_soup_state_refuses_other_networks(other: dict[str, torch.Tensor]) -> None:
    with pytest.raises(CheckpointError, match="ingredient 2"):
        soup_state([{"w": torch.zeros(1, 2), "n": torch.tensor(1)}, other])
    with pytest.raises(CheckpointError):
        soup_state([])


def _config(**changes: object) -> TrainConfig:
    return _small(**{"steps_per_epoch": 3, "eval_triplets": 200, **changes})


def test_soup_of_two_fine_tuned_runs_is_their_mean_and_exports_like_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train_corpus, test_corpus = _split()
    base = train(_config(checkpoint_dir=str(tmp_path / "base")), train_corpus, test_corpus)
    runs = [
        train(
            _config(
                checkpoint_dir=str(tmp_path / f"ft{seed}"),
                seed=seed,
                init_from=str(base.checkpoint),
            ),
            train_corpus,
            test_corpus,
        )
        for seed in (1, 2)
    ]
    (tmp_path / "ft1" / "train.json").write_text(json.dumps({"train_seconds": 2.0}))
    (tmp_path / "ft2" / "train.json").write_text(json.dumps({"train_seconds": 3.0}))
    parser = argparse.ArgumentParser(prog="mathsearch")
    add_train(parser.add_subparsers(dest="command", required=True))
    argv = ["train", "soup", str(runs[0].checkpoint), str(runs[1].checkpoint)]
    assert run_train(parser.parse_args([*argv, "--out", str(tmp_path / "soup")])) == 0
    assert "soup of 2 checkpoints" in capsys.readouterr().out

    soup, meta = load_model(tmp_path / "soup" / "checkpoint.pt")
    first, _ = load_model(runs[0].checkpoint)
    second, _ = load_model(runs[1].checkpoint)
    for key, value in soup.state_dict().items():
        if value.is_floating_point():
            expected = (first.state_dict()[key] + second.state_dict()[key]) / 2
            assert torch.allclose(value, expected, atol=1e-6), key
    # the ingredients differ, so the soup is a third network
    weight = next(k for k, v in soup.state_dict().items() if v.is_floating_point() and v.ndim == 2)
    assert not torch.equal(first.state_dict()[weight], second.state_dict()[weight])
    assert meta["train_config"]["soup"] == [str(r.checkpoint.resolve()) for r in runs]
    report = json.loads((tmp_path / "soup" / "train.json").read_text())
    assert report["train_seconds"] == 5.0 and len(report["soup"]) == 2

    # no optimiser state: --init works, --resume is refused with a reason
    soup_ckpt = str(tmp_path / "soup" / "checkpoint.pt")
    tuned = train(_config(init_from=soup_ckpt), train_corpus, test_corpus)
    assert tuned.evaluations[0]["step"] == 0
    with pytest.raises(CheckpointError, match="--init"):
        train(_config(checkpoint_dir=str(tmp_path / "r")), train_corpus, resume=soup_ckpt)
    assert "optimizer" not in load_checkpoint(soup_ckpt)


def test_soup_refuses_runs_of_different_starts_networks_or_one_ingredient(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train_corpus, _ = _split()
    a = train(_config(checkpoint_dir=str(tmp_path / "a"), seed=0), train_corpus).checkpoint
    b = train(_config(checkpoint_dir=str(tmp_path / "b"), seed=1), train_corpus).checkpoint
    wide = train(
        _config(checkpoint_dir=str(tmp_path / "w"), model=GCNConfig(hidden=32)), train_corpus
    ).checkpoint
    with pytest.raises(CheckpointError, match="different starts"):
        soup_checkpoints([a, b], tmp_path / "s")
    assert soup_checkpoints([a, b], tmp_path / "s", allow_different_starts=True).is_file()
    with pytest.raises(CheckpointError, match="another network"):
        soup_checkpoints([a, wide], tmp_path / "s2", allow_different_starts=True)
    with pytest.raises(CheckpointError, match="two or more"):
        soup_checkpoints([a], tmp_path / "s3")
    with pytest.raises(CheckpointError, match="one of the inputs"):
        soup_checkpoints(
            [a, tmp_path / "s" / "checkpoint.pt"], tmp_path / "s", allow_different_starts=True
        )
    parser = argparse.ArgumentParser(prog="mathsearch")
    add_train(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["train", "soup", str(a), str(b), "--out", str(tmp_path / "x")])
    assert run_train(args) == 1
    assert capsys.readouterr().err.count("\n") == 1
