"""The ``mathsearch eval`` command: ranking, knn-accuracy and retrieval scores (KDD 2020 §5-6).

Wired into the ``mathsearch`` parser by :func:`add_eval`; :func:`run_eval` is the handler. No
torch at import time (``mathsearch --help`` stays light); the numbers come from
:mod:`mathsearch.export.eval_runs`:

* ``eval ranking``: rebuild the corpus of a training run, take the same held-out papers and score
  hold-out triplets with the trained model, the untrained model of the same seed and BoW;
* ``eval knn-accuracy``: leave-one-out 1-NN accuracy and ranking score on labelled formulas;
* ``eval retrieval``: mean P@k and uMAP of ranking a corpus for judged queries; with
  ``--task`` the index form of :mod:`mathsearch.cli.retrieval_eval` (real relevance data,
  every
  ranking mode of the live index against Approach Zero).

Exit status 0 on success, 1 with one ``mathsearch: error: ...`` line otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import emit, fail, positive_int
from mathsearch.cli.retrieval_eval import (
    INDEX_EXAMPLES,
    add_index_options,
    run_index_form,
)
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.extract import FORMATS

logger = logging.getLogger(__name__)

__all__ = ["add_eval", "run_eval"]


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), not {value}")
    return value


def _common(parser: argparse.ArgumentParser, checkpoint_required: bool) -> None:
    parser.add_argument(
        "--checkpoint",
        metavar="CKPT",
        required=checkpoint_required,
        help="a checkpoint.pt of `mathsearch train gcn`"
        + ("" if checkpoint_required else " (default: BoW only)"),
    )
    parser.add_argument("--vocabulary", help="vocabulary JSON (default: the shipped one)")
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda:0")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _corpus_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    parser.add_argument("--limit", type=positive_int, help="use at most N equations")
    parser.add_argument(
        "--cache-dir", help="featurised-corpus cache (default: the checkpoint run's cache/)"
    )
    parser.add_argument("--no-cache", action="store_true", help="always parse the sources again")


def add_eval(commands: Any) -> None:
    """Register ``eval`` (ranking, knn-accuracy, retrieval) on the ``mathsearch`` subparsers."""
    raw = argparse.RawDescriptionHelpFormatter
    ev = commands.add_parser(
        "eval",
        help="evaluate an equation encoder (ranking score, 1-NN accuracy, P@k / uMAP)",
        description="Evaluate an equation encoder against the untrained model and the BoW "
        "baseline with the metrics of the KDD 2020 seed (sections 5 and 6).",
        epilog="examples:\n  mathsearch eval ranking ../shared/data/hepth2003/*.txt --format "
        "hepth --checkpoint runs/gcn/checkpoint.pt",
        formatter_class=raw,
    )
    kinds = ev.add_subparsers(dest="eval_command", required=True, metavar="EVAL")
    ranking = kinds.add_parser(
        "ranking",
        help="hold-out ranking score with confidence widths (seed section 5)",
        description="Rebuild the training corpus, take the same held-out papers as training "
        "(test fraction, split seed and limit from the checkpoint when recorded there, else "
        "the flags / defaults), draw hold-out triplets (negatives outside P(anchor)) and report "
        "the ranking score (eq. 3) of the trained model, the untrained model of the same "
        "configuration and seed, and BoW cosine, with the 95% widths of Theorem 5.1 (test "
        "papers) and eq. 9 (sampled triplets).",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval ranking ../shared/data/hepth2003/*.txt --format hepth \\
                  --checkpoint runs/gcn/checkpoint.pt
              mathsearch eval ranking eq.txt --format hepth --checkpoint runs/small/checkpoint.pt \\
                  --limit 2000 --test-fraction 0.25 --split-seed 0 --triplets 5000 --json
              mathsearch eval ranking ../shared/data/hepth2003/*.txt --format hepth \\
                  --checkpoint runs/gcn/checkpoint.pt --onnx gcn-v1.onnx --onnx gcn-v1.int8.onnx
              mathsearch eval ranking ../shared/data/hepth2003/*.txt --format hepth \\
                  --onnx models/gcn-v2.onnx             an earlier model on its card's hold-out
            """),
        formatter_class=raw,
    )
    ranking.add_argument("sources", nargs="+", metavar="SRC", help="the training sources")
    _corpus_options(ranking)
    ranking.add_argument(
        "--test-fraction", type=_fraction, help="held-out papers (default: checkpoint, else 0.2)"
    )
    ranking.add_argument(
        "--split-seed", type=int, help="seed of the paper split (default: the training seed)"
    )
    ranking.add_argument("--triplets", type=positive_int, default=2000, help="default 2000")
    ranking.add_argument("--seed", type=int, help="triplet seed (default: the training seed)")
    ranking.add_argument(
        "--onnx",
        action="append",
        default=[],
        metavar="MODEL.onnx",
        help="also score an exported model (ONNX Runtime) on the same triplets; repeatable. "
        "Without --checkpoint the first model's card gives the split and the seeds",
    )
    _common(ranking, checkpoint_required=False)

    knn = kinds.add_parser(
        "knn-accuracy",
        help="leave-one-out 1-NN accuracy and ranking score on labelled formulas (section 6.1)",
        description="CATS.json is {category: [formula, ...]}; a formula starting with '<' is "
        "MathML (KaTeX HTML allowed), anything else LaTeX. Formulas that cannot be featurised "
        "are reported and left out. Model similarity: inner product; BoW: cosine.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval knn-accuracy --categories eval/ml-categories.json
              mathsearch eval knn-accuracy --categories cats.json \\
                  --checkpoint runs/gcn/checkpoint.pt --json
            """),
        formatter_class=raw,
    )
    knn.add_argument("--categories", required=True, metavar="CATS", help="categories JSON")
    _common(knn, checkpoint_required=False)

    retrieval = kinds.add_parser(
        "retrieval",
        help="P@k and uMAP of judged queries: in memory, or on an index vs Approach Zero "
        "(section 6.3)",
        description="In-memory form (--queries, --relevance, --corpus): Q.json is {query_id: "
        "latex}, R.json {query_id: [eq_id, ...]}. Every corpus equation is ranked per query "
        "(model: inner product of embeddings; BoW: cosine); reports mean P@k and mean uMAP "
        "(unnormalised AP over the first 1000). Index form (--task): see below.",
        epilog=textwrap.dedent("""\
            examples:
              in-memory form:
              mathsearch eval retrieval --queries q.json --relevance r.json \\
                  --corpus ../shared/data/hepth2003/*.txt --format hepth
              mathsearch eval retrieval --queries q.json --relevance r.json --corpus eq.txt \\
                  --format hepth --checkpoint runs/gcn/checkpoint.pt --k 10 --json
            """)
        + INDEX_EXAMPLES,
        formatter_class=raw,
    )
    retrieval.add_argument("--queries", metavar="Q", help="queries JSON (in-memory form)")
    retrieval.add_argument("--relevance", metavar="R", help="relevance JSON (in-memory form)")
    retrieval.add_argument(
        "--corpus", nargs="+", metavar="SRC", help="sources of the corpus (in-memory form)"
    )
    _corpus_options(retrieval)
    retrieval.add_argument("--k", type=positive_int, default=10, help="P@k cut-off (10)")
    _common(retrieval, checkpoint_required=False)
    add_index_options(retrieval)
    from mathsearch.cli.families import register_evals

    register_evals(kinds)


def run_eval(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch eval``; 0 on success, 1 with a one-line reason otherwise."""
    from mathsearch.cli.families import eval_module

    plugin = eval_module(args)
    if plugin is not None:
        return int(plugin.run(args))
    if args.eval_command == "retrieval":
        if args.task:  # the index form: no torch, the work is in opensearch/
            from mathsearch.evaluation.held_out import held_out_papers, validation_papers

            return run_index_form(args, held_out=held_out_papers, validation=validation_papers)
        missing = [
            flag
            for flag, value in (
                ("--queries", args.queries), ("--relevance", args.relevance),
                ("--corpus", args.corpus),
            )
            if not value
        ]  # fmt: skip
        if missing:
            return fail(
                f"eval retrieval needs {', '.join(missing)} (in-memory form) or --task "
                "same-document|equivalence|wildcard (index form)"
            )
    from mathsearch.encoders.corpus import CorpusError
    from mathsearch.encoders.eval_inputs import EvalInputError
    from mathsearch.encoders.evaluation import EvaluationError

    errors: tuple[type[Exception], ...] = (CorpusError, EvaluationError, EvalInputError)
    if args.eval_command == "ranking" or args.checkpoint:
        try:
            from mathsearch.encoders.checkpoints import CheckpointError
            from mathsearch.encoders.gcn import GCNConfigError
            from mathsearch.encoders.graph_data import EncoderInputError
            from mathsearch.encoders.sampler import SamplerError
        except ImportError as exc:
            sys.stderr.write(
                f"mathsearch: error: a model needs the train extra (torch, torch-geometric): "
                f"{exc}; pip install 'mathsearch[train]'\n"
            )
            return 1
        from mathsearch.export.errors import ModelCardError, ModelMismatchError

        errors = (*errors, CheckpointError, GCNConfigError, EncoderInputError, SamplerError)
        errors = (*errors, ModelCardError, ModelMismatchError)
    runners = {"ranking": _ranking, "knn-accuracy": _knn, "retrieval": _retrieval}
    caught: tuple[type[Exception], ...] = (*errors, IndexerError, OSError)
    try:
        report = runners[args.eval_command](args)
    except caught as exc:
        sys.stderr.write(f"mathsearch: error: {exc}\n")
        return 1
    if args.json:
        emit(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


# --- the runs ----------------------------------------------------------------------------------


def _device(name: str) -> str:
    from mathsearch.encoders.eval_inputs import EvalInputError
    from mathsearch.encoders.torch_setup import resolve_device

    try:
        return resolve_device(name)
    except ValueError as exc:
        raise EvalInputError(str(exc)) from exc


def _vocabulary(args: argparse.Namespace) -> Any:
    from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

    return Vocabulary.load(args.vocabulary) if args.vocabulary else default_vocabulary()


def _model(args: argparse.Namespace, vocabulary: Any) -> tuple[Any, dict[str, Any], str]:
    """(model or None, checkpoint metadata, device)."""
    if not args.checkpoint:
        return None, {}, "cpu"
    from mathsearch.export.eval_runs import load_model_checked

    device = _device(args.device)
    model, metadata = load_model_checked(args.checkpoint, vocabulary, device)
    return model, metadata, device


def _cache_dir(args: argparse.Namespace) -> Path | None:
    """``--cache-dir``, else the cache ``train gcn`` wrote beside the checkpoint (OUT/cache)."""
    if args.no_cache:
        return None
    if args.cache_dir:
        return Path(args.cache_dir)
    if not args.checkpoint:
        return None
    from mathsearch.encoders.checkpoints import run_dir

    return run_dir(args.checkpoint) / "cache"


def _corpus(
    args: argparse.Namespace, sources: list[str], featuriser: Any, limit: int | None
) -> Any:
    from mathsearch.encoders.corpus import EquationCorpus
    from mathsearch.encoders.eval_inputs import EvalInputError

    missing = [source for source in sources if not Path(source).exists()]
    if missing:
        raise EvalInputError(f"source {missing[0]} does not exist")
    cache = _cache_dir(args)
    if cache is None:
        corpus = EquationCorpus.from_sources(sources, args.format, limit, featuriser=featuriser)
    else:
        corpus = EquationCorpus.cached(sources, args.format, cache, limit, featuriser=featuriser)
    if len(corpus) == 0:
        failed = sum(corpus.failures.values())
        raise EvalInputError(
            f"no equation featurised from {len(sources)} source(s) ({failed} failed)"
        )
    return corpus


def _card_metadata(path: str) -> dict[str, Any]:
    """A checkpoint's split and configuration as a model card records them."""
    from mathsearch.runtime.model_card import load_card

    training = load_card(path).training
    config = dict(training.get("config") or {})
    return {
        "train_config": config,
        "model_config": config.get("model"),
        "split": training.get("split") or config.get("split"),
        "step": training.get("step"),
    }


def _ranking(args: argparse.Namespace) -> dict[str, Any]:
    from mathsearch.encoders.eval_inputs import EvalInputError, split_settings
    from mathsearch.encoders.sampler import holdout_triplets
    from mathsearch.export.eval_runs import eval_ranking, untrained_model
    from mathsearch.indexer.parse import Featuriser

    vocabulary = _vocabulary(args)
    if not args.checkpoint and not args.onnx:
        raise EvalInputError("eval ranking needs --checkpoint CKPT or --onnx MODEL.onnx")
    model, metadata, device = _model(args, vocabulary)
    if model is None:  # --onnx only: the card of the first model says how it was trained
        metadata = _card_metadata(args.onnx[0])
        device = _device(args.device)
    split = split_settings(metadata, args.test_fraction, args.split_seed, args.limit)
    with Featuriser(vocabulary) as featuriser:
        corpus = _corpus(args, args.sources, featuriser, split["limit"])
    _, corpus_test = corpus.split_by_paper(float(split["test_fraction"]), int(split["seed"]))
    train_seed = int((metadata.get("train_config") or {}).get("seed", 0))
    seed = train_seed if args.seed is None else args.seed
    triplets = holdout_triplets(corpus_test, args.triplets, [seed, 5])
    models = {"model": model} if model is not None else {}
    if metadata.get("model_config"):
        models["untrained"] = untrained_model(metadata, device)
    for path in args.onnx:
        from mathsearch.runtime.gcn_session import GcnSession

        models[f"onnx:{Path(path).name}"] = GcnSession(path, vocab_hash=vocabulary.content_hash)
    report = eval_ranking(
        corpus_test, triplets, models, device=device, progress=not args.no_progress
    )
    return {
        "command": "ranking",
        "checkpoint": str(args.checkpoint) if args.checkpoint else None,
        "step": metadata.get("step"),
        "split": split,
        "triplet_seed": seed,
        "corpus": corpus.summary(),
        **report,
    }


def _knn(args: argparse.Namespace) -> dict[str, Any]:
    from mathsearch.encoders.eval_inputs import load_categories
    from mathsearch.export.eval_runs import eval_knn
    from mathsearch.indexer.parse import Featuriser

    categories = load_categories(args.categories)
    vocabulary = _vocabulary(args)
    model, metadata, device = _model(args, vocabulary)
    with Featuriser(vocabulary) as featuriser:
        report = eval_knn(
            categories, featuriser, model, device=device, progress=not args.no_progress
        )
    return {
        "command": "knn-accuracy",
        "checkpoint": args.checkpoint,
        "step": metadata.get("step"),
        **report,
    }


def _retrieval(args: argparse.Namespace) -> dict[str, Any]:
    from mathsearch.encoders.eval_inputs import load_queries, load_relevance
    from mathsearch.export.eval_runs import eval_retrieval
    from mathsearch.indexer.parse import Featuriser

    queries = load_queries(args.queries)
    relevance = load_relevance(args.relevance)
    vocabulary = _vocabulary(args)
    model, metadata, device = _model(args, vocabulary)
    with Featuriser(vocabulary) as featuriser:
        corpus = _corpus(args, args.corpus, featuriser, args.limit)
        report = eval_retrieval(
            queries,
            relevance,
            corpus,
            featuriser,
            model,
            k=args.k,
            device=device,
            progress=not args.no_progress,
        )
    return {
        "command": "retrieval",
        "checkpoint": args.checkpoint,
        "step": metadata.get("step"),
        **report,
    }


# --- plain output ------------------------------------------------------------------------------


def _print(report: dict[str, Any]) -> None:
    command, scores = report["command"], report["scores"]
    if command == "ranking":
        split = report["split"]
        emit(
            f"hold-out ranking score: {report['triplets']} triplets on {report['test_equations']} "
            f"equations of {report['test_papers']} test papers (test fraction "
            f"{split['test_fraction']} from {split['test_fraction_from']}, split seed "
            f"{split['seed']} from {split['seed_from']}); checkpoint step {report['step']}"
        )
        width = max(10, *(len(name) for name in scores))
        emit(f"  {'encoder':<{width}} {'ranking':>8} {'+-Thm5.1':>9} {'+-eq.9':>8}  similarity")
        for name, entry in scores.items():
            emit(
                f"  {name:<{width}} {entry['ranking_score']:>8.4f} {entry['bound_95']:>9.4f} "
                f"{entry['bound_95_sampled']:>8.4f}  {entry['similarity']}"
            )
        emit(f"  95% widths; eq. 9 with greedy chromatic number {report['chromatic_number']}")
        return
    if command == "knn-accuracy":
        emit(
            f"{report['featurised']} of {report['formulas']} formulas in "
            f"{report['categories']} categories featurised"
        )
        emit(f"  {'encoder':<10} {'1-NN acc':>8} {'ranking':>8}  similarity")
        for name, entry in scores.items():
            emit(
                f"  {name:<10} {entry['one_nn_accuracy']:>8.4f} "
                f"{entry['loo_ranking_score']:>8.4f}  {entry['similarity']}"
            )
        for failure in report["failures"]:
            emit(f"  not featurised: {failure['id']} ({failure['stage']}/{failure['reason']})")
        return
    emit(
        f"{report['queries']} judged queries over {report['corpus_equations']} equations "
        f"({report['relevant_ids_not_in_corpus']} of {report['relevant_ids']} relevant ids "
        f"not in the corpus, {len(report['query_failures'])} queries not featurised)"
    )
    k = report["k"]
    emit(f"  {'encoder':<10} {f'P@{k}':>8} {'uMAP':>9}  similarity")
    for name, entry in scores.items():
        emit(
            f"  {name:<10} {entry['precision_at_k']:>8.4f} {entry['umap']:>9.4f}  "
            f"{entry['similarity']}"
        )
    for failure in report["query_failures"]:
        emit(f"  not featurised: {failure['id']} ({failure['stage']}/{failure['reason']})")
