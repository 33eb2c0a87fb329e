"""Training ExpEmb on small real data through `mathsearch train seq2seq`, then the eval CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mathsearch.cli.main import main
from mathsearch.encoders.seq2seq import ExpEmb
from mathsearch.encoders.seq2seq_eval import checkpoint_embedder, semvec_score_k
from mathsearch.encoders.seq2seq_training import RunConfig, collect_pairs, load_expemb
from mathsearch.indexer.semvec_prefix import read_semvec_prefix

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
EGEN = RESOURCES / "encoders" / "egen-clusters.txt"
SEMVEC = RESOURCES / "indexer" / "semvec" / "oneVarPoly10-validationset.json.gz"
BOOLEAN5 = RESOURCES / "encoders" / "boolean5-trainset.json.gz"  # 79 classes, 712 expressions


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("s2s")
    code = main(
        [
            "train", "seq2seq", str(EGEN), "--out", str(out), "--hidden", "32",
            "--lr", "3e-3", "--batch-size", "16", "--max-len", "40", "--max-steps", "150",
            "--held-out", "0.8", "--semvec", str(BOOLEAN5), "--min-count", "1",
            "--no-progress", "--json",
        ]
    )  # fmt: skip
    assert code == 0
    return out


def test_loss_falls_and_the_embedding_beats_an_untrained_model(run_dir: Path) -> None:
    report = json.loads((run_dir / "train.json").read_text())
    assert report["steps"] == 150 and report["counts"]["semvec_pairs"] > 0
    assert report["last_loss"] < 0.8 * report["first_loss"]
    torch.set_num_threads(1)
    model, vocab, data = load_expemb(run_dir / "checkpoint.pt")
    assert data["family"] == "seq2seq" and vocab.hash == data["vocab_hash"]
    classes = read_semvec_prefix(BOOLEAN5)  # classes seen in training: pairs pull them together
    trained = semvec_score_k(checkpoint_embedder(model, vocab), classes)["score"]
    torch.manual_seed(0)
    untrained = semvec_score_k(checkpoint_embedder(ExpEmb(model.config).eval(), vocab), classes)
    assert trained > 1.3 * untrained["score"]  # measured: 0.23 vs 0.12-0.13


def test_eval_cli(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = str(run_dir / "checkpoint.pt")
    assert main(["eval", "score-k", "--checkpoint", checkpoint, str(SEMVEC), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sets"][0]["set"] == "oneVarPoly10" and report["sets"][0]["eqnet_test"] == 81.3
    torch.set_num_threads(1)
    model, vocab, _ = load_expemb(run_dir / "checkpoint.pt")
    exact = semvec_score_k(checkpoint_embedder(model, vocab), read_semvec_prefix(SEMVEC))["score"]
    assert report["sets"][0]["model"] == round(100 * exact, 2)  # two decimals, not one
    args = ["eval", "generation", "--checkpoint", checkpoint, "--limit", "2", "--beam-sizes", "1,3"]
    assert main([*args, "--json", "--no-progress"]) == 0
    generation = json.loads(capsys.readouterr().out)
    assert set(generation["beams"]) == {"1", "3"} and generation["sources"] == 2
    assert main(["eval", "score-k", "--checkpoint", str(run_dir / "missing.pt")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_export_cli_routes_seq2seq_checkpoints(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.onnx"
    args = ["export", str(run_dir / "checkpoint.pt"), "-o", str(out), "--parity-data", str(EGEN)]
    assert main([*args, str(SEMVEC), "--parity-equations", "60", "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["family"] == "seq2seq" and card["parity"]["passed"]
    assert card["parity"]["sequences"] == 60 and out.with_suffix(".vocab.json").is_file()


def test_autoencoder_mode_pairs_each_expression_with_itself(tmp_path: Path) -> None:
    run = RunConfig(egen=[str(EGEN)], out=str(tmp_path), mode="autoencoder", held_out=0.2)
    run.semvec = [str(BOOLEAN5)]
    pairs, counts = collect_pairs(run, tmp_path)
    assert pairs and all(a == b for a, b in pairs)
    assert counts["semvec_pairs"] == 712 and (tmp_path / "heldout-egen.txt").is_file()


def test_appendix_c_pairs_reproduce_the_seeds_table_8() -> None:
    """Every pair within a class (<= 100k unordered), both directions: BOOL5 has 17,934."""
    import itertools
    import random

    from mathsearch.encoders.seq2seq_data import _unrank_pair, all_class_pairs, semvec_pairs

    pairs = semvec_pairs(read_semvec_prefix(BOOLEAN5), random.Random(0), all_pairs=True)
    assert len(pairs) == 17_934
    for n in (2, 5, 31):
        ranks = [_unrank_pair(r, n) for r in range(n * (n - 1) // 2)]
        assert ranks == list(itertools.combinations(range(n), 2))
    members = [(str(i),) for i in range(20)]  # 190 unordered pairs, capped at 50
    capped = all_class_pairs([members], random.Random(0), cap=50)
    assert len(capped) == 100 and len(set(capped)) == 100
    assert {(b, a) for a, b in capped} == set(capped)


SHARED_SEMVEC = Path(__file__).resolve().parents[3] / "shared" / "data" / "semvec"


@pytest.mark.skipif(
    not (SHARED_SEMVEC / "poly5-trainset.json.gz").is_file(), reason="needs ../shared/data"
)
def test_one_set_by_name_trains_at_the_seed_protocol(tmp_path: Path) -> None:
    out = tmp_path / "poly5"
    args = ["--semvec", "poly5", "--hidden", "16", "--epochs", "3", "--out", str(out)]
    code = main(["train", "seq2seq", *args, "--no-progress", "--json"])
    assert code == 0
    summary = json.loads((out / "train.json").read_text())
    assert summary["counts"]["semvec_pairs"] == 1350  # the seed's Table 8, POLY5
    assert summary["counts"]["egen_pairs"] == 0
    assert summary["run"]["batch_size"] == 32  # Table 13: POLY5 trains with batch 32
    scores = summary["validation"]["epochs"]
    assert [round(row["epoch"]) for row in scores] == [1, 2, 3]
    best = summary["validation"]["best"]
    assert best["score_5"] == max(row["score_5"] for row in scores)
    # checkpoint.pt is the best epoch's, last.pt the last
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == best["step"]
    assert (out / "last.pt").is_file()


def test_a_joint_run_validates_every_n_steps_and_keeps_the_best(tmp_path: Path) -> None:
    out = tmp_path / "joint"
    args = [str(EGEN), "--semvec", str(BOOLEAN5), "--hidden", "16", "--epochs", "2"]
    args += ["--max-len", "64", "--validation", str(SEMVEC), "--validate-every", "7"]
    args += ["--validation-classes", "5", "--out", str(out)]
    assert main(["train", "seq2seq", *args, "--no-progress", "--json"]) == 0
    summary = json.loads((out / "train.json").read_text())
    steps = [row["step"] for row in summary["validation"]["epochs"]]
    per_epoch = -(-summary["counts"]["pairs"] // 64)
    assert steps == sorted(set(steps)) and 7 in steps and per_epoch in steps
    assert all(step % 7 == 0 or step % per_epoch == 0 for step in steps)
    best = summary["validation"]["best"]
    assert best["score_5"] == max(row["score_5"] for row in summary["validation"]["epochs"])
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == best["step"]


def test_one_sets_train_file_without_egen_warns_that_it_is_joint_training(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mathsearch.cli.train_seq2seq import lone_set_file

    assert lone_set_file(["a/poly5-trainset.json.gz"]) == "poly5"
    assert lone_set_file(["poly5-trainset.json.gz", "poly8-trainset.json.gz"]) is None
    assert lone_set_file(["a/poly5-validationset.json.gz"]) is None
    assert lone_set_file(["a/mine-trainset.json.gz"]) is None
    # --held-out 2 stops the run right after the protocol is chosen
    args = ["train", "seq2seq", "--semvec", str(BOOLEAN5), "--held-out", "2"]
    with caplog.at_level("WARNING", logger="mathsearch.cli.train_seq2seq"):
        assert main([*args, "--out", str(tmp_path / "x")]) != 0
    assert "--semvec boolean5" in caplog.text and "joint training" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="mathsearch.cli.train_seq2seq"):
        main([*args, str(EGEN), "--out", str(tmp_path / "y")])  # E-Gen named: joint is meant
    assert "joint training" not in caplog.text


def test_a_set_name_with_egen_files_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "seq2seq", str(EGEN), "--semvec", "poly5", "--out", "x"])
    assert code != 0
    assert "trained alone" in capsys.readouterr().err


def test_bf16_autocast_training_still_learns(tmp_path: Path) -> None:
    """`--amp`: the forward pass under bf16 autocast (CPU here, CUDA on a GPU) still trains."""
    out = tmp_path / "amp"
    args = ["train", "seq2seq", str(EGEN), "--out", str(out), "--hidden", "32", "--lr", "3e-3"]
    args += ["--batch-size", "16", "--max-len", "40", "--max-steps", "120", "--held-out", "0.8"]
    args += ["--semvec", str(BOOLEAN5), "--min-count", "1", "--amp", "--device", "cpu"]
    assert main([*args, "--no-progress", "--json"]) == 0
    report = json.loads((out / "train.json").read_text())
    assert report["amp"] is True and report["device"] == "cpu"
    assert report["last_loss"] < 0.8 * report["first_loss"]
    # the checkpoint holds float32 CPU tensors whatever the device and autocast
    state = torch.load(out / "checkpoint.pt", weights_only=True)["model"]
    assert all(t.device.type == "cpu" and t.dtype == torch.float32 for t in state.values())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where there is no GPU")
def test_cuda_asked_for_without_a_gpu_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["train", "seq2seq", str(EGEN), "--out", str(tmp_path / "x"), "--hidden", "16"]
    assert main([*args, "--device", "cuda", "--max-steps", "2", "--no-progress"]) != 0
    assert "CUDA is not available" in capsys.readouterr().err


def test_lr_factor_constant_and_linear_by_steps_or_time() -> None:
    from mathsearch.encoders.seq2seq_training import lr_factor

    assert lr_factor("constant", 90, 100, elapsed=99.0, budget=100.0) == 1.0
    assert [lr_factor("linear", s, 4) for s in range(6)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    # a time budget spent faster than the steps decides (a run cut by --time-budget ends at 0)
    assert lr_factor("linear", 10, 100, elapsed=45.0, budget=60.0) == 0.25
    assert lr_factor("linear", 80, 100, elapsed=6.0, budget=60.0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="cosine"):
        lr_factor("cosine", 0, 1)


def test_linear_schedule_decays_and_init_warm_starts(run_dir: Path, tmp_path: Path) -> None:
    base = ["train", "seq2seq", str(EGEN), "--hidden", "32", "--lr", "3e-3", "--batch-size", "16"]
    base += ["--max-len", "40", "--max-steps", "100", "--held-out", "0.8", "--semvec"]
    base += [str(BOOLEAN5), "--min-count", "1", "--no-progress", "--json"]
    init = ["--init", str(run_dir / "checkpoint.pt"), "--lr-schedule", "linear"]
    assert main([*base, *init, "--out", str(tmp_path / "warm")]) == 0
    assert main([*base, "--out", str(tmp_path / "cold")]) == 0
    warm = json.loads((tmp_path / "warm" / "train.json").read_text())
    cold = json.loads((tmp_path / "cold" / "train.json").read_text())
    rates = [row["lr"] for row in warm["history"]["losses"]]
    assert rates == sorted(rates, reverse=True) and rates[-1] < 0.05 * 3e-3 < rates[0]
    assert {row["lr"] for row in cold["history"]["losses"]} == {3e-3}
    # the warm start begins where run_dir's 150 steps ended, far below a fresh model's loss
    assert warm["first_loss"] < 0.8 * cold["first_loss"]
    assert warm["vocab_hash"] == json.loads((run_dir / "train.json").read_text())["vocab_hash"]


def test_init_with_another_shape_is_a_clear_error(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["train", "seq2seq", str(EGEN), "--out", str(tmp_path / "x"), "--hidden", "16"]
    args += ["--init", str(run_dir / "checkpoint.pt"), "--max-steps", "2", "--no-progress"]
    assert main(args) != 0
    assert "hidden=16" in capsys.readouterr().err


def test_training_pairs_leave_out_eval_class_splits_unseen_classes(tmp_path: Path) -> None:
    from mathsearch.indexer.semvec_class_split import write_class_split

    unseen_file, _ = write_class_split([BOOLEAN5], tmp_path / "splits")
    unseen = read_semvec_prefix(unseen_file)
    run = RunConfig(out=str(tmp_path), semvec=[str(BOOLEAN5)], held_out=0.0)
    run.semvec_exclude, run.semvec_per_class = [str(unseen_file)], 1000
    pairs, counts = collect_pairs(run, tmp_path)
    members = {m for c in unseen for m in c.members}
    seen_members = {m for c in read_semvec_prefix(BOOLEAN5) for m in c.members} - members
    assert counts["semvec_pairs"] > 0 and counts["egen_pairs"] == 0
    assert not {s for pair in pairs for s in pair} & members
    assert {s for pair in pairs for s in pair} <= seen_members
