"""``mathsearch tune`` (command-line parsing and output); the work is in
:mod:`mathsearch.evaluation.tuning` and :mod:`mathsearch.evaluation.tune_report`."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.core.errors import MathsearchOpenSearchError
from mathsearch.evaluation.ir_metrics import DEFAULT_DELTA, DEFAULT_MEASURES
from mathsearch.evaluation.tune_selection import Selection
from mathsearch.export.errors import (
    ExportError,
    ModelCardError,
    ModelMismatchError,
    RuntimeInputError,
)

logger = logging.getLogger(__name__)

__all__ = ["add_tune", "run_tune"]

#: What a missing or unusable query model raises.
MODEL_ERRORS = (ExportError, ModelCardError, ModelMismatchError, RuntimeInputError)


def add_tune(commands: Any) -> None:
    """Register ``tune`` on the subparsers."""
    parser = commands.add_parser(
        "tune",
        help="grid-search the ranking parameters against relevance judgments",
        description="Run every configuration of a parameter grid (mode; alpha; normalisation; "
        "combination; window; depth; rank constant; k) for every topic against the live "
        "index, write a TREC run per configuration, evaluate it (P@5, P@10, P@100, nDCG@10, "
        "MAP and the KDD 2020 seed's uMAP, with ir-measures; Hoeffding confidence width) and "
        "write a report folder: results.csv / results.md (best first; each configuration's "
        "difference to the best and p of the paired t-test over the same topics), "
        "plots/<metric>_vs_alpha.png, report.json and best_profile.json, which "
        "`mathsearch search --profile` and "
        "`mathsearch serve --profile` load. The baseline (by default the profile searches "
        "use now) is run beside the grid and the best is compared with it on the same topics; "
        "--select significant recommends the best only when that paired test says it is "
        "above the baseline. Topics are JSON Lines {qid, latex, text?, "
        "exclude?}; qrels are TREC 'qid 0 docid rel' lines.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch tune --topics topics.jsonl --qrels qrels.txt -o report
              mathsearch tune --topics t.jsonl --qrels q.txt --metric MAP -o report \\
                  --grid mode=fusion,rrf,rescore alpha=0.1:0.9:0.1 normalization=min_max,l2
              mathsearch tune --topics t.jsonl --qrels q.txt --grid grid.json -o report --json
              mathsearch tune --topics t.jsonl --qrels q.txt -o report --select significant
              mathsearch tune --topics t.jsonl --qrels q.txt -o report --baseline old.json
              mathsearch search 'E = mc^2' --profile report/best_profile.json

            grid keys: mode (or all), alpha, normalization, combination, window, k, depth,
            rank_constant, max_df, max_terms (0: every query token), rerank_window and
            rerank_alpha (the second stage of a profile with rerank encoders; 0: off); values
            V1,V2 or START:STOP:STEP (inclusive); each mode combines only the keys it uses.
            A key left out keeps the shipped default profile's value for max_df, max_terms,
            rerank_window and rerank_alpha. Default grid: every mode, alpha 0.1:0.9:0.1,
            normalization min_max,l2,z_score, combination arithmetic_mean, window 100, k 100.
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("--topics", required=True, metavar="T", help="topics (JSON Lines)")
    parser.add_argument("--qrels", required=True, metavar="R", help="judgments (TREC qrels)")
    parser.add_argument(
        "--grid",
        nargs="+",
        metavar="KEY=VALUES",
        help="the parameter grid, or one JSON file (default: see below)",
    )
    parser.add_argument(
        "--metric",
        default="nDCG@10",
        help=f"the metric that picks the best configuration (default nDCG@10; "
        f"{', '.join(DEFAULT_MEASURES)} or any ir-measures name)",
    )
    parser.add_argument(
        "--delta",
        type=float,
        default=DEFAULT_DELTA,
        help="confidence bounds hold with probability 1 - delta (default %(default)s)",
    )
    parser.add_argument("-o", "--out", required=True, metavar="REPORT_DIR", help="report folder")
    parser.add_argument("--index", help="equation index alias (default <prefix>-equations)")
    parser.add_argument("--model", help="ONNX model for the queries (default MATHSEARCH_MODEL)")
    parser.add_argument(
        "--no-read-cache",
        action="store_true",
        help="send every configuration's searches to the cluster (by default configurations "
        "share the candidate searches and stored fields already fetched in this run: the same "
        "runs, faster; each configuration's seconds then count only its own new reads)",
    )
    parser.add_argument(
        "--baseline",
        default="default",
        metavar="PROFILE",
        help="the profile to compare the best with: 'default' (the profile searches use now: "
        "MATHSEARCH_SEARCH_PROFILE or the shipped one), a profile JSON file, or 'none' "
        "(default: %(default)s); run beside the grid unless a grid point ranks the same",
    )
    parser.add_argument(
        "--select",
        choices=[s.value for s in Selection],
        default=Selection.BEST.value,
        help="what best_profile.json recommends: 'best' (the highest metric) or 'significant' "
        "(the best only if it beats the baseline in a two-tailed paired t-test over the topics, "
        "p < 0.05; else the baseline) (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print report.json")


def run_tune(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch tune``."""
    from mathsearch.evaluation.trec_files import read_qrels, read_topics
    from mathsearch.evaluation.tune_report import versus_text, write_report
    from mathsearch.evaluation.tune_selection import choose
    from mathsearch.evaluation.tuning import tune
    from mathsearch.evaluation.tuning_grid import (
        DEFAULT_GRID,
        baseline_configuration,
        expand,
        parse_grid,
    )
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.query_encoder import ModelQueryEncoder
    from mathsearch.opensearch.schema import equations_alias
    from mathsearch.opensearch.search_profile import SearchProfile
    from mathsearch.opensearch.searcher import Searcher
    from mathsearch.opensearch.settings import OpenSearchSettings

    selection = Selection(args.select)
    if selection is Selection.SIGNIFICANT and args.baseline == "none":
        return fail("--select significant compares the best with a baseline: drop --baseline none")
    try:
        configs = expand(
            parse_grid(args.grid) if args.grid else DEFAULT_GRID, base=SearchProfile.default()
        )
        baseline = None
        if args.baseline != "none":
            profile = (
                SearchProfile.default()
                if args.baseline == "default"
                else SearchProfile.load(args.baseline)
            )
            baseline = baseline_configuration(profile)
        topics = read_topics(args.topics)
        qrels = read_qrels(args.qrels)
        settings = OpenSearchSettings.from_env()
        alias = equations_alias(settings, args.index)
        searcher = Searcher(connect(settings), alias, encoder=ModelQueryEncoder(args.model))
        result = tune(
            searcher,
            topics,
            qrels,
            configs,
            out_dir=args.out,
            metric=args.metric,
            delta=args.delta,
            progress=not args.json or sys.stderr.isatty(),
            read_cache=not args.no_read_cache,
            baseline=baseline,
        )
        choice = choose(result, selection)
        files = write_report(result, topics_path=args.topics, qrels_path=args.qrels, choice=choice)
    except (MathsearchOpenSearchError, *MODEL_ERRORS) as exc:
        return fail(str(exc))
    if args.json:
        emit(files["report"].read_text(encoding="utf-8").rstrip())
        return 0
    best = result.best
    width = best.evaluation.confidence.get(result.metric)
    plus = f" ± {width:.4f}" if width is not None else ""
    lines = [
        f"{len(result.results)} configurations x {len(topics)} topics "
        f"({result.topics} judged) in {result.seconds:.1f} s",
        f"best by {result.metric}: {best.config.name} = {best.score(result.metric):.4f}{plus}",
    ]
    if choice.baseline is not None:
        line = (
            f"baseline ({result.baseline_label}): {choice.baseline.config.name} = "
            f"{choice.baseline.score(result.metric):.4f}"
        )
        if choice.versus_baseline is not None:
            line += f"; {versus_text(choice.versus_baseline)}"
        lines.append(line)
    lines += [
        f"recommended ({choice.selection.value}: {choice.reason}): {choice.chosen.config.name}",
        f"report: {result.out_dir}/results.md, profile: {files['best_profile']}",
    ]
    emit("\n".join(lines))
    return 0
