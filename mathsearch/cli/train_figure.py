"""``mathsearch train figure``: the figure encoder of the figure-embeddings seed.

Plug-in of :mod:`mathsearch.cli.families` (``register(kinds)`` and ``run(args)``); torch is
imported
only when the command runs. Outputs in ``--out DIR``: ``checkpoint.pt`` (``family: figure``, the
input of ``mathsearch export``), ``vocabulary.json`` and ``train.json`` (corpus counts, split,
losses per stage and epoch, hold-out metrics of the untrained and the trained model beside
tf-idf).
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail, positive_int

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]


def register(kinds: Any) -> None:
    """Add ``figure`` to ``train``'s sub-parsers."""
    parser = kinds.add_parser(
        "figure",
        help="figure encoder: caption/mention LSTM + image CNN + fusion (weak supervision, MSE)",
        description="Train the figure encoder of the figure-embeddings seed on the figures of "
        "LaTeX sources: text LSTM, image CNN and fusion (batch norm + dense) trained in turn on "
        "weak-supervision pairs (1 same article, 0.6 citing article, 0 random; MSE on the dot "
        "product; the CNN on SSIM-filtered triplets with the hinge loss). Articles are split "
        "into train / validation / test; the hold-out metrics are written to train.json.",
        epilog=textwrap.dedent("""\
            examples:
              python -m research.fetch_figure_corpus       # the real corpus, once (repository root)
              mathsearch train figure /var/cache/mathsearch/figure-corpus/corpus --out runs/figure
              mathsearch train figure tests/resources/indexer/figures --out /tmp/fig \\
                  --epochs 1 --min-words 1 --json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("sources", nargs="+", metavar="SRC_DIR", help=".tex files or folders")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--epochs", type=positive_int, default=3, help="per stage (seed: 3)")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="seed: 64")
    parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (seed: 0.01)")
    parser.add_argument(
        "--loss",
        choices=("mse", "ce", "info-nce"),
        default="mse",
        help="pair loss of the text and fusion stages: the seed's mse (default) or ce, or "
        "info-nce (in-batch negatives, the relation as soft targets)",
    )
    parser.add_argument(
        "--temperature", type=float, default=0.05, help="info-nce temperature (0.05)"
    )
    parser.add_argument("--max-pairs", type=positive_int, default=20_000, help="training pairs")
    parser.add_argument("--vocab-size", type=positive_int, default=1000, help="seed: 1000")
    parser.add_argument("--max-words", type=positive_int, default=100, help="seed: 100")
    parser.add_argument("--image-size", type=positive_int, default=64, help="square side (64)")
    parser.add_argument("--rgb", action="store_true", help="3 channels (default grey)")
    parser.add_argument("--min-words", type=int, default=5, help="drop shorter figures (5)")
    parser.add_argument("--val-fraction", type=float, default=0.1, help="articles (0.1)")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="articles (0.2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=positive_int, default=2, help="torch threads (2)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def train_run(args: argparse.Namespace) -> dict[str, Any]:
    """Extract, split, featurise, evaluate the untrained model, train, evaluate, save."""
    import numpy as np

    from mathsearch.encoders.figure_data import FigureCorpus, article_of, split_articles
    from mathsearch.encoders.figure_encoder import FigureEncoder, FigureEncoderConfig
    from mathsearch.encoders.figure_eval import evaluate_vectors
    from mathsearch.encoders.figure_training import (
        FigureTrainConfig,
        corpus_vectors,
        save_figure_checkpoint,
        train_figure_encoder,
    )
    from mathsearch.encoders.torch_setup import seed, set_threads
    from mathsearch.indexer.figure_features import FigureVocabulary, figure_text

    set_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = FigureCorpus.extract(args.sources, args.min_words)
    settings = {
        "max_words": args.max_words,
        "image_size": args.image_size,
        "channels": 3 if args.rgb else 1,
    }
    train_rows, val_rows, test_rows = split_articles(
        [article_of(r.doc_id) for r in records], (args.val_fraction, args.test_fraction), args.seed
    )
    vocabulary = FigureVocabulary.build(
        [figure_text(records[r].to_item()) for r in train_rows], args.vocab_size, **settings
    )
    corpus = FigureCorpus.build(records, vocabulary, out / "cache")
    config = FigureTrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        loss=args.loss,
        temperature=args.temperature,
        max_pairs=args.max_pairs,
        seed=args.seed,
        progress=not args.no_progress,
    )
    seed(args.seed)
    untrained = FigureEncoder(
        FigureEncoderConfig(
            vocabulary.size, image_size=args.image_size, channels=settings["channels"]
        )
    )
    before = corpus_vectors(untrained, corpus.features)
    model, history = train_figure_encoder(corpus, train_rows, config, model=untrained)
    named = {
        "untrained": before,
        "random": np.random.default_rng(args.seed).standard_normal(before.shape).astype("float32"),
        "lstm": corpus_vectors(model, corpus.features, "text"),
        "cnn": corpus_vectors(model, corpus.features, "image"),
        "lstm+cnn": corpus_vectors(model, corpus.features),
    }
    metrics = paired_with_tfidf(evaluate_vectors(named, corpus, val_rows, test_rows, args.seed))
    split = {
        "seed": args.seed,
        "val_fraction": args.val_fraction,
        "test_fraction": args.test_fraction,
        "articles": {
            name: len({corpus.articles[r] for r in rows})
            for name, rows in (("train", train_rows), ("val", val_rows), ("test", test_rows))
        },
        "figures": {"train": len(train_rows), "val": len(val_rows), "test": len(test_rows)},
    }
    vocabulary.save(out / "vocabulary.json")
    checkpoint = save_figure_checkpoint(
        out / "checkpoint.pt",
        model,
        vocabulary,
        train_config=config.to_dict(),
        history={k: v for k, v in history.items()},
        split=split,
        sources=[str(s) for s in args.sources],
    )
    summary = {
        "checkpoint": str(checkpoint),
        "corpus": corpus.summary(),
        "split": split,
        "config": config.to_dict(),
        "history": history,
        "metrics": metrics,
        "report": str(out / "train.json"),
    }
    (out / "train.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


def run(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch train figure``."""
    try:
        from mathsearch.encoders.figure_data import FigureDataError
        from mathsearch.encoders.figure_encoder import FigureConfigError
        from mathsearch.encoders.figure_training import FigureTrainingError
    except ImportError as exc:
        return fail(
            f"training needs the train extra (torch): {exc}; pip install 'mathsearch[train]'"
        )
    from mathsearch.indexer.figure_features import FigureFeatureError

    try:
        summary = train_run(args)
    except (
        FigureDataError,
        FigureConfigError,
        FigureTrainingError,
        FigureFeatureError,
        OSError,
    ) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(summary, indent=2))
        return 0
    c, h = summary["corpus"], summary["history"]
    emit(
        f"trained on {summary['split']['figures']['train']} figures "
        f"({c['figures']} in {c['articles']} articles, {c['with_image']} with an image) in "
        f"{h['seconds']:.1f} s: {h['pairs']} pairs, {h['image_triplets']} image triplets"
    )
    for stage, losses in h["losses"].items():
        shown = ", ".join("-" if x is None else f"{x:.4f}" for x in losses)
        emit(f"  {stage}: loss per epoch {shown}")
    emit(format_metrics(summary["metrics"]))
    emit(f"checkpoint: {summary['checkpoint']}")
    return 0


def paired_with_tfidf(metrics: dict[str, Any]) -> dict[str, Any]:
    """Add ``metrics["paired"]``: each re-ranking's p@3 and p@5 against tf-idf alone over the same
    test targets, the seed's two-tailed paired t-test at 95% (section 5.2), and drop the
    per-target lists from the recommendation rows."""
    from mathsearch.evaluation.paired_test import paired_t_test

    rows = metrics["recommendation"]
    base = rows["tfidf"].get("per_target", {})
    paired: dict[str, Any] = {}
    for name, row in rows.items():
        mine = row.get("per_target", {})
        if name == "tfidf" or len(base.get("p@5", [])) < 2 or not mine:
            continue
        paired[name] = {
            key: paired_t_test(mine[key], base[key]).to_dict() for key in ("p@3", "p@5")
        }
    for row in rows.values():
        row.pop("per_target", None)
    return {**metrics, "paired": paired}


def format_metrics(metrics: dict[str, Any]) -> str:
    """The hold-out metrics as lines (seed Tables 1/3 and 4/5)."""
    lines = ["similarity prediction (accuracy / same / citing):"]
    for name, m in metrics["similarity"].items():
        lines.append(f"  {name:<16} {m['accuracy']:.3f} / {m['same']:.3f} / {m['citing']:.3f}")
    lines.append("recommendation p@3 / p@5 (same p@5, citing p@5):")
    for name, m in metrics["recommendation"].items():
        lines.append(
            f"  {name:<16} {m.get('p@3', 0):.3f} / {m.get('p@5', 0):.3f} "
            f"({m.get('same_p@5', 0):.3f}, {m.get('citing_p@5', 0):.3f}) "
            f"alpha {m['alpha']}"
        )
    if metrics.get("paired"):
        lines.append("re-ranking against tf-idf, p@5 (paired t-test, 95% interval):")
    for name, m in metrics.get("paired", {}).items():
        t = m["p@5"]
        lines.append(
            f"  {name:<16} {t['mean_difference']:+.3f} [{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]"
            f" p {t['p_value']:.3f} over {t['n']} targets"
        )
    lines.append("retrieval alone p@5:")
    for name, m in metrics["retrieval"].items():
        lines.append(f"  {name:<16} {m.get('p@5', 0):.3f}")
    return "\n".join(lines)
