"""``mathsearch eval``: ranking, knn-accuracy and retrieval on the bundled hep-th sample (CPU)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from mathsearch.cli.main import main
from mathsearch.encoders.corpus import EquationCorpus
from mathsearch.encoders.eval_inputs import EvalInputError, featurise_formulas, split_settings
from mathsearch.encoders.gcn import GCNConfig
from mathsearch.encoders.training import TrainConfig, train
from mathsearch.indexer.parse import Featuriser

SAMPLE = Path(__file__).resolve().parents[2] / "indexer" / "resources" / "hepth2003-sample.txt"
TEST_FRACTION = "0.25"  # 2 of the 8 sample papers, as in test_training.py

KATEX_HTML = (
    '<span class="katex"><span class="katex-mathml"><math><semantics><mrow><mfrac><mi>u</mi>'
    '<mi>v</mi></mfrac></mrow><annotation encoding="application/x-tex">\\frac{u}{v}'
    '</annotation></semantics></math></span><span class="katex-html" aria-hidden="true">'
    "&nbsp;</span></span>"
)
CATEGORIES = {
    "trig": [
        r"\sin^2 x + \cos^2 x = 1",
        r"\sin(2x) = 2 \sin x \cos x",
        r"\cos(a+b) = \cos a \cos b - \sin a \sin b",
        r"\tan x = \frac{\sin x}{\cos x}",
    ],
    "sums": [
        r"\sum_{i=1}^{n} i = \frac{n(n+1)}{2}",
        r"\sum_{k=0}^{\infty} x^k = \frac{1}{1-x}",
        r"\sum_{n=1}^{\infty} \frac{1}{n^2} = \frac{\pi^2}{6}",
        "<math><mrow><munderover><mo>∑</mo><mrow><mi>j</mi><mo>=</mo><mn>0</mn></mrow>"
        "<mi>m</mi></munderover><msub><mi>a</mi><mi>j</mi></msub></mrow></math>",
    ],
    "fractions": [
        r"\frac{a}{b} + \frac{c}{d} = \frac{ad + bc}{bd}",
        r"\frac{1}{x} - \frac{1}{y}",
        r"\frac{p}{q} \cdot \frac{r}{s} = \frac{pr}{qs}",
        KATEX_HTML,
        r"\frac{x}{",  # malformed: reported, not fatal
    ],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiny graph CNN trained like test_training.py (beats the untrained model there)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    out = tmp_path_factory.mktemp("gcn")
    corpus = EquationCorpus.from_sources([str(SAMPLE)], "hepth")
    corpus_train, corpus_test = corpus.split_by_paper(float(TEST_FRACTION), 0)
    config = TrainConfig(
        epochs=1,
        steps_per_epoch=100,
        batch_size=16,
        lr=3e-3,
        model=GCNConfig(hidden=32),
        checkpoint_dir=str(out),
        checkpoint_every=None,
        eval_triplets=500,
        progress=False,
        device="cpu",
        seed=0,
    )
    result = train(config, corpus_train, corpus_test)
    assert result.checkpoint == out / "checkpoint.pt"
    yield out
    torch.set_num_threads(threads)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["-q", "eval", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = _run([*argv, "--json", "--no-progress"], capsys)
    assert code == 0, err
    return json.loads(out)


def test_ranking_trained_beats_untrained_and_bounds(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ranking", str(SAMPLE), "--format", "hepth", "--checkpoint"]
    argv += [str(run_dir / "checkpoint.pt"), "--test-fraction", TEST_FRACTION, "--triplets", "500"]
    report = _json(argv, capsys)
    scores = report["scores"]
    assert set(scores) == {"model", "untrained", "bow"}
    for entry in scores.values():
        assert 0.0 <= entry["ranking_score"] <= 1.0
        assert entry["bound_95"] == pytest.approx(3 * (2.995732 / (2 * 2)) ** 0.5, rel=1e-5)
    assert report["test_papers"] == 2 and report["triplets"] == 500
    assert report["split"]["seed_from"] == "checkpoint"  # train_config.seed
    assert scores["model"]["ranking_score"] > scores["untrained"]["ranking_score"] + 0.1
    # default triplet seed = the training seed: the numbers of the training log
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    evaluations = checkpoint["history"]["evaluations"]
    assert scores["untrained"]["ranking_score"] == pytest.approx(evaluations[0]["ranking_score"])
    assert scores["model"]["ranking_score"] == pytest.approx(evaluations[-1]["ranking_score"])
    code, out, _ = _run([*argv, "--no-progress"], capsys)
    assert code == 0 and "untrained" in out and "bow" in out


def test_knn_accuracy_reports_the_bad_formula(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cats = tmp_path / "cats.json"
    cats.write_text(json.dumps(CATEGORIES), encoding="utf-8")
    report = _json(["knn-accuracy", "--categories", str(cats)], capsys)
    assert set(report["scores"]) == {"bow"}
    report = _json(
        ["knn-accuracy", "--categories", str(cats), "--checkpoint", str(run_dir / "checkpoint.pt")],
        capsys,
    )
    assert (report["formulas"], report["featurised"]) == (13, 12)
    assert [f["id"] for f in report["failures"]] == ["fractions#4"]
    assert set(report["scores"]) == {"model", "bow"}
    for entry in report["scores"].values():
        assert 0.0 <= entry["one_nn_accuracy"] <= 1.0
        assert 0.0 <= entry["loo_ranking_score"] <= 1.0
    assert report["scores"]["bow"]["one_nn_accuracy"] > 1 / 3  # better than chance


def test_retrieval_p_at_k_and_umap(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = {
        "q1": r"\Phi(x,y)=\sum_{k=-\infty}^\infty \phi_k(x) \exp(iky/R)",
        "q2": r"S_B(a) = - a - \sum_{j} S_B(a'_j) a''_j",
        "broken": r"\frac{",
        "unjudged": "x^2",
    }
    relevance = {"q1": ["0301004#1"], "q2": ["0301015#5"], "broken": ["0301004#0"]}
    (tmp_path / "q.json").write_text(json.dumps(queries), encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(relevance), encoding="utf-8")
    argv = ["retrieval", "--queries", str(tmp_path / "q.json"), "--relevance"]
    argv += [str(tmp_path / "r.json"), "--corpus", str(SAMPLE), "--format", "hepth", "--k", "5"]
    argv += ["--checkpoint", str(run_dir / "checkpoint.pt")]
    report = _json(argv, capsys)
    assert (report["queries"], report["queries_without_relevance"]) == (3, 1)
    assert [f["id"] for f in report["query_failures"]] == ["broken"]
    assert report["relevant_ids_not_in_corpus"] == 0
    for entry in report["scores"].values():
        assert 0.0 <= entry["precision_at_k"] <= 1.0
        assert 0.0 <= entry["umap"] <= 1.0  # one relevant id per query
    # BoW finds the near-copies of q1 and q2 first: uMAP (2/3 of queries) * 1
    assert report["scores"]["bow"]["umap"] == pytest.approx(2 / 3)


def test_bad_inputs_give_one_line_errors(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.json").write_text("{oops", encoding="utf-8")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    data = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    data["vocab_hash"] = "f" * 64
    torch.save(data, tmp_path / "other.pt")
    cases = {
        "does not exist": ["knn-accuracy", "--categories", str(tmp_path / "missing.json")],
        "not valid JSON": ["knn-accuracy", "--categories", str(tmp_path / "bad.json")],
        "JSON object": ["knn-accuracy", "--categories", str(tmp_path / "list.json")],
        "trained with vocabulary ffffffffffff": [
            "ranking",
            str(SAMPLE),
            "--format",
            "hepth",
            "--checkpoint",
            str(tmp_path / "other.pt"),
        ],
        "source": [
            "ranking",
            str(tmp_path / "no.txt"),
            "--checkpoint",
            str(run_dir / "checkpoint.pt"),
        ],
    }
    for expected, argv in cases.items():
        code, out, err = _run(argv, capsys)
        assert code == 1 and not out
        assert err.startswith("mathsearch: error: ") and expected in err
        assert err.count("\n") == 1


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for sub in ("ranking", "knn-accuracy", "retrieval"):
        with pytest.raises(SystemExit) as exit_info:
            _run([sub, "--help"], capsys)
        assert exit_info.value.code == 0
        assert "examples:" in capsys.readouterr().out


def test_split_settings_and_formulas() -> None:
    meta = {"split": {"test_fraction": 0.3}, "train_config": {"seed": 7}}
    split = split_settings(meta, None, None, 100)
    assert (split["test_fraction"], split["seed"], split["limit"]) == (0.3, 7, 100)
    assert (split["test_fraction_from"], split["seed_from"], split["limit_from"]) == (
        "checkpoint",
        "checkpoint",
        "flag",
    )
    assert split_settings({}, None, None, None)["test_fraction"] == 0.2
    with pytest.raises(EvalInputError):
        split_settings({"test_fraction": 1.5}, None, None, None)
    with Featuriser() as featuriser:
        graphs, kept, failures = featurise_formulas(
            featuriser, [("a", KATEX_HTML), ("b", "<math><mi>x</mi>"), ("c", "x^2")]
        )
    assert kept == [0, 2] and len(graphs) == 2
    assert failures[0]["id"] == "b" and failures[0]["stage"] == "convert"


def test_ranking_scores_exported_models_on_the_same_triplets(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mathsearch.export.export_model import export_checkpoint
    from mathsearch.export.quantize import quantize_int8

    corpus = EquationCorpus.from_sources([str(SAMPLE)], "hepth")
    model = tmp_path / "gcn.onnx"
    export_checkpoint(run_dir / "checkpoint.pt", model, corpus.graphs, tolerance=1e-3)
    quantize_int8(model, corpus.graphs, min_inner=16)
    argv = ["ranking", str(SAMPLE), "--format", "hepth", "--checkpoint"]
    argv += [str(run_dir / "checkpoint.pt"), "--test-fraction", TEST_FRACTION, "--triplets", "500"]
    argv += ["--onnx", str(model), "--onnx", str(tmp_path / "gcn.int8.onnx")]
    scores = _json(argv, capsys)["scores"]
    assert set(scores) == {"model", "untrained", "bow", "onnx:gcn.onnx", "onnx:gcn.int8.onnx"}
    # the exported model ranks like its checkpoint (at most one of 500 triplets flips)
    assert scores["onnx:gcn.onnx"]["ranking_score"] == pytest.approx(
        scores["model"]["ranking_score"], abs=0.0021
    )
    assert scores["onnx:gcn.int8.onnx"]["ranking_score"] > scores["untrained"]["ranking_score"]
    code, _, err = _run([*argv[:-4], "--onnx", str(tmp_path / "missing.onnx")], capsys)
    assert code == 1 and "does not exist" in err
