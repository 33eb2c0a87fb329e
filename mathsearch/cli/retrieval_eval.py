"""The index form of ``mathsearch eval retrieval`` (``--task``): options, handler, output.

``mathsearch.cli.eval`` registers these options on its ``retrieval`` parser with
:func:`add_index_options` and hands ``--task`` runs to :func:`run_index_form`, before anything
that would load torch. The work is in :mod:`mathsearch.evaluation.relevance_sets` (the relevance
data) and
:mod:`mathsearch.evaluation.retrieval_eval` (index, tune, test, pya0, report).

Example::

    mathsearch eval retrieval --task same-document -o eval-sd --papers 100 --topics 200
    mathsearch eval retrieval --task wildcard --held-out -o eval-wild --topics 200
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from mathsearch.cli.common import emit, fail, positive_int

logger = logging.getLogger(__name__)

__all__ = ["INDEX_EXAMPLES", "add_index_options", "run_index_form"]

#: The tasks whose collection is hep-th papers (--papers, --held-out, --validation).
PAPER_TASKS = ("same-document", "wildcard")
#: --topics unless given: in all (same-document, wildcard), per SemVec set (equivalence).
DEFAULT_TOPICS = {"same-document": 200, "equivalence": 20, "wildcard": 100}

INDEX_EXAMPLES = """\
  index form (real relevance data, every ranking mode against Approach Zero):
  mathsearch eval retrieval --task same-document -o eval-sd --papers 100 --topics 200
  mathsearch eval retrieval --task same-document --held-out -o eval-sd-ho --topics 800 \\
      --no-pya0   (about 400 test topics: every interval half as wide, 4x the tuning time)
  mathsearch eval retrieval --task equivalence -o eval-eq --topics 30 \\
      --sets boolean10,poly8,simplepoly8 --pya0-dir /dev/shm/pya0-eq
  mathsearch eval retrieval --task equivalence -o eval-eq-s2s --encoders seq2seq \\
      --index mathsearch-eval-equivalence-seq2seq   (every mode over the seq2seq vectors)
  mathsearch eval retrieval --task same-document --validation -o eval-sd-v7v8 \\
      --encoders gcn,export/models/gcn-v8.onnx --no-pya0   (both graph CNNs' fields fused)
  M=export/models; mathsearch eval retrieval --task same-document --held-out -o eval-sd-ho-4f \\
      --topics 800 --encoders gcn,$M/gcn-v8.onnx,$M/gcn-v9.onnx,$M/gcn-v10.onnx --no-pya0
      (four graph CNNs' fields; runs: docs/research/2026-12-06-evaluation-record.md)
  mathsearch eval retrieval --task same-document --validation -o eval-sd-v7 --topics 800 \
      --no-rerank --no-pya0   (the first stage alone, without the default profile's rerank)
  mathsearch eval retrieval --task same-document -o eval-small --papers 10 --topics 20 \\
      --grid mode=fusion,rescore alpha=0.3,0.7 --no-pya0 --json
  mathsearch eval retrieval --task wildcard --held-out -o eval-wild --topics 200
      (patterns with ?x variables made from the held-out papers' equations, relevant = every
      equation that unifies with one; recall@10 and the source's rank beside Approach Zero)
"""


def add_index_options(parser: argparse.ArgumentParser) -> None:
    """The ``--task`` options (the in-memory form's options stay as they are)."""
    group = parser.add_argument_group(
        "index form (--task)",
        textwrap.dedent("""\
            Build topics and qrels from real data, index the collection into
            <prefix>-eval-<task> with the default model (reused when unchanged), tune on half
            the topics (split by paper/class) with the grid of `mathsearch tune`, and compare
            BM25, kNN, rescore, knn-rescore, fusion, rrf (default parameters), the tuned best,
            Approach Zero (pya0) and a random ranking on the other half. Writes
            collection.jsonl, topics*.jsonl, qrels.txt, runs/*.txt, tune/, report.json and
            report.md to -o DIR."""),
    )
    group.add_argument(
        "--task",
        choices=("same-document", "equivalence", "wildcard"),
        help="same-document: hep-th, relevant = the other equations of the query's paper; "
        "equivalence: SemVec, relevant = the other members of the query's class; wildcard: "
        "hep-th, a query is a pattern made from one equation by replacing 1-3 sub-expressions "
        "with variables (?x), relevant = every equation that unifies with it (exact)",
    )
    group.add_argument("-o", "--out", metavar="DIR", help="report folder (required with --task)")
    group.add_argument(
        "--papers", type=positive_int, default=100, help="same-document / wildcard papers (100)"
    )
    group.add_argument(
        "--topics",
        type=positive_int,
        help="topics: in all for same-document (200) and wildcard (100), per SemVec set for "
        "equivalence (20); 4x the topics halve the widths and intervals and take 4x as long to "
        "tune",
    )
    group.add_argument("--seed", type=int, default=0, help="papers, topics and split seed (0)")
    group.add_argument(
        "--held-out",
        action="store_true",
        help="same-document, wildcard: draw only papers the default model never trained on (its "
        "card's paper split of ../shared/data/hepth2003, reproduced)",
    )
    group.add_argument(
        "--validation",
        action="store_true",
        help="same-document, wildcard: draw only the default model's validation papers "
        "(neither trained on nor held out; recorded by `train gcn --shared-data`): where "
        "search defaults are tuned",
    )
    group.add_argument(
        "--source",
        action="append",
        metavar="FILE",
        help="hep-th record file (repeatable; default ../shared/data/hepth2003/equation.txt)",
    )
    group.add_argument(
        "--semvec", metavar="DIR", help="SemVec sets folder (default ../shared/data/semvec)"
    )
    group.add_argument(
        "--sets",
        help="comma-separated SemVec validation sets (default boolean10, largeBoolean5, "
        "largeSimpleBoolean5, poly8, simpleBoolean10, simplepoly8)",
    )
    group.add_argument("--index", help="eval index alias (default <prefix>-eval-<task>)")
    group.add_argument("--depth", type=positive_int, default=100, help="results per topic (100)")
    group.add_argument(
        "--metric",
        help="tuning and paired-test metric (nDCG@10; R@10 for wildcard)",
    )
    group.add_argument(
        "--grid",
        nargs="+",
        metavar="KEY=VALUES",
        help="tuning grid as in `mathsearch tune` (default: its default grid)",
    )
    group.add_argument("--no-pya0", action="store_true", help="leave Approach Zero out")
    group.add_argument(
        "--encoders",
        metavar="E1,E2",
        help="embed the queries with these encoders (families or .onnx paths), indexed beside "
        "the default model; every mode searches their fields (several: BM25 + one kNN list per "
        "field, as `search --encoders`), e.g. seq2seq or gcn,export/models/gcn-v8.onnx",
    )
    second = group.add_mutually_exclusive_group()
    second.add_argument(
        "--rerank",
        metavar="E1,E2",
        help="every hybrid mode (and the tuning grid) re-ranks its top rerank_window hits with "
        "these encoders at query time, as `search --rerank` (default: the default profile's)",
    )
    second.add_argument(
        "--no-rerank", action="store_true", help="no second stage, whatever the profile says"
    )
    group.add_argument("--pya0-dir", metavar="DIR", help="pya0 workdir (default DIR/pya0)")


def run_index_form(
    args: argparse.Namespace,
    held_out: Callable[[], list[str]] | None = None,
    validation: Callable[[], list[str]] | None = None,
) -> int:
    """Handler of ``mathsearch eval retrieval --task``; 0, or 1 with a one-line reason.

    ``held_out`` returns the paper ids the model never trained on (``--held-out``; the caller
    knows the training corpus, this package does not); it runs after the cluster check.
    """
    if not args.out:
        return fail("eval retrieval --task needs -o DIR (the report folder)")
    stray = [
        flag
        for flag, value in (
            ("--queries", args.queries), ("--relevance", args.relevance),
            ("--corpus", args.corpus), ("--checkpoint", args.checkpoint),
        )
        if value
    ]  # fmt: skip
    if stray:
        return fail(
            f"{', '.join(stray)}: in-memory form only; the index form (--task) evaluates the "
            "default ONNX model (MATHSEARCH_MODEL) on relevance data it builds itself"
        )
    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.evaluation.pya0_peer import Pya0Error, Pya0Unavailable
    from mathsearch.evaluation.relevance_tasks import build_relevance
    from mathsearch.evaluation.retrieval_eval import (
        PYA0_HINT,
        check_cluster,
        pya0_available,
        run_retrieval_eval,
    )
    from mathsearch.evaluation.retrieval_report import report_dict
    from mathsearch.evaluation.tuning_grid import parse_grid
    from mathsearch.export.errors import ExportError, ModelCardError, ModelMismatchError
    from mathsearch.indexer.errors import IndexerError
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.settings import OpenSearchSettings

    errors: tuple[type[Exception], ...] = (
        MathsearchOpenSearchError,
        IndexerError,
        ExportError,
        ModelCardError,
    )
    errors += (ModelMismatchError, Pya0Error, OSError)
    progress = not args.no_progress and (not args.json or sys.stderr.isatty())
    if not args.no_pya0 and not pya0_available():
        return fail(f"pya0 (Approach Zero) is not importable; {PYA0_HINT}")
    try:
        grid = parse_grid(args.grid) if args.grid else None
        encoders = None
        if getattr(args, "encoders", None):
            from mathsearch.evaluation.retrieval_eval import eval_encoders
            from mathsearch.runtime.embedders import parse_encoders

            encoders = parse_encoders(args.encoders)
            # an unknown family, a missing model or two models on one field fail here, not
            # after minutes of featurisation
            eval_encoders(encoders)
        rerank = None
        if getattr(args, "rerank", None):
            from mathsearch.runtime.embedders import parse_encoders

            rerank = parse_encoders(args.rerank)
        elif getattr(args, "no_rerank", False):
            rerank = []
        settings = OpenSearchSettings.from_env()
        client = connect(settings)
        check_cluster(client, settings)  # before minutes of featurisation
        only_papers = None
        if args.held_out:
            if args.task not in PAPER_TASKS or held_out is None:
                return fail("--held-out applies to --task same-document and wildcard only")
            only_papers = held_out()
        if getattr(args, "validation", False):
            if args.task not in PAPER_TASKS or validation is None or args.held_out:
                return fail(
                    "--validation applies to --task same-document and wildcard, without --held-out"
                )
            only_papers = validation()
        data = build_relevance(
            args.task,
            sources=args.source,
            semvec_dir=args.semvec,
            papers=args.papers,
            topics=args.topics or DEFAULT_TOPICS[args.task],
            sets=[s.strip() for s in args.sets.split(",") if s.strip()] if args.sets else None,
            seed=args.seed,
            only_papers=only_papers,
        )
        result = run_retrieval_eval(
            data, args.out, index=args.index, k=args.depth, seed=args.seed, metric=args.metric,
            pya0=not args.no_pya0, pya0_dir=args.pya0_dir, grid=grid, client=client,
            settings=settings, progress=progress, encoders=encoders, rerank=rerank,
        )  # fmt: skip
    except Pya0Unavailable:
        return fail(f"pya0 (Approach Zero) is not importable; {PYA0_HINT}")
    except errors as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(_summary(report_dict(result)), indent=2))
    else:
        emit((result.out_dir / "report.md").read_text(encoding="utf-8").rstrip())
    return 0


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    """report.json without the per-topic values and known-item ranks (they stay in the
    file)."""
    systems = {
        name: {key: value for key, value in entry.items() if key != "per_topic"}
        for name, entry in report["systems"].items()
    }
    known = report.get("known_item")
    if known:
        known = {
            **known,
            "systems": {
                name: {key: value for key, value in entry.items() if key != "per_topic"}
                for name, entry in known["systems"].items()
            },
        }
    return {**report, "systems": systems, "known_item": known}
