"""mathsearch.encoders.training: the KDD 2020 training loop on real hep-th equations (CPU, small
model)."""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mathsearch.cli.train import add_train, run_train
from mathsearch.encoders.checkpoints import (
    CheckpointError,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.gcn import GCNConfig, GraphCNN
from mathsearch.encoders.graph_data import collate
from mathsearch.encoders.sampler import holdout_triplets
from mathsearch.encoders.training import TrainConfig, TrainingError, evaluate_ranking, train
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.vocabulary import default_vocabulary

SAMPLE = Path(__file__).resolve().parents[2] / "indexer" / "resources" / "hepth2003-sample.txt"


@lru_cache(maxsize=1)
def _split() -> tuple[EquationCorpus, EquationCorpus]:
    """The bundled hep-th sample (206 equations, 8 papers): 6 papers train, 2 test."""
    corpus = EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))
    return corpus.split_by_paper(test_fraction=0.25, seed=0)


def _small(**changes: object) -> TrainConfig:
    """A CPU-sized config: narrow model, small batches, no checkpoints unless asked."""
    base = TrainConfig(
        epochs=1,
        steps_per_epoch=4,
        batch_size=4,
        lr=3e-3,
        model=GCNConfig(hidden=16),
        checkpoint_every=None,
        eval_triplets=500,
        progress=False,
        device="cpu",
    )
    return replace(base, **changes)


def test_defaults_are_the_seeds() -> None:
    config = TrainConfig()
    assert (config.epochs, config.batch_size, config.lr) == (20, 128, 1e-4)
    assert (config.loss, config.histogram_bins, config.margin) == ("histogram", 64, 1.0)
    assert config.use_masking and config.use_augmentation
    assert (config.mask_rate, config.masking_weight, config.mean_swaps) == (0.15, 1.0, 32.0)
    assert config.model == GCNConfig()
    assert (config.model.hidden, config.model.out_dim, config.model.layers) == (512, 64, 3)
    assert TrainConfig.from_dict(config.to_dict()) == config
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert config.resolve_device().type == expected


@pytest.mark.parametrize(
    "changes",
    [{"loss": "cosine"}, {"batch_size": 0}, {"lr": 0.0}, {"mask_rate": 1.5}, {"eval_every": 0}],
)
def test_bad_configs_raise_training_error(changes: dict[str, object]) -> None:
    with pytest.raises(TrainingError):
        TrainConfig(**changes)  # type: ignore[arg-type]


def test_learning_rate_decreases_linearly_to_zero() -> None:
    train_corpus, _ = _split()
    result = train(_small(lr=1e-3), train_corpus)
    assert [round(x["lr"], 12) for x in result.losses] == [1e-3, 7.5e-4, 5e-4, 2.5e-4]
    assert result.step == result.total_steps == 4
    assert result.checkpoint is None


def test_loss_falls_and_holdout_ranking_beats_the_untrained_model() -> None:
    train_corpus, test_corpus = _split()
    config = _small(steps_per_epoch=100, batch_size=16, model=GCNConfig(hidden=32), seed=0)
    result = train(config, train_corpus, test_corpus)
    losses = np.array([x["loss"] for x in result.losses])
    similarity = np.array([x["similarity"] for x in result.losses])
    masking = np.array([x["masking"] for x in result.losses])
    k = 20
    assert losses[-k:].mean() < 0.8 * losses[:k].mean()
    assert similarity[-k:].mean() < similarity[:k].mean()
    assert masking[-k:].mean() < masking[:k].mean()
    assert np.allclose(losses, similarity + masking, atol=1e-5)
    # the step-0 evaluation is the untrained model of the same seed
    torch.manual_seed(config.seed)
    untrained = GraphCNN(config.model)
    triplets = holdout_triplets(test_corpus, config.eval_triplets, [config.seed, 5])
    before = evaluate_ranking(untrained, test_corpus, triplets)
    first, last = result.evaluations[0], result.evaluations[-1]
    assert (first["step"], last["step"]) == (0, 100)
    assert first["ranking_score"] == pytest.approx(before)
    assert last["ranking_score"] == pytest.approx(
        evaluate_ranking(result.model, test_corpus, triplets)
    )
    assert last["ranking_score"] > before + 0.1
    assert last["bound_95"] > 0
    assert result.triplets_per_second > 0


def test_infonce_loss_falls_and_l2_model_beats_the_untrained_one() -> None:
    train_corpus, test_corpus = _split()
    model = GCNConfig(hidden=32, normalisation="l2")
    config = _small(
        loss="infonce", steps_per_epoch=80, batch_size=16, model=model, shared_masking_pass=True
    )
    result = train(config, train_corpus, test_corpus)
    similarity = np.array([x["similarity"] for x in result.losses])
    assert similarity[-20:].mean() < 0.8 * similarity[:10].mean()
    first, last = result.evaluations[0], result.evaluations[-1]
    assert last["ranking_score"] > first["ranking_score"] + 0.05
    with torch.no_grad():  # unit vectors
        norms = result.model(collate(test_corpus.graphs[:20])).norm(dim=1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)


def test_bf16_autocast_on_the_cpu_trains_a_gated_model() -> None:
    """``train gcn --amp --pooling gated`` on a CPU: the loss falls, the ranking beats the start."""
    train_corpus, test_corpus = _split()
    model = GCNConfig(hidden=32, normalisation="l2", pooling="gated")
    config = _small(
        loss="infonce", steps_per_epoch=80, batch_size=16, model=model, use_masking=False, amp=True
    )
    result = train(config, train_corpus, test_corpus)
    similarity = np.array([x["similarity"] for x in result.losses])
    assert similarity[-20:].mean() < 0.8 * similarity[:10].mean()
    first, last = result.evaluations[0], result.evaluations[-1]
    assert last["ranking_score"] > first["ranking_score"] + 0.05
    assert result.model.gate is not None
    assert result.model.gate.weight.abs().sum() > 0  # the gate moved from its zero start


def test_hard_batches_draw_each_steps_anchors_from_few_notation_groups() -> None:
    from mathsearch.encoders.train_state import TripletBatches

    train_corpus, test_corpus = _split()
    config = _small(
        loss="infonce", use_masking=False, hard_batches=1, notation_groups=3, batch_size=16
    )
    batches = TripletBatches(train_corpus, config, 4)
    groups = batches.group_papers
    assert sorted(int(p) for g in groups for p in g) == list(range(train_corpus.num_papers))
    for step in range(6):
        papers = set(train_corpus.eq_paper[batches(step).anchors].tolist())
        assert any(papers <= set(g.tolist()) for g in groups)  # one group per step
    model = GCNConfig(hidden=32, normalisation="l2")
    result = train(replace(config, steps_per_epoch=60, model=model), train_corpus, test_corpus)
    similarity = np.array([x["similarity"] for x in result.losses])
    assert np.isfinite(similarity).all()
    first, last = result.evaluations[0], result.evaluations[-1]
    assert last["ranking_score"] > first["ranking_score"]
    with pytest.raises(TrainingError, match="hard_batches"):
        _small(hard_batches=-1)


def _assert_learns(result: Any) -> None:
    """A short run's similarity loss falls and its hold-out ranking score rises."""
    similarity = np.array([x["similarity"] for x in result.losses])
    assert np.isfinite(similarity).all()
    assert similarity[-10:].mean() < similarity[:5].mean()
    first, last = result.evaluations[0], result.evaluations[-1]
    assert last["ranking_score"] > first["ranking_score"]


def test_bm25_negatives_give_each_anchor_one_of_its_mined_matches_and_train() -> None:
    """``--bm25-negatives K``: one extra negative per anchor among its K best BM25 matches of
    other papers, scored beside the in-batch ones."""
    from mathsearch.encoders.train_state import TrainState, TripletBatches

    train_corpus, test_corpus = _split()
    config = _small(loss="infonce", use_masking=False, bm25_negatives=3, batch_size=16)
    batches = TripletBatches(train_corpus, config, 4)
    assert batches.lexical is not None and batches.lexical.shape[1] == 3
    for step in range(4):
        triplets = batches(step)
        for anchor, negative in zip(triplets.anchors, triplets.negatives, strict=True):
            assert negative in batches.lexical[anchor]
            assert train_corpus.eq_paper[negative] != train_corpus.eq_paper[anchor]
    state = TrainState(config, train_corpus, default_vocabulary(), 4)
    prepared = state.prepare(batches(0), 0)
    assert prepared.batch.num_graphs == 3 * 16  # anchors, positives, negatives
    assert prepared.ignore is not None and tuple(prepared.ignore.shape) == (16, 32)
    model = GCNConfig(hidden=32, normalisation="l2")
    result = train(replace(config, steps_per_epoch=60, model=model), train_corpus, test_corpus)
    _assert_learns(result)
    with pytest.raises(TrainingError, match="bm25_negatives must be"):
        _small(loss="infonce", bm25_negatives=-1)
    with pytest.raises(TrainingError, match="needs the infonce loss"):
        _small(loss="triplet", bm25_negatives=3)


def test_bm25_prior_adds_the_batchs_normalised_bm25_to_the_scores_and_trains() -> None:
    """``--bm25-prior W``: each step's (B, B) prior is W times the row-min-maxed BM25 of the
    anchors (crops included) against the positives, and the run still learns."""
    from mathsearch.encoders.lexical_prior import row_min_max
    from mathsearch.encoders.subformula_crop import packed_with_crops
    from mathsearch.encoders.train_state import TrainState, TripletBatches

    train_corpus, test_corpus = _split()
    model = GCNConfig(hidden=32, normalisation="l2")
    config = _small(loss="infonce", use_masking=False, batch_size=16, bm25_prior=0.4, model=model)
    state = TrainState(config, train_corpus, default_vocabulary(), 4)
    assert state.lexical_prior is not None
    triplets = TripletBatches(train_corpus, config, 4, state.packed)(0)
    prepared = state.prepare(triplets, 0)
    assert prepared.prior is not None and tuple(prepared.prior.shape) == (16, 16)
    order = np.concatenate([triplets.anchors, triplets.positives])
    beta = row_min_max(state.lexical_prior.scores(packed_with_crops(state.packed, order, {}), 16))
    np.testing.assert_allclose(prepared.prior.numpy(), 0.4 * beta, rtol=1e-6)
    assert prepared.prior.max().item() == pytest.approx(0.4)
    # an anchor shares more notation with its own positive than with the batch's other pairs
    diagonal = np.diag(beta)
    assert diagonal.mean() > beta[~np.eye(16, dtype=bool)].mean()
    cropped = replace(config, crop_rate=0.5)  # crops are scored as the graphs the network sees
    run = TrainState(cropped, train_corpus, default_vocabulary(), 4)
    with_crops = run.prepare(triplets, 0).prior.numpy()
    assert with_crops.shape == (16, 16)
    changed = ~np.isclose(with_crops, 0.4 * beta, atol=1e-6).all(axis=1)
    assert 0 < changed.sum() < 16  # the cropped anchors' rows, not the others
    result = train(replace(config, steps_per_epoch=60), train_corpus, test_corpus)
    _assert_learns(result)
    with pytest.raises(TrainingError, match="bm25_prior must be"):
        _small(loss="infonce", bm25_prior=-0.1)
    with pytest.raises(TrainingError, match="bm25_prior needs"):
        _small(loss="histogram", bm25_prior=0.3)


def test_same_paper_positives_turn_the_ignored_pairs_into_positives_and_train() -> None:
    """``--pairs-per-paper K --same-paper-positives``: K pairs a paper, and the other pairs of
    an anchor's paper are positives of its softmax instead of being left out."""
    from mathsearch.encoders.train_state import TrainState, TripletBatches

    train_corpus, test_corpus = _split()
    model = GCNConfig(hidden=32, normalisation="l2")
    config = _small(loss="infonce", use_masking=False, batch_size=16, model=model)
    grouped = replace(config, pairs_per_paper=4, same_paper_positives=True)
    state = TrainState(grouped, train_corpus, default_vocabulary(), 4)
    triplets = TripletBatches(train_corpus, grouped, 4, state.packed)(0)
    papers = train_corpus.eq_paper[triplets.anchors]
    assert (papers.reshape(4, 4) == papers[::4, None]).all()
    prepared = state.prepare(triplets, 0)
    assert prepared.ignore is None and prepared.positives is not None
    same = papers[:, None] == papers[None, :]
    np.testing.assert_array_equal(prepared.positives.numpy(), same & ~np.eye(16, dtype=bool))
    ignored = TrainState(replace(config, pairs_per_paper=4), train_corpus, default_vocabulary(), 4)
    as_ignored = ignored.prepare(triplets, 0)
    assert as_ignored.positives is None
    np.testing.assert_array_equal(as_ignored.ignore.numpy(), prepared.positives.numpy())
    result = train(replace(grouped, steps_per_epoch=60), train_corpus, test_corpus)
    _assert_learns(result)
    with pytest.raises(TrainingError, match="pairs_per_paper must be"):
        _small(pairs_per_paper=0)
    with pytest.raises(TrainingError, match="same_paper_positives needs"):
        _small(loss="triplet", same_paper_positives=True)
    with pytest.raises(TrainingError, match="not triplet_pool"):
        _small(pairs_per_paper=2, triplet_pool=100)


def test_crop_rate_makes_anchors_crops_of_their_positives_and_trains() -> None:
    """``--crop-rate``: a share of the anchors become sub-formulas of their pair's positive."""
    from mathsearch.encoders.train_state import TrainState, TripletBatches

    train_corpus, test_corpus = _split()
    model = GCNConfig(hidden=32, normalisation="l2")
    config = _small(loss="infonce", use_masking=False, use_augmentation=False, batch_size=16)
    config = replace(config, crop_rate=0.5, model=model, steps_per_epoch=120)
    run = TrainState(config, train_corpus, default_vocabulary(), 120)
    triplets = TripletBatches(train_corpus, config, 120, run.packed)(0)
    batch = run.prepare(triplets, 0).batch
    sizes = np.diff(batch.ptr.numpy())
    pairs = len(triplets)
    # the slots drawn for a crop: the first draw of the step's generator (seed, 6, step)
    chosen = np.random.default_rng([config.seed, 6, 0]).random(pairs) < config.crop_rate
    graphs = train_corpus.graphs
    cropped = 0
    for i in range(pairs):
        positive = batch.x_tag[batch.ptr[pairs + i] : batch.ptr[pairs + i + 1]].tolist()
        anchor = batch.x_tag[batch.ptr[i] : batch.ptr[i + 1]].tolist()
        assert positive == graphs[triplets.positives[i]].tag_ids.tolist()
        if chosen[i] and sizes[i] < sizes[pairs + i]:  # a crop: part of its positive, in order
            cropped += 1
            rest = iter(positive)
            assert all(tag in rest for tag in anchor)
        else:  # the sampled anchor (or, when no crop was accepted, the positive itself)
            own = graphs[triplets.anchors[i]].tag_ids.tolist()
            assert anchor in (own, positive)
    assert 2 <= cropped <= pairs - 2  # about half
    result = train(config, train_corpus, test_corpus)
    similarity = np.array([x["similarity"] for x in result.losses])
    assert similarity[-20:].mean() < 0.8 * similarity[:10].mean()
    first, last = result.evaluations[0], result.evaluations[-1]
    assert last["ranking_score"] > first["ranking_score"] + 0.05
    with pytest.raises(TrainingError, match="crop_rate"):
        _small(crop_rate=0.3)  # the histogram loss has no pairs to crop
    with pytest.raises(TrainingError, match="crop_rate"):
        _small(loss="infonce", crop_rate=1.5)


def test_packed_and_collated_batches_train_the_same() -> None:
    train_corpus, _ = _split()
    packed = train(_small(use_augmentation=True), train_corpus)
    collated = train(_small(use_augmentation=True, packed=False), train_corpus)
    assert [x["loss"] for x in packed.losses] == pytest.approx(
        [x["loss"] for x in collated.losses], rel=1e-4
    )


@pytest.mark.parametrize("loss", ["histogram", "infonce"])
def test_prefetching_the_next_batch_trains_the_same(loss: str) -> None:
    """Step t + 1 prepared on a worker thread is the batch step t + 1 would build itself."""
    train_corpus, _ = _split()
    config = _small(loss=loss, steps_per_epoch=6, use_masking=loss == "histogram")
    plain = train(replace(config, prefetch="off"), train_corpus)
    ahead = train(replace(config, prefetch="on"), train_corpus)
    assert [x["loss"] for x in ahead.losses] == [x["loss"] for x in plain.losses]
    for a, b in zip(ahead.model.parameters(), plain.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_prefetch_auto_is_on_for_cuda_only() -> None:
    config = TrainConfig()
    assert config.resolve_prefetch(torch.device("cuda")) is True
    assert config.resolve_prefetch(torch.device("cpu")) is False
    assert replace(config, prefetch="on").resolve_prefetch(torch.device("cpu")) is True
    with pytest.raises(TrainingError, match="prefetch"):
        TrainConfig(prefetch="sometimes")


def test_time_budget_stops_the_run_and_drives_the_schedule() -> None:
    train_corpus, _ = _split()
    result = train(_small(steps_per_epoch=10_000, time_budget=1.0), train_corpus)
    assert 0 < result.step < 10_000
    assert result.train_seconds >= 1.0
    lrs = [x["lr"] for x in result.losses]
    assert lrs[0] == pytest.approx(3e-3) and lrs[-1] < lrs[0]
    assert all(a >= b for a, b in itertools.pairwise(lrs))


@pytest.mark.parametrize(
    "changes",
    [
        {"loss": "triplet"},
        {"loss": "ecml", "use_masking": False},
        {"use_augmentation": False, "shared_masking_pass": True},
        {"triplet_pool": 10, "steps_per_epoch": None},
    ],
)
def test_variants_train(changes: dict[str, object]) -> None:
    train_corpus, test_corpus = _split()
    result = train(_small(**changes), train_corpus, test_corpus)
    assert result.step == result.total_steps
    assert all(np.isfinite(x["loss"]) for x in result.losses)
    if changes.get("use_masking") is False:
        assert result.heads is None
        assert all(x["masking"] == 0.0 for x in result.losses)
    if "triplet_pool" in changes:
        assert result.total_steps == 3  # ceil(10 / 4) steps per epoch
    assert [e["step"] for e in result.evaluations] == [0, result.total_steps]


def test_same_seed_same_run() -> None:
    train_corpus, _ = _split()
    first = train(_small(), train_corpus)
    second = train(_small(), train_corpus)
    assert [x["loss"] for x in first.losses] == [x["loss"] for x in second.losses]
    other = train(_small(seed=1), train_corpus)
    assert [x["loss"] for x in first.losses] != [x["loss"] for x in other.losses]


def test_resume_continues_steps_schedule_and_losses(tmp_path: Path) -> None:
    train_corpus, test_corpus = _split()
    config = _small(epochs=2, steps_per_epoch=3, checkpoint_every=3)
    whole = train(replace(config, checkpoint_dir=str(tmp_path / "a")), train_corpus, test_corpus)
    saved = sorted(p.name for p in (tmp_path / "a" / "checkpoints").glob("*.pt"))
    assert saved == ["step-00000003.pt", "step-00000006.pt"]
    assert whole.checkpoint == tmp_path / "a" / "checkpoint.pt"
    middle = tmp_path / "a" / "checkpoints" / "step-00000003.pt"
    assert load_checkpoint(middle)["step"] == 3

    resumed = train(
        replace(config, checkpoint_dir=str(tmp_path / "b")), train_corpus, test_corpus, middle
    )
    assert [x["step"] for x in resumed.losses] == [4, 5, 6]
    assert resumed.step == 6
    for a, b in zip(whole.losses[3:], resumed.losses, strict=True):
        assert b["lr"] == pytest.approx(a["lr"])
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5, abs=1e-6)
    # the history of the first part comes along
    assert [e["step"] for e in resumed.evaluations] == [e["step"] for e in whole.evaluations]
    assert [e["epoch"] for e in resumed.epochs] == [1, 2]
    for name, tensor in whole.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], tensor, rtol=1e-4, atol=1e-5)
    # resuming a finished run does nothing
    done = train(config, train_corpus, None, resumed.checkpoint)
    assert done.step == 6
    assert done.losses == []


def test_resume_refuses_other_vocabulary_or_model(tmp_path: Path) -> None:
    train_corpus, _ = _split()
    config = _small(checkpoint_dir=str(tmp_path))
    result = train(config, train_corpus)
    assert result.checkpoint is not None
    data = load_checkpoint(result.checkpoint)
    data.pop("format")
    save_checkpoint(tmp_path / "other.pt", {**data, "vocab_hash": "0" * 64})
    with pytest.raises(CheckpointError, match="vocabulary"):
        train(replace(config, epochs=2), train_corpus, resume=tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="model"):
        wider = replace(config, model=GCNConfig(hidden=32))
        train(wider, train_corpus, resume=result.checkpoint)
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(CheckpointError):
        train(config, train_corpus, resume=tmp_path / "junk.pt")


def test_init_starts_a_new_run_from_another_runs_weights(tmp_path: Path) -> None:
    train_corpus, test_corpus = _split()
    first = train(_small(checkpoint_dir=str(tmp_path / "a")), train_corpus, test_corpus)
    assert first.checkpoint is not None
    fresh = train(_small(epochs=1, steps_per_epoch=1), train_corpus, test_corpus)
    tuned = train(
        _small(steps_per_epoch=2, init_from=str(first.checkpoint)), train_corpus, test_corpus
    )
    # a new run: its own steps and schedule, not the first run's
    assert [x["step"] for x in tuned.losses] == [1, 2]
    assert tuned.losses[0]["lr"] == pytest.approx(fresh.losses[0]["lr"])
    # ... that starts where the first one ended, not from a random network
    assert tuned.evaluations[0]["step"] == 0
    assert tuned.evaluations[0]["ranking_score"] == pytest.approx(
        first.evaluations[-1]["ranking_score"]
    )
    assert tuned.evaluations[0]["ranking_score"] != pytest.approx(
        fresh.evaluations[0]["ranking_score"]
    )
    with pytest.raises(CheckpointError, match="model"):
        train(_small(model=GCNConfig(hidden=32), init_from=str(first.checkpoint)), train_corpus)


def test_load_model_gives_the_trained_embeddings(tmp_path: Path) -> None:
    train_corpus, test_corpus = _split()
    result = train(_small(checkpoint_dir=str(tmp_path)), train_corpus)
    assert result.checkpoint is not None
    model, meta = load_model(result.checkpoint)
    assert meta["vocab_hash"] == train_corpus.vocab_hash
    assert meta["step"] == 4
    assert not model.training
    triplets = holdout_triplets(test_corpus, 200, 0)
    assert evaluate_ranking(model, test_corpus, triplets) == pytest.approx(
        evaluate_ranking(result.model, test_corpus, triplets)
    )


def test_corpus_of_another_vocabulary_is_refused() -> None:
    train_corpus, _ = _split()
    other = EquationCorpus(
        [replace(g, vocab_hash="f" * 64) for g in train_corpus.graphs[:8]],
        train_corpus.eq_ids[:8],
        train_corpus.papers[:8],
        train_corpus.sections[:8],
    )
    with pytest.raises(TrainingError, match="vocabulary"):
        train(_small(), other)


def test_a_test_corpus_without_triplets_only_skips_the_evaluation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    train_corpus, test_corpus = _split()
    one_paper = test_corpus.subset([0])
    with caplog.at_level("WARNING", logger="mathsearch.encoders.training"):
        result = train(_small(), train_corpus, one_paper)
    assert result.evaluations == []
    assert "no hold-out ranking score" in caplog.text


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_asking_for_cuda_without_cuda_is_a_training_error() -> None:
    train_corpus, _ = _split()
    with pytest.raises(TrainingError, match="CUDA"):
        train(_small(device="cuda"), train_corpus)


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mathsearch")
    add_train(parser.add_subparsers(dest="command", required=True))
    return run_train(parser.parse_args(argv))


def test_cli_trains_writes_report_and_reuses_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["train", "gcn", str(SAMPLE), "--format", "hepth", "--out", str(out), "--epochs", "1"]
    argv += ["--steps-per-epoch", "2", "--batch-size", "4", "--eval-triplets", "100"]
    argv += ["--test-fraction", "0.25", "--no-progress", "--device", "cpu", "--json"]
    assert _cli(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["step"] == summary["total_steps"] == 2
    assert summary["corpus"]["train"]["papers"] == 6
    assert summary["corpus"]["test"]["papers"] == 2
    assert summary["config"]["model"]["hidden"] == 512  # the seed's model by default
    assert (out / "checkpoint.pt").exists()
    assert json.loads((out / "train.json").read_text())["step"] == 2
    cached = list((out / "cache").glob("corpus-*.npz"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns

    more = [a if a != "1" else "2" for a in argv]  # two epochs, resumed after the first
    assert _cli([*more, "--resume", str(out / "checkpoint.pt")]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 4
    assert cached[0].stat().st_mtime_ns == stamp


def test_cli_out_dim_sets_the_embedding_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["train", "gcn", str(SAMPLE), "--format", "hepth", "--out", str(out), "--epochs", "1"]
    argv += ["--steps-per-epoch", "1", "--batch-size", "4", "--eval-triplets", "50"]
    argv += ["--hidden", "16", "--layers", "2", "--out-dim", "24", "--loss", "infonce"]
    argv += ["--no-masking", "--normalisation", "l2", "--no-progress", "--device", "cpu", "--json"]
    assert _cli(argv) == 0
    assert json.loads(capsys.readouterr().out)["config"]["model"]["out_dim"] == 24
    state = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert tuple(state["model"]["project.weight"].shape) == (24, 16)  # 16 wide -> 24-d


def test_cli_fails_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "gcn", str(SAMPLE), "--format", "hepth", "--out", str(tmp_path)]
    assert _cli([*argv, "--resume", str(tmp_path / "missing.pt"), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("mathsearch: error:")
    assert "\n" not in err


def test_cli_shared_sources_refuses_an_unknown_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "gcn", "--shared-data", str(tmp_path), "--out", str(tmp_path / "run")]
    assert _cli([*argv, "--shared-sources", "hepth2003,arrays", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert "unknown shared source(s) ['arrays']" in err
    assert "known: hepth2003, documents, hep_array" in err
    assert _cli([*argv, "--shared-sources", " , ", "--no-progress"]) == 1
    assert "names no source" in capsys.readouterr().err
    both = ["--init", "a.pt", "--resume", "b.pt", "--no-progress"]
    assert _cli(["train", "gcn", str(SAMPLE), "--out", str(tmp_path / "run"), *both]) == 1
    assert "give one of them" in capsys.readouterr().err


def test_shared_corpus_reads_only_the_sources_asked_for(tmp_path: Path) -> None:
    from mathsearch.encoders.corpus import CorpusError
    from mathsearch.encoders.shared_corpus import shared_sources

    (tmp_path / "hepth2003").mkdir()
    for name in ("equation.txt", "eqnarray.txt"):
        (tmp_path / "hepth2003" / name).write_text("")
    paths = shared_sources(tmp_path, ("hepth2003",))  # no documents, no hep_array: fine
    assert paths["hepth2003"][1] == "hepth"
    with pytest.raises(CorpusError, match="hep_array"):
        shared_sources(tmp_path, ("hepth2003", "hep_array"))


def test_cli_module_does_not_import_torch() -> None:
    code = "import sys, mathsearch.cli.train; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
