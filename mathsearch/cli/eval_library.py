"""``mathsearch eval library``: is a paper found by one of its equations in a library's own
enriched index? Document-level nDCG@10 of the math search against BM25 over the body text.

Plug-in of :mod:`mathsearch.cli.families` (``register(kinds)``, ``run(args)``); the work is in
:mod:`mathsearch.evaluation.library_eval`.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail, positive_int

__all__ = ["format_library_eval", "register", "run"]


def register(kinds: Any) -> None:
    """Add ``library`` to ``eval``'s sub-parsers."""
    parser = kinds.add_parser(
        "library",
        help="document-level retrieval in an enriched library index: a paper found by one of "
        "its equations (math search vs BM25 over the body)",
        description="Index the hep-th documents (../shared/data/hepth2003-documents: title + "
        "body) as a library's own index, enrich it with math.* by an inline job, and query it "
        "with one equation of each held-out paper (papers the default model never trained on); "
        "the relevant document is that paper. Reports nDCG@10, RR and R@10 with their "
        "Hoeffding widths for BM25 over the body (the LaTeX as words), the math search "
        "(fusion of math.tokens BM25 and math.vector kNN, and each alone), and both with the "
        "equation's section title as words; each against BM25 body by a paired t-test. The "
        "library index is kept and reused (--rebuild to redo it).",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval library
              mathsearch eval library --per-paper 3 --seed 1 -o eval-library --json
              mathsearch eval library --documents my-papers/ --rebuild
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument(
        "--documents", metavar="DIR", type=Path,
        help="folder of PAPERID.tex documents (default ../shared/data/hepth2003-documents)",
    )  # fmt: skip
    parser.add_argument("--per-paper", type=positive_int, default=1, help="topics per paper (1)")
    parser.add_argument("--seed", type=int, default=0, help="topic draw seed (0)")
    parser.add_argument("--index", help="library index name (default <prefix>-eval-library)")
    parser.add_argument("--rebuild", action="store_true", help="index and enrich again")
    parser.add_argument("-o", "--out", type=Path, help="write topics.json and report.json here")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch eval library``."""
    from mathsearch.core.errors import EvaluationError, MathsearchOpenSearchError
    from mathsearch.evaluation.held_out import held_out_papers
    from mathsearch.evaluation.library_eval import run_library_eval
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.settings import OpenSearchSettings

    try:
        settings = OpenSearchSettings.from_env()
        report = run_library_eval(
            connect(settings), settings, papers=held_out_papers(), documents_dir=args.documents,
            seed=args.seed, per_paper=args.per_paper, library=args.index, rebuild=args.rebuild,
            progress=not args.no_progress, out_dir=args.out,
        )  # fmt: skip
    except (EvaluationError, MathsearchOpenSearchError, OSError) as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(report, indent=2))
    else:
        emit(format_library_eval(report))
    return 0


def format_library_eval(report: dict[str, Any]) -> str:
    """The report as a table: one run a line."""
    lines = [
        f"{report['library']}: {report['documents']} documents, {report['topics']} topics from "
        f"{report['papers']} held-out papers ({report['topics_with_words']} with words), "
        f"model {report['model']}",
        f"{'run':<17} {'nDCG@10':>14} {'RR':>7} {'R@10':>6}   vs bm25-body (nDCG@10, 95% CI, p)",
    ]
    for name, run in report["runs"].items():
        means, width = run["means"], run["confidence"].get("nDCG@10") or 0.0
        versus = run.get("vs_bm25_body")
        against = (
            f"   {versus['mean_difference']:+.4f} [{versus['ci_low']:+.4f}, "
            f"{versus['ci_high']:+.4f}] p={versus['p_value']:.3g}"
            if versus
            else ""
        )
        lines.append(
            f"{name:<17} {means['nDCG@10']:.4f} ±{width:.3f} {means['RR']:>7.4f} "
            f"{means['R@10']:>6.4f}{against}"
        )
    return "\n".join(lines)
