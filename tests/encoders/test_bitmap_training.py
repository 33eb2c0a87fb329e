"""Training the bitmap CNN on real hep-th equations: losses fall, the hold-out ranking beats the
untrained net; the CLI writes a bitmap checkpoint that `eval bitmap` scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mathsearch.cli.families import checkpoint_family
from mathsearch.cli.main import main
from mathsearch.encoders.bitmap_data import BitmapCorpus, cache_key
from mathsearch.encoders.bitmap_training import BitmapTrainConfig, load_bitmap_model, train_bitmap
from mathsearch.indexer.bitmap import BitmapSettings

SLICE = Path(__file__).resolve().parents[1] / "resources" / "export" / "hepth2003-every12th.txt"
LIMIT = 130


@pytest.fixture(scope="module")
def corpus() -> BitmapCorpus:
    return BitmapCorpus.from_sources([str(SLICE)], "hepth", LIMIT)


def test_corpus_renders_real_equations(corpus: BitmapCorpus, tmp_path: Path) -> None:
    assert len(corpus) > 100 and corpus.crops.shape[1:] == (32, 333)
    assert corpus.num_papers > 20 and corpus.failures  # user macros are dropped, counted
    assert (corpus.crops < 128).any(axis=(1, 2)).all()  # every crop has ink
    saved = BitmapCorpus.load(corpus.save(tmp_path / "c.npz"))
    assert np.array_equal(saved.crops, corpus.crops) and saved.papers == corpus.papers
    train, test = corpus.split_by_paper(0.25, seed=0)
    assert not set(train.papers) & set(test.papers)
    assert len(train) + len(test) == len(corpus)


def test_split_on_named_papers_and_missing_sources(corpus: BitmapCorpus, tmp_path: Path) -> None:
    from mathsearch.encoders.bitmap_data import BitmapCorpusError

    chosen = corpus.paper_ids[:5]
    train, test = corpus.split_on(chosen)
    assert set(test.papers) == set(chosen) and not set(train.papers) & set(chosen)
    assert len(train) + len(test) == len(corpus)
    with pytest.raises(BitmapCorpusError, match="both sides"):
        corpus.split_on(["no-such-paper"])
    with pytest.raises(BitmapCorpusError, match="no such source"):
        BitmapCorpus.cached([str(tmp_path / "missing.txt")], "hepth", tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # nothing cached for a failed render


def test_context_triplet_training_learns(corpus: BitmapCorpus) -> None:
    torch.manual_seed(0)
    config = BitmapTrainConfig(
        task="context", epochs=2, steps_per_epoch=6, batch_size=16, lr=1e-3, eval_triplets=300
    )
    config.progress = False
    summary = train_bitmap(config, corpus, corpus)  # scored on the papers it saw: a fit test
    losses = [e["loss"] for e in summary["history"]["epochs"]]
    evaluations = summary["history"]["evaluations"]
    assert losses[-1] < losses[0]
    assert evaluations[-1]["holdout_ranking"] < evaluations[0]["holdout_ranking"]  # untrained
    assert evaluations[-1]["holdout_triples"] < evaluations[0]["holdout_triples"]


def test_context_info_nce_training_learns(corpus: BitmapCorpus) -> None:
    """The in-batch contrastive loss (beyond the seed) on the same papers: it falls from about
    log(B) (chance) and the hold-out ranking beats the untrained net."""
    torch.manual_seed(0)
    config = BitmapTrainConfig(
        task="context", loss="info-nce", epochs=3, steps_per_epoch=8, batch_size=16, lr=1e-3,
        eval_triplets=300, progress=False,
    )  # fmt: skip
    summary = train_bitmap(config, corpus, corpus)  # scored on the papers it saw: a fit test
    losses = [e["loss"] for e in summary["history"]["epochs"]]
    evaluations = summary["history"]["evaluations"]
    assert losses[0] < 1.5 * np.log(16)  # starts near chance
    assert losses[-1] < losses[0]
    assert evaluations[-1]["holdout_ranking"] < evaluations[0]["holdout_ranking"]  # untrained


def test_teacher_task_learns_the_graph_cnn_geometry(corpus: BitmapCorpus) -> None:
    """The teacher task (beyond the seed): every crop against gcn-v7's vector of its LaTeX, with
    the centring output norm. The loss falls, each crop moves towards its own target, and the
    hold-out ranking beats the untrained net."""
    from mathsearch.cli.train_bitmap import teacher_targets
    from mathsearch.encoders.bitmap_training import embed_crops

    targets = teacher_targets(corpus.latex, "gcn", progress=False)
    assert targets.shape == (len(corpus), 64) and np.count_nonzero(targets.any(axis=1)) > 100
    torch.manual_seed(0)
    config = BitmapTrainConfig(
        task="teacher", epochs=3, steps_per_epoch=8, batch_size=16, lr=2e-3, eval_triplets=300,
        augment=True, out_norm=True, progress=False,
    )  # fmt: skip
    summary = train_bitmap(config, corpus, corpus, targets=targets)  # a fit test
    losses = [e["loss"] for e in summary["history"]["epochs"]]
    evaluations = summary["history"]["evaluations"]
    assert losses[-1] < losses[0]
    assert evaluations[-1]["holdout_ranking"] < evaluations[0]["holdout_ranking"]  # untrained
    own = np.sum(embed_crops(summary["model"], corpus.crops) * targets, axis=1)
    shuffled = np.sum(embed_crops(summary["model"], corpus.crops) * targets[::-1], axis=1)
    # closer to its own target than to another's (an untrained net: no difference)
    assert own.mean() > shuffled.mean() + 0.01 and (own > shuffled).mean() > 0.55


def test_teacher_task_needs_targets(corpus: BitmapCorpus) -> None:
    from mathsearch.encoders.bitmap_training import BitmapTrainingError

    config = BitmapTrainConfig(task="teacher", epochs=1, progress=False)
    with pytest.raises(BitmapTrainingError, match="needs targets"):
        train_bitmap(config, corpus)
    with pytest.raises(BitmapTrainingError, match="needs targets"):
        train_bitmap(config, corpus, targets=np.zeros((3, 64), np.float32))


def test_symbols_task_loss_falls(corpus: BitmapCorpus) -> None:
    config = BitmapTrainConfig(
        task="symbols", epochs=2, steps_per_epoch=6, batch_size=32, lr=3e-3, progress=False
    )
    summary = train_bitmap(config, corpus)
    losses = [e["loss"] for e in summary["history"]["epochs"]]
    assert summary["labels"] > 20
    assert losses[-1] < losses[0] and losses[-1] < np.log(2)  # below chance


def test_keywords_need_text(corpus: BitmapCorpus) -> None:
    from mathsearch.encoders.bitmap_training import BitmapTrainingError

    with pytest.raises(BitmapTrainingError, match="no text"):
        train_bitmap(BitmapTrainConfig(task="keywords", epochs=1, progress=False), corpus)


def test_cli_train_then_eval(corpus: BitmapCorpus, tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    corpus.save(
        cache / f"bitmaps-{cache_key([str(SLICE)], 'hepth', LIMIT, BitmapSettings())[:20]}.npz"
    )
    out = tmp_path / "run"
    args = [str(SLICE), "--format", "hepth", "--limit", str(LIMIT), "--cache-dir", str(cache)]
    code = main(
        [
            "train",
            "bitmap",
            *args,
            "--out",
            str(out),
            "--loss",
            "siamese",
            "--epochs",
            "1",
            "--steps-per-epoch",
            "2",
            "--batch-size",
            "8",
            "--eval-triplets",
            "100",
            "--no-progress",
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 2 and summary["corpus"]["train"]["equations"] > 50
    checkpoint = out / "checkpoint.pt"
    assert checkpoint_family(checkpoint) == "bitmap"
    model, meta = load_bitmap_model(checkpoint)
    assert meta["train_config"]["loss"] == "siamese" and model.num_parameters() == 45_504
    code = main(
        [
            "eval",
            "bitmap",
            str(checkpoint),
            *args,
            "--triplets",
            "200",
            "--eval-papers",
            "4",
            "--eval-per-paper",
            "2",
            "--json",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("eval_accuracy", "eval_ranking", "eval_triples", "eval_siamese"):
        assert key in result["metrics"] and key in result["untrained"]
    assert 0.0 <= result["metrics"]["holdout_ranking"] <= 1.0
    # the BoW baseline on the same equations (KDD 2020 sec. 6.3)
    assert "eval_accuracy" in result["bow"] and 0.0 <= result["bow"]["holdout_ranking"] <= 1.0
    # --compare: a LaTeX encoder (the teacher) scored on the same equations
    code = main(["eval", "bitmap", str(checkpoint), *args, "--triplets", "200", "--no-baseline",
                 "--no-bow", "--compare", "gcn", "--json"])  # fmt: skip
    assert code == 0
    compared = json.loads(capsys.readouterr().out)["compare"]["gcn"]
    assert compared["holdout_ranking"] < result["untrained"]["holdout_ranking"]
    assert main(["eval", "bitmap", str(tmp_path / "missing.pt"), str(SLICE)]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_the_bow_baseline_embeds_unit_vectors_of_the_one_featurisation() -> None:
    from mathsearch.cli.eval_bitmap import bow_embedder

    embed = bow_embedder([r"x^2 + y^2", r"x^{2}+y^{2}", r"\int_0^1 f(t)\,dt", r"\frac{"])
    vectors = embed(np.array([0, 1, 2, 3]))
    assert vectors.shape == (4, 256)
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0)
    assert float(vectors[0] @ vectors[1]) > 0.999  # the same formula written twice
    assert float(vectors[0] @ vectors[2]) < 0.9
    assert not vectors[3].any()  # refused by the featurisation: a zero vector
