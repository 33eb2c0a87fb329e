"""``mathsearch eval exact-knn``: brute-force cosine kNN of exported models on real relevance data.

Plug-in of :mod:`mathsearch.cli.families` (``register`` / ``run``; no torch, no cluster). The
relevance set is the one ``eval retrieval --task`` builds (same ``--papers``, ``--topics``,
``--seed``, ``--held-out`` / ``--validation``); each ``--onnx`` model embeds the collection in ONNX
Runtime and ranks it exactly (:mod:`mathsearch.evaluation.exact_knn`), beside the BoW cosine of the
same featurisation. It is how encoders are compared before one is indexed: the training sweep of
docs/research/2026-12-06-gcn-training-record.md chose its model on ``--validation`` this way.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mathsearch.cli.common import RAW_HELP, emit, fail, positive_int
from mathsearch.core.errors import EvaluationError
from mathsearch.indexer.errors import IndexerError

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]


def register(kinds: Any) -> None:
    """Add ``eval exact-knn``."""
    parser = kinds.add_parser(
        "exact-knn",
        help="brute-force cosine kNN of exported models on the retrieval tasks (no cluster)",
        description="Build the relevance set of `eval retrieval --task` (same papers, topics "
        "and seed), embed its collection with each --onnx model, rank it by exact cosine "
        "similarity to each topic's own vector and print nDCG@10, P@10, P@100 and MAP on every "
        "topic and on the test half the index form reports, beside the BoW cosine baseline.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval exact-knn --task same-document --validation \\
                  --onnx models/gcn-v5.onnx --onnx models/gcn-v4.onnx
              mathsearch eval exact-knn --task same-document --held-out \\
                  --onnx models/gcn-v5.onnx --json
              mathsearch eval exact-knn --task equivalence --topics 40 \\
                  --onnx models/seq2seq-v1.onnx
              mathsearch eval exact-knn --task same-document --validation --fragments \\
                  --onnx models/gcn-v5.onnx              # part of an equation finds it
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "--task", choices=("same-document", "equivalence"), default="same-document",
        help="relevance data (default same-document)",
    )  # fmt: skip
    parser.add_argument(
        "--onnx", action="append", default=[], metavar="MODEL.onnx",
        help="an exported model (card beside it); repeatable; none: BoW only",
    )  # fmt: skip
    side = parser.add_mutually_exclusive_group()
    side.add_argument(
        "--held-out", action="store_true", help="only papers the default model never trained on"
    )
    side.add_argument(
        "--validation", action="store_true",
        help="only the default model's validation papers (for choosing models)",
    )  # fmt: skip
    parser.add_argument("--papers", type=positive_int, default=100, help="papers drawn (100)")
    parser.add_argument("--topics", type=positive_int, default=200, help="topics drawn (200)")
    parser.add_argument("--seed", type=int, default=0, help="draw and split seed (0)")
    parser.add_argument("--source", nargs="+", metavar="FILE", help="hep-th record files")
    parser.add_argument("--semvec", metavar="DIR", help="SemVec folder (equivalence)")
    parser.add_argument("--depth", type=positive_int, default=100, help="results per topic")
    parser.add_argument("--no-bow", action="store_true", help="leave out the BoW baseline")
    parser.add_argument(
        "--fragments", action="store_true",
        help="query with a fragment of each topic (a run of a row's children, as MathML) and "
        "score the rank of its own equation: RR@10 and S@1 (mathsearch.evaluation."
        "fragment_queries)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``eval exact-knn``; 0 on success, 1 with a one-line reason otherwise."""
    from mathsearch.export.errors import ExportError, ModelCardError, ModelMismatchError

    errors = (EvaluationError, IndexerError, ExportError, ModelCardError, ModelMismatchError)
    try:
        report = _report(args)
    except (*errors, OSError) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(report, indent=2))
    else:
        emit(_table(report))
    return 0


def _report(args: argparse.Namespace) -> dict[str, Any]:
    from mathsearch.evaluation.exact_knn import exact_knn_report
    from mathsearch.evaluation.held_out import held_out_papers, validation_papers
    from mathsearch.evaluation.relevance_sets import featuriser_filter
    from mathsearch.evaluation.relevance_tasks import build_relevance
    from mathsearch.evaluation.retrieval_eval import split_topics
    from mathsearch.indexer.parse import Featuriser, ParsedEquation
    from mathsearch.runtime.gcn_session import GcnSession

    if (args.held_out or args.validation) and args.task != "same-document":
        raise EvaluationError("--held-out / --validation are same-document options")
    papers = held_out_papers() if args.held_out else None
    papers = validation_papers() if args.validation else papers
    parsed: dict[str, ParsedEquation] = {}  # featurised once, kept for embedding
    with Featuriser() as featuriser:
        data = build_relevance(
            args.task,
            sources=args.source,
            semvec_dir=args.semvec,
            papers=args.papers,
            topics=args.topics,
            seed=args.seed,
            only_papers=papers,
            parseable=featuriser_filter(featuriser, keep=parsed),
        )
        fragments = _fragments(data.topics, parsed, featuriser, args.seed) if args.fragments else []
    kept = [parsed[e.eq_id] for e in data.collection]
    ids = [p.record.eq_id for p in kept]
    systems: dict[str, np.ndarray] = {}
    queries: dict[str, np.ndarray] = {}
    if not args.no_bow:
        systems["bow"] = np.stack([p.bow for p in kept]).astype(np.float32)
        if fragments:
            queries["bow"] = np.stack([p.bow for _, p in fragments]).astype(np.float32)
    seconds: dict[str, float] = {}
    for model in args.onnx:
        start = time.perf_counter()
        encoder = GcnSession(model)
        systems[Path(model).stem] = encoder.encode([p.graph for p in kept])
        if fragments:
            queries[Path(model).stem] = encoder.encode([p.graph for _, p in fragments])
        seconds[Path(model).stem] = round(time.perf_counter() - start, 2)
    _, test = split_topics(data, args.seed)
    if args.fragments:
        return _fragment_report(
            args, data, ids=ids, fragments=fragments, systems=systems, queries=queries,
            test=test, seconds=seconds,
        )  # fmt: skip
    report = exact_knn_report(data, ids, systems, test_topics=test, depth=args.depth)
    for scores in report["systems"].values():
        for half in scores.values():
            half.pop("per_topic", None)
    side = "held-out" if args.held_out else "validation" if args.validation else "any"
    return {
        "command": "exact-knn",
        "task": args.task,
        "papers": side,
        "relevance": data.info,
        "embed_seconds": seconds,
        **report,
    }


def _fragments(
    topics: Sequence[Any], parsed: dict[str, Any], featuriser: Any, seed: int
) -> list[tuple[str, Any]]:
    """(topic id, parsed fragment) for every topic a fragment could be cut from, in order."""
    from mathsearch.evaluation.fragment_queries import fragment_tree
    from mathsearch.indexer.mathml_tree import to_mathml
    from mathsearch.indexer.parse import ParsedEquation
    from mathsearch.indexer.records import EquationRecord

    rng = np.random.default_rng([seed, 17])
    records, owners = [], []
    for topic in topics:
        source = parsed.get(topic.qid)
        tree = fragment_tree(source.tree, rng) if source is not None else None
        if tree is None:
            continue
        mathml = to_mathml(tree)
        records.append(EquationRecord(topic.qid + "/fragment", "", 0, mathml=mathml))
        owners.append(topic.qid)
    out = []
    for owner, result in zip(owners, featuriser.parse_batch(records), strict=True):
        if isinstance(result, ParsedEquation):
            out.append((owner, result))
    logger.info("%d fragment queries from %d topics", len(out), len(topics))
    return out


def _fragment_report(
    args: argparse.Namespace,
    data: Any,
    *,
    ids: list[str],
    fragments: list[tuple[str, Any]],
    systems: dict[str, np.ndarray],
    queries: dict[str, np.ndarray],
    test: Sequence[Any],
    seconds: dict[str, float],
) -> dict[str, Any]:
    from mathsearch.evaluation.fragment_queries import fragment_scores, summarise_fragments

    if not fragments:
        raise EvaluationError("no fragment could be cut from the topics")
    row = {eq_id: i for i, eq_id in enumerate(ids)}
    sources = np.array([row[owner] for owner, _ in fragments])
    in_test = {t.qid for t in test}
    halves = {
        "all": np.arange(len(fragments)),
        "test": np.array([i for i, (owner, _) in enumerate(fragments) if owner in in_test]),
    }
    scores = {}
    for name, vectors in systems.items():
        per_query = fragment_scores(queries[name], vectors, sources)
        scores[name] = {half: summarise_fragments(per_query, rows) for half, rows in halves.items()}
    side = "held-out" if args.held_out else "validation" if args.validation else "any"
    return {
        "command": "exact-knn",
        "task": f"{args.task} fragments",
        "papers": side,
        "relevance": data.info,
        "equations": len(ids),
        "fragments": len(fragments),
        "examples": [p.record.mathml[:300] for _, p in fragments[:3]],
        "embed_seconds": seconds,
        "systems": scores,
    }


def _table(report: dict[str, Any]) -> str:
    if report["task"].endswith("fragments"):
        return _fragment_table(report)
    lines = [
        f"exact cosine kNN, {report['task']} ({report['papers']} papers): "
        f"{report['equations']} equations, {report['topics']} topics "
        f"({report['test_topics']} in the test half)",
        "| system | nDCG@10 all | P@10 all | nDCG@10 test | P@10 test | ± test |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, scores in report["systems"].items():
        every, test = scores["all"], scores["test"]
        lines.append(
            f"| {name} | {every['means']['nDCG@10']:.4f} | {every['means']['P@10']:.4f} | "
            f"{test['means']['nDCG@10']:.4f} | {test['means']['P@10']:.4f} | "
            f"{test['confidence']['nDCG@10']:.4f} |"
        )
    return "\n".join(lines)


def _fragment_table(report: dict[str, Any]) -> str:
    lines = [
        f"exact cosine kNN, {report['task']} ({report['papers']} papers): "
        f"{report['fragments']} fragment queries over {report['equations']} equations",
        "| system | RR@10 all | S@1 all | RR@10 test | S@1 test | ± RR@10 test |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, scores in report["systems"].items():
        every, test = scores["all"]["means"], scores["test"]
        lines.append(
            f"| {name} | {every['RR@10']:.4f} | {every['S@1']:.4f} | "
            f"{test['means']['RR@10']:.4f} | {test['means']['S@1']:.4f} | "
            f"{test['confidence']['RR@10']:.4f} |"
        )
    return "\n".join(lines)
