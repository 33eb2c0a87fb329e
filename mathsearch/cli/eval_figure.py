"""``mathsearch eval figure``: the seed's metrics of a figure model on held-out articles.

Plug-in of :mod:`mathsearch.cli.families` (``register(kinds)``, ``run(args)``). The model is
a
``train figure`` checkpoint (PyTorch) or an exported ``.onnx`` (ONNX Runtime, no torch); the
articles are split as in training (the checkpoint's or the card's split seed and fractions), so
the numbers are on articles the model never saw. Reported beside tf-idf and random vectors:
similarity-prediction accuracy (Same / Citing / both), tf-idf top-100 re-ranked by the
embeddings (p@3, p@5, with the seed's paired t-test against tf-idf over the same targets) and
embedding retrieval alone.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]


def register(kinds: Any) -> None:
    """Add ``figure`` to ``eval``'s sub-parsers."""
    parser = kinds.add_parser(
        "figure",
        help="figure model: similarity accuracy and tf-idf re-ranking p@k on held-out articles",
        description=__doc__.split("\n\n")[1],
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval figure /var/cache/mathsearch/figure-corpus/corpus \\
                  --checkpoint runs/figure/checkpoint.pt
              mathsearch eval figure /var/cache/mathsearch/figure-corpus/corpus \\
                  --onnx export/models/figure-v2.onnx --json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("sources", nargs="+", metavar="SRC", help=".tex files or folders")
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--checkpoint", help="a `train figure` checkpoint.pt")
    model.add_argument("--onnx", help="an exported figure model (card and vocabulary beside)")
    parser.add_argument("--min-words", type=int, default=5, help="as in training (5)")
    parser.add_argument("--cache-dir", help="image cache (default: none)")
    parser.add_argument("--json", action="store_true")


def _split(meta: dict[str, Any]) -> tuple[int, float, float]:
    split = meta.get("split") or {}
    return (
        int(split.get("seed", 0)),
        float(split.get("val_fraction", 0.1)),
        float(split.get("test_fraction", 0.2)),
    )


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Vectors of every figure, then :func:`mathsearch.encoders.figure_eval.evaluate_vectors`."""
    import numpy as np

    from mathsearch.cli.train_figure import paired_with_tfidf
    from mathsearch.encoders.figure_data import FigureCorpus
    from mathsearch.encoders.figure_eval import evaluate_vectors

    if args.checkpoint:
        from mathsearch.encoders.figure_training import corpus_vectors, load_figure_checkpoint

        model, vocabulary, meta = load_figure_checkpoint(args.checkpoint)
    else:
        from mathsearch.runtime.figure_runtime import FigureEmbedder

        embedder = FigureEmbedder(args.onnx, device="cpu")
        vocabulary, meta = embedder.vocabulary, dict(embedder.card.training)
    seed, val_fraction, test_fraction = _split(meta)
    records = FigureCorpus.extract(args.sources, args.min_words)
    corpus = FigureCorpus.build(records, vocabulary, args.cache_dir)
    _, val_rows, test_rows = corpus.split((val_fraction, test_fraction), seed)
    if args.checkpoint:
        vectors = corpus_vectors(model, corpus.features)
    else:
        parts = []
        for start in range(0, len(corpus), 256):
            chunk = corpus.features.take(np.arange(start, min(start + 256, len(corpus))))
            parts.append(embedder.session.run(None, chunk.feeds())[0])
        vectors = np.concatenate(parts)
    rng = np.random.default_rng(seed)
    named = {"model": vectors, "random": rng.standard_normal(vectors.shape).astype("float32")}
    if args.checkpoint:  # the sub-models alone (seed Table 1)
        named["lstm"] = corpus_vectors(model, corpus.features, "text")
        named["cnn"] = corpus_vectors(model, corpus.features, "image")
    metrics = paired_with_tfidf(evaluate_vectors(named, corpus, val_rows, test_rows, seed))
    return {"model": args.checkpoint or args.onnx, "corpus": corpus.summary(), "metrics": metrics}


def run(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch eval figure``."""
    from mathsearch.export.errors import ModelCardError, ModelMismatchError

    try:
        from mathsearch.encoders.figure_data import FigureDataError
    except ImportError as exc:
        return fail(str(exc))
    errors: tuple[type[Exception], ...] = (
        FigureDataError,
        ModelCardError,
        ModelMismatchError,
        OSError,
        ValueError,
    )
    for path in (args.checkpoint, args.onnx):
        if path and not Path(path).is_file():
            return fail(f"{path} does not exist")
    try:
        report = evaluate(args)
    except errors as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(report, indent=2))
        return 0
    from mathsearch.cli.train_figure import format_metrics

    c = report["corpus"]
    emit(f"{report['model']}: {c['figures']} figures in {c['articles']} articles")
    emit(format_metrics(report["metrics"]))
    return 0
