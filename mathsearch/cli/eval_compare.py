"""``mathsearch eval compare``: TREC runs against a baseline run, topic by topic (paired t-test).

Plug-in of :mod:`mathsearch.cli.families` (``register`` / ``run``; no torch, no cluster). Each
run is evaluated against the qrels (:func:`mathsearch.evaluation.ir_metrics.evaluate`: judged
topics only, a topic a run misses scores 0) on the judged topics that at least one run ranks (a
qrels file often judges more topics than the runs ask, such as the tuning half of ``eval
retrieval``; ``--all-topics`` keeps them, scoring 0) and compared with the first run, or
``--baseline``, by the two-tailed paired t-test of :mod:`mathsearch.evaluation.paired_test`.
With ``--group-separator`` the topics whose ids share the part before it (``PAPER#3`` and
``PAPER#7``) form one group, and the same test runs over the groups' mean differences too
(``paired.by_group`` in the JSON, as in ``eval retrieval``'s report.json). It reads the runs
that ``mathsearch tune`` and ``mathsearch eval retrieval`` write, or any other system's TREC
runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.core.errors import EvaluationError

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]


def register(kinds: Any) -> None:
    """Add ``eval compare``."""
    parser = kinds.add_parser(
        "compare",
        help="compare TREC runs with a baseline run, topic by topic (paired t-test)",
        description="Evaluate each TREC run against the qrels and compare it with the "
        "baseline run (the first, or --baseline) on the same topics: the mean of --metric, its "
        "Hoeffding width, the mean per-topic difference to the baseline, its 95% interval and "
        "p of the two-tailed paired t-test, and the topics won / lost. --group-separator adds "
        "the same test over groups of topics (e.g. the papers of `eval retrieval` ids PAPER#n).",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval compare --qrels eval-sd/qrels.txt eval-sd/runs/bm25.txt \\
                  eval-sd/runs/rescore.txt eval-sd/runs/default.txt
              mathsearch eval compare --qrels qrels.txt runs/*.txt --baseline runs/bm25.txt \\
                  --metric MAP --group-separator '#' --json
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="TREC run files")
    parser.add_argument("--qrels", required=True, metavar="QRELS", help="TREC qrels")
    parser.add_argument(
        "--baseline", metavar="RUN", help="the run to compare with (default: the first RUN)"
    )
    parser.add_argument("--metric", default="nDCG@10", help="measure (default nDCG@10)")
    parser.add_argument(
        "--group-separator",
        metavar="SEP",
        help="also test by group: a topic's group is its id up to SEP (e.g. '#')",
    )
    parser.add_argument(
        "--all-topics",
        action="store_true",
        help="evaluate every judged topic of the qrels, also those no run ranks (they score 0)",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def compare_runs(
    qrels_path: str | Path,
    run_paths: list[str],
    *,
    baseline: str | None = None,
    metric: str = "nDCG@10",
    group_separator: str | None = None,
    all_topics: bool = False,
) -> dict[str, Any]:
    """The comparison as JSON-ready data (see the module docstring).

    Raises:
        EvaluationError: unreadable or malformed files, an unknown measure, or runs that rank
            no judged topic. A ``baseline`` not among ``run_paths`` is added as the first run.
    """
    from mathsearch.evaluation.ir_metrics import evaluate
    from mathsearch.evaluation.paired_test import compare_per_topic
    from mathsearch.evaluation.trec_files import read_qrels, read_run

    paths = list(dict.fromkeys([*([baseline] if baseline else []), *run_paths]))
    if baseline is not None and baseline not in run_paths:
        logger.info("the baseline %s is not among the runs: added", baseline)
    judged = read_qrels(qrels_path)
    runs = {path: read_run(path) for path in paths}
    asked = set().union(*(run.keys() for run in runs.values()))
    qrels = judged if all_topics else {qid: docs for qid, docs in judged.items() if qid in asked}
    if not qrels:
        raise EvaluationError(f"no run ranks a topic of {qrels_path}: are these the right files?")
    evaluations = {path: evaluate(qrels, run, [metric]) for path, run in runs.items()}
    base_path = paths[0]
    base = evaluations[base_path]
    groups = (
        {qid: qid.split(group_separator, 1)[0] for qid in base.per_topic}
        if group_separator
        else None
    )
    rows: list[dict[str, Any]] = []
    for path in paths:
        evaluation = evaluations[path]
        row: dict[str, Any] = {
            "run": path,
            "mean": evaluation.means[metric],
            "confidence": evaluation.confidence[metric],
            "topics": evaluation.topics,
            "missing_topics": len(evaluation.missing),
        }
        if path != base_path and evaluation.topics >= 2:
            pair = (evaluation.per_topic, base.per_topic, metric)
            row["paired"] = compare_per_topic(*pair).to_dict()
            if groups is not None:
                row["paired"]["by_group"] = compare_per_topic(*pair, groups=groups).to_dict()
        rows.append(row)
    return {
        "qrels": str(qrels_path),
        "metric": metric,
        "baseline": base_path,
        "test": "two-tailed paired t-test",
        "group_separator": group_separator,
        "groups": len(set(groups.values())) if groups is not None else None,
        "qrels_topics_left_out": len(judged) - len(qrels),
        "runs": rows,
    }


def markdown(report: dict[str, Any]) -> str:
    """The comparison as a Markdown table."""
    from mathsearch.evaluation.retrieval_report import paired_cells, paired_header

    grouped = report["groups"] is not None
    header, rule = paired_header("group" if grouped else None)
    lines = [f"| run | {report['metric']} | ± |{header}", f"|---|---:|---:|{rule}"]
    for row in report["runs"]:
        width = "-" if row["confidence"] is None else f"{row['confidence']:.4f}"
        cells = f"| {row['run']} | {row['mean']:.4f} | {width} |"
        paired = row.get("paired")
        if paired is None:
            cells += " baseline | | | |" + (" | |" if grouped else "")
        else:
            cells += paired_cells(paired)
        lines.append(cells)
    topics = report["runs"][0]["topics"]
    groups = f" in {report['groups']} groups" if grouped else ""
    left = report["qrels_topics_left_out"]
    unasked = f" ({left} judged topics no run ranks left out)" if left else ""
    lines += [
        "",
        f"{topics} judged topics{groups}{unasked}; difference = run - {report['baseline']}; "
        "`*`: the 95% interval excludes 0 (two-tailed paired t-test).",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Handler of ``eval compare``; 0 on success, 1 with a one-line reason otherwise."""
    if not args.baseline and len(args.runs) < 2:
        return fail("eval compare needs at least two runs (the first is the baseline)")
    try:
        report = compare_runs(
            args.qrels, args.runs, baseline=args.baseline, metric=args.metric,
            group_separator=args.group_separator, all_topics=args.all_topics,
        )  # fmt: skip
    except (EvaluationError, OSError) as exc:
        return fail(str(exc))
    emit(json.dumps(report, indent=2) if args.json else markdown(report))
    return 0
