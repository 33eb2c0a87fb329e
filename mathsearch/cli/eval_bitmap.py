"""``mathsearch eval bitmap``: the ECML 2019 metrics (sec. 5.2) of a bitmap model on real data.

Plug-in of :mod:`mathsearch.cli.families` (``register`` / ``run``; no torch at import time).
The
sources are rendered (cached) and split by paper exactly as ``train bitmap`` splits them (same
``--test-fraction`` and ``--seed``), and the held-out papers are evaluated:

* hold-out metrics on ``--triplets`` sampled triplets (document-context weak label);
* "eval" metrics on a labelled set of ``--eval-papers`` held-out papers x ``--eval-per-paper``
  equations whose category is their paper (the seed's hand-labelled categories are not
  available; 13 x 8 is about the seed's ~100 equations in 13 categories).

The model is a ``checkpoint.pt`` (PyTorch) or an exported ``.onnx`` (ONNX Runtime, no torch
needed); with torch available an untrained network of the same size is scored as the baseline.
The BoW baseline (KDD 2020 sec. 6.3: the sum of the one-hot node features of the one
featurisation, :func:`mathsearch.indexer.lexical.bow_vector`, by cosine) is scored on the same
equations (``--no-bow``: not); an equation the featurisation refuses gets a zero vector.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS

logger = logging.getLogger(__name__)

__all__ = ["bow_embedder", "evaluate_embeddings", "labelled_sample", "register", "run"]

_ORDER = (
    "eval_accuracy",
    "eval_ranking",
    "eval_triples",
    "eval_siamese",
    "holdout_ranking",
    "holdout_triples",
    "holdout_siamese",
)


def register(kinds: Any) -> None:
    """Add ``eval bitmap``."""
    parser = kinds.add_parser(
        "bitmap",
        help="ECML 2019 metrics of a bitmap CNN (losses, hard ranking, 1-NN accuracy)",
        description="Render the sources, split them by paper like `train bitmap`, and print the "
        "seed's metrics on the held-out papers: eval triplet / Siamese losses, hard ranking and "
        "1-NN accuracy on a paper-labelled sample, hold-out ranking / triplet / Siamese losses.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval bitmap runs/bitmap/checkpoint.pt ../shared/data/hepth2003/*.txt \\
                  --format hepth
              mathsearch eval bitmap export/models/bitmap-v2.onnx eq.txt --format hepth --json
              mathsearch eval bitmap runs/teach/checkpoint.pt ../shared/data/hepth2003/*.txt \
                  --format hepth --held-out --compare gcn
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("model", metavar="MODEL", help="checkpoint.pt or MODEL.onnx")
    parser.add_argument("sources", nargs="+", metavar="SRC", help="files or folders")
    parser.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="as in training (0.2)")
    parser.add_argument("--seed", type=int, default=0, help="as in training (0)")
    parser.add_argument("--limit", type=int, help="use at most N equations (as in training)")
    parser.add_argument("--triplets", type=int, default=5000, help="hold-out triplets (5000)")
    parser.add_argument("--eval-papers", type=int, default=13, help="labelled papers (13)")
    parser.add_argument("--eval-per-paper", type=int, default=8, help="equations each (8)")
    parser.add_argument("--cache-dir", default="", help="rendered-crop cache (default: none)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the untrained model")
    parser.add_argument("--no-bow", action="store_true", help="skip the BoW baseline")
    parser.add_argument("--held-out", action="store_true",
                        help="test papers = the default model's held-out hep-th papers (as "
                        "`train bitmap --held-out` / --task teacher)")  # fmt: skip
    parser.add_argument("--compare", action="append", default=[], metavar="MODEL",
                        help="also score this LaTeX encoder (a family or .onnx, e.g. gcn, the "
                        "teacher) on the same equations; repeatable")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")


def labelled_sample(
    eq_paper: np.ndarray, papers: int, per_paper: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and paper labels of ``per_paper`` equations of ``papers`` random papers that have
    at least ``per_paper`` equations (fewer papers when fewer qualify)."""
    rng = np.random.default_rng(seed)
    counts = np.bincount(eq_paper)
    eligible = np.flatnonzero(counts >= max(2, per_paper))
    chosen = rng.permutation(eligible)[:papers]
    indices = [rng.choice(np.flatnonzero(eq_paper == p), per_paper, replace=False) for p in chosen]
    if not indices:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    idx = np.concatenate(indices)
    return idx, eq_paper[idx]


def evaluate_embeddings(
    embed: Any, crops: np.ndarray, eq_paper: np.ndarray, args: argparse.Namespace
) -> dict[str, Any]:
    """All metrics for one embedding function ``embed(crops) -> (n, d)`` (unit rows); ``crops``
    may be any array of items ``embed`` takes (the BoW baseline's: equation indices)."""
    from mathsearch.encoders.bitmap_eval import holdout_metrics, holdout_triplets, labelled_metrics
    from mathsearch.encoders.evaluation import EvaluationError

    out: dict[str, Any] = {}
    idx, labels = labelled_sample(eq_paper, args.eval_papers, args.eval_per_paper, args.seed)
    try:
        if idx.size:
            out.update(labelled_metrics(embed(crops[idx]), labels.tolist()))
    except EvaluationError as exc:
        logger.warning("no eval metrics: %s", exc)
    triplets = holdout_triplets(eq_paper, args.triplets, args.seed)
    used = np.unique(np.concatenate(triplets))
    vectors = embed(crops[used])
    emb = np.zeros((len(crops), vectors.shape[1]), dtype=np.float32)
    emb[used] = vectors
    out.update(holdout_metrics(emb, triplets))
    return out


def bow_embedder(latex: list[str]) -> Any:
    """``embed(indices) -> (n, 256)``: the L2-normalised BoW vectors of ``latex[i]`` (featurised
    once each, on first use; zeros where the featurisation refuses the equation)."""
    from mathsearch.indexer.lexical import bow_vector
    from mathsearch.indexer.parse import Featuriser, ParsedEquation

    featuriser = Featuriser()
    cache: dict[int, np.ndarray] = {}

    def vector(i: int) -> np.ndarray:
        if i not in cache:
            parsed = featuriser.parse_latex(latex[i])
            bow = bow_vector(parsed.graph) if isinstance(parsed, ParsedEquation) else None
            norm = float(np.linalg.norm(bow)) if bow is not None else 0.0
            cache[i] = bow / norm if bow is not None and norm > 0 else np.zeros(256, np.float32)
        return cache[i]

    return lambda indices: np.stack([vector(int(i)) for i in indices]).astype(np.float32)


def _unit_rows(vectors: np.ndarray) -> Any:
    """``embed(indices)``: rows of ``vectors``, L2-normalised (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return lambda indices: unit[np.asarray(indices, dtype=np.int64)]


def _embedder(model_path: Path) -> tuple[Any, str]:
    if model_path.suffix == ".onnx":
        from mathsearch.runtime.bitmap_runtime import BitmapEmbedder

        onnx = BitmapEmbedder(model_path, device="cpu")
        return onnx.encode_crops, "onnx"
    from mathsearch.encoders.bitmap_training import embed_crops, load_bitmap_model

    model, _ = load_bitmap_model(model_path)
    return (lambda crops: embed_crops(model, crops)), model.config.net


def run(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch eval bitmap``; 0 or 1 with a one-line reason."""
    from mathsearch.cli.train_bitmap import latex_vectors
    from mathsearch.core.errors import EvaluationError as HeldOutError
    from mathsearch.encoders.bitmap_data import BitmapCorpus, BitmapCorpusError
    from mathsearch.encoders.evaluation import EvaluationError
    from mathsearch.export.errors import ModelCardError, ModelMismatchError

    model_path = Path(args.model)
    if not model_path.is_file():
        return fail(f"model {model_path} does not exist")
    try:
        embed, kind = _embedder(model_path)
        corpus = BitmapCorpus.cached(args.sources, args.format, args.cache_dir or None, args.limit)
        if args.held_out:
            from mathsearch.evaluation.held_out import held_out_papers

            _, test = corpus.split_on(held_out_papers())
        else:
            _, test = corpus.split_by_paper(args.test_fraction, args.seed)
        result: dict[str, Any] = {
            "model": str(model_path),
            "data": {"equations": len(test), "papers": test.num_papers},
            "metrics": evaluate_embeddings(embed, test.crops, test.eq_paper, args),
        }
        if not args.no_baseline:
            try:
                from mathsearch.encoders.bitmap_cnn import BitmapCNN, BitmapCNNConfig
                from mathsearch.encoders.bitmap_training import embed_crops
                from mathsearch.encoders.torch_setup import seed

                net = kind if kind in ("small", "large") else "small"
                seed(args.seed)  # the same untrained net on every call
                fresh = BitmapCNN(BitmapCNNConfig(net=net))
                result["untrained"] = evaluate_embeddings(
                    lambda c: embed_crops(fresh, c), test.crops, test.eq_paper, args
                )
            except ImportError:
                logger.info("no torch: no untrained baseline")
        if not args.no_bow:
            items = np.arange(len(test))
            result["bow"] = evaluate_embeddings(
                bow_embedder(list(test.latex)), items, test.eq_paper, args
            )
        for other in args.compare:
            result.setdefault("compare", {})[other] = evaluate_embeddings(
                _unit_rows(latex_vectors(list(test.latex), other, progress=False)),
                np.arange(len(test)),
                test.eq_paper,
                args,
            )
    except (
        BitmapCorpusError,
        EvaluationError,
        HeldOutError,
        ModelCardError,
        ModelMismatchError,
        IndexerError,
        OSError,
        ValueError,
    ) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(result, indent=2))
        return 0
    emit(
        f"{model_path.name}: {result['data']['equations']} held-out equations of "
        f"{result['data']['papers']} papers"
    )
    base, bow = result.get("untrained", {}), result.get("bow", {})
    for key in _ORDER:
        if key in result["metrics"]:
            extra = f"   (untrained {base[key]:.4f})" if key in base else ""
            extra += f"   (BoW {bow[key]:.4f})" if key in bow else ""
            for other, scores in result.get("compare", {}).items():
                extra += f"   ({other} {scores[key]:.4f})" if key in scores else ""
            emit(f"  {key:<16} {result['metrics'][key]:.4f}{extra}")
    return 0
