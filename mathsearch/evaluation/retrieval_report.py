"""``report.json`` and ``report.md`` of ``mathsearch eval retrieval --task ...``.

The Markdown report holds one side-by-side table, a row per system (the six modes with their
default parameters, the tuned best, Approach Zero, the random baseline) and a column per measure
(P@5, P@10, P@100, nDCG@10, MAP, uMAP), the Hoeffding width that every mean of a [0, 1]
measure carries (KDD 2020 section 5; the same for every system, as all are evaluated on the same
test topics) and the number of topics. A second table compares every system with BM25 on the
same topics by ``metric`` (the two-tailed paired t-test of the figure-embeddings seed,
:mod:`mathsearch.evaluation.paired_test`): the mean per-topic difference, its 95% interval, p,
on how many topics the system wins and loses, and the same test over the papers' / classes'
mean differences. Topics made from one equation (the wildcard task's patterns) add a known-item
table: that equation's rank in each system's run (MRR, success@1, success@10, the median rank).
What was indexed and refused follows.

Example::

    result = run_retrieval_eval(data, "out")      # calls write_report(result) itself
    Path("out/report.md").read_text()
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mathsearch.evaluation.ir_metrics import DEFAULT_MEASURES
from mathsearch.evaluation.paired_test import DEFAULT_CONFIDENCE

if TYPE_CHECKING:  # annotations only: retrieval_eval imports this module
    from mathsearch.evaluation.retrieval_eval import RetrievalEval, SystemResult

logger = logging.getLogger(__name__)

REPORT_FORMAT = "mathsearch-retrieval-eval/1"


def report_dict(result: RetrievalEval) -> dict[str, Any]:
    """The evaluation as JSON-ready data (what ``--json`` prints)."""
    return {
        "format": REPORT_FORMAT,
        "task": result.task,
        "k": result.k,
        "seed": result.seed,
        "metric": result.metric,
        "delta": result.delta,
        "data": result.data_info,
        "split": result.split,
        "index": result.index.to_dict() if result.index else None,
        "tuned": result.tuned,
        "pya0": result.pya0,
        "seconds": result.seconds,
        "systems": {item.name: _system_dict(item, result.out_dir) for item in result.systems},
        "paired": result.paired,
        "known_item": result.known_item or None,
        "files": {
            "collection": "collection.jsonl",
            "topics": "topics.jsonl",
            "topics_tune": "topics-tune.jsonl",
            "topics_test": "topics-test.jsonl",
            "qrels": "qrels.txt",
            "tune_report": "tune/report.md",
            "markdown": "report.md",
            **({"topic_details": "topic-details.jsonl"} if result.task == "wildcard" else {}),
        },
    }


def _system_dict(item: SystemResult, out: Path) -> dict[str, Any]:
    topics = item.evaluation.topics
    return {
        "parameters": item.parameters,
        "means": item.evaluation.means,
        "confidence": item.evaluation.confidence,
        "topics": topics,
        "failed_topics": item.failures,
        "seconds": round(item.seconds, 3),
        "queries_per_s": round(topics / item.seconds, 1) if item.seconds > 0 else None,
        "run": item.run_path.relative_to(out).as_posix(),
        "per_topic": item.evaluation.per_topic,
        **({"notes": item.notes} if item.notes else {}),
    }


def markdown(result: RetrievalEval) -> str:
    """The side-by-side table and the setup, in Markdown."""
    measures = list(result.systems[0].evaluation.measures) or list(DEFAULT_MEASURES)
    lines = [
        f"# Retrieval evaluation: {result.task}",
        "",
        *_setup(result),
        "",
        "| system | " + " | ".join(measures) + " | ± | topics | failed | parameters |",
        "|---|" + "---:|" * (len(measures) + 3) + "---|",
    ]
    for item in result.systems:
        cells = [
            f"{item.evaluation.means[m]:.2f}" if m == "uMAP" else f"{item.evaluation.means[m]:.4f}"
            for m in measures
        ]
        width = next((w for w in item.evaluation.confidence.values() if w is not None), None)
        plus = "-" if width is None else f"{width:.4f}"
        params = ", ".join(f"{key}={value}" for key, value in item.parameters.items())
        lines.append(
            f"| {item.name} | " + " | ".join(cells) + f" | {plus} | {item.evaluation.topics} | "
            f"{len(item.failures)} | {params} |"
        )
    lines += _paired_table(result)
    lines += _known_item_table(result)
    lines += ["", *_notes(result)]
    return "\n".join(lines) + "\n"


def _paired_table(result: RetrievalEval) -> list[str]:
    paired, baseline = result.paired.get("systems"), result.paired.get("baseline")
    if not paired:
        return []
    level = f"{DEFAULT_CONFIDENCE:.0%}"
    unit = "class" if result.task == "equivalence" else "paper"
    first = next(iter(paired.values()))
    grouped = "by_group" in first
    lines = [
        "",
        f"Against {baseline} on the same {result.split['test']} test topics by "
        f"{result.metric}: the mean per-topic difference (system - {baseline}), its "
        f"{level} interval and p of the two-tailed paired t-test (the figure-embeddings seed's "
        "test; topics taken as independent), and the topics the system wins / loses.",
    ]
    if grouped:
        lines[-1] += (
            f" By {unit}: the same test over the {first['by_group']['n']} {unit}s' mean "
            f"differences, which does not count one {unit}'s topics as independent evidence."
        )
    header, rule = paired_header(unit if grouped else None)
    lines += ["", f"| system |{header}", f"|---|{rule}"]
    lines += [f"| {name} |{paired_cells(item)}" for name, item in paired.items()]
    lines.append("")
    lines.append(f"`*`: the interval excludes 0 (p < {1 - DEFAULT_CONFIDENCE:.2f}).")
    return lines


def _known_item_table(result: RetrievalEval) -> list[str]:
    """Each system's rank of the equation a topic was made from (its known item)."""
    table = result.known_item
    if not table or not table.get("systems"):
        return []
    depth = table["depth"]
    first = next(iter(table["systems"].values()))
    lines = [
        "",
        f"Known item: the equation each test topic was made from, in each system's run "
        f"({result.k} deep): how often it is ranked, MRR (1/rank, 0 when not ranked), "
        f"success@1 and @{depth}, and the median rank where ranked; ± is the Hoeffding "
        f"half-width of MRR and success over {first['topics']} topics.",
        "",
        f"| system | ranked | MRR | S@1 | S@{depth} | median rank | ± |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, entry in table["systems"].items():
        if not entry.get("topics"):
            continue
        median = "-" if entry["median_rank"] is None else f"{entry['median_rank']:g}"
        lines.append(
            f"| {name} | {entry['found']} / {entry['topics']} | {entry['MRR']:.4f} | "
            f"{entry['S@1']:.4f} | {entry[f'S@{depth}']:.4f} | {median} | {entry['width']:.4f} |"
        )
    return lines


def paired_header(group: str | None = None) -> tuple[str, str]:
    """The Markdown header and rule cells that :func:`paired_cells` fills; with ``group``
    (e.g. ``"paper"``) also the by-group interval and p."""
    level = f"{DEFAULT_CONFIDENCE:.0%}"
    header = f" difference | {level} interval | p | wins / losses |"
    rule = "---:|---|---:|---:|"
    if group is not None:
        header += f" by {group}: {level} interval | p |"
        rule += "---|---:|"
    return header, rule


def paired_cells(entry: dict[str, Any]) -> str:
    """The Markdown cells of one paired comparison (``PairedComparison.to_dict()``, optionally
    with ``by_group``): ``difference | interval | p | wins / losses |`` and, by group,
    ``interval | p |``; ``*`` marks an interval that excludes 0."""
    mark = " *" if entry["significant"] else ""
    cells = (
        f" {entry['mean_difference']:+.4f}{mark} | {_interval(entry)} | "
        f"{entry['p_value']:.4f} | {entry['wins']} / {entry['losses']} |"
    )
    group = entry.get("by_group")
    if group is not None:
        mark = " *" if group["significant"] else ""
        cells += f" {_interval(group)}{mark} | {group['p_value']:.4f} |"
    return cells


def _interval(item: dict[str, Any]) -> str:
    return f"[{item['ci_low']:+.4f}, {item['ci_high']:+.4f}]"


def _setup(result: RetrievalEval) -> list[str]:
    data, split = result.data_info, result.split
    index = result.index
    if result.task == "wildcard":
        relevant = data.get("relevant") or {}
        variables = ", ".join(f"{n}: {c}" for n, c in (data.get("variables") or {}).items())
        what = (
            f"{data.get('equations')} parseable equations of {data.get('papers')} hep-th "
            f"papers ({data.get('not_parseable')} refused by the featurisation); a topic is a "
            "pattern made from one equation by replacing 1-3 sub-expressions with query "
            f"variables (topics by variables {variables}; {data.get('repeated_variables')} "
            "with a repeated name), relevant is every equation that unifies with it as a "
            f"whole, by brute force ({relevant.get('mean')} on average, median "
            f"{relevant.get('median')}, max {relevant.get('max')}; {relevant.get('only_source')} "
            "topics match their source alone)"
        )
    elif result.task == "same-document":
        what = (
            f"{data.get('equations')} parseable equations of {data.get('papers')} hep-th "
            f"papers ({data.get('not_parseable')} refused by the featurisation); a topic is "
            "one equation, relevant are the other equations of its paper"
        )
    else:
        what = (
            f"{data.get('equations')} expressions in {data.get('classes')} classes of the "
            f"SemVec validation sets {', '.join(data.get('sets', []))}; a topic is one "
            "expression, relevant are the other members of its class"
        )
    excluded = (
        "the source equation is relevant and stays in the rankings"
        if result.task == "wildcard"
        else "the query itself is excluded from its ranking"
    )
    lines = [
        f"Collection: {what}; {excluded}.",
        f"Topics: {split['topics']} (seed {result.seed}), split by paper/class into "
        f"{split['tune']} for tuning and {split['test']} for testing; every row is the test "
        f"half, {result.k} results deep.",
    ]
    if index is not None:
        state = "reused" if index.reused else f"built in {index.seconds:.1f} s"
        searched = (
            f"; kNN searches `{index.searched_field}` (model `{index.searched_model}`)"
            if index.searched_field
            else ""
        )
        lines.append(
            f"Index `{index.alias}` ({index.equations} equations, model `{index.model}`, "
            f"field `{index.vector_field}`{searched}; {state})."
        )
    tuned = result.tuned
    if tuned:
        lines.append(
            f"Tuned: the best of {tuned['configurations']} configurations of the default "
            f"grid by {result.metric} on the tuning half ({tuned['tuning_value']:.4f}): "
            f"`{tuned['configuration']}`."
        )
    lines.append(
        f"± is the Hoeffding half-width of each mean of a [0, 1] measure at probability "
        f"{1 - result.delta:.2f} (KDD 2020 section 5); uMAP (the seed's unnormalised AP, "
        f"summed over the first {result.k} results) has no width."
    )
    if result.task == "wildcard":
        lines.append(
            "Every row of ours is a wildcard search: the mode's first stage on the pattern "
            "made neutral (the default row: BM25 over the tokens without a variable, as users "
            "get it), then the structural check (unification) re-ranks its window; "
            "Approach Zero gets each pattern in its `\\qvar{x}` syntax."
        )
    return lines


def _notes(result: RetrievalEval) -> list[str]:
    notes = []
    if result.pya0:
        p = result.pya0
        notes.append(
            f"Approach Zero (pya0 0.3.7): {p['indexed']} of {p['equations']} equations indexed "
            f"({p['rejected']} refused by its parser) in {p['index_seconds']} s"
            f"{' (reused)' if p['reused'] else ''}; {p['unparsed_topics']} test queries its "
            f"parser refuses (they find nothing), {p['failed_topics']} failed, "
            f"{p['crashes']} crashes."
        )
    else:
        notes.append("Approach Zero: not run (--no-pya0).")
    notes.append("random: a seeded random ranking of the collection (the trivial baseline).")
    seconds = ", ".join(f"{name} {value} s" for name, value in result.seconds.items())
    notes.append(f"Wall time: {seconds}.")
    return notes


def write_report(result: RetrievalEval) -> dict[str, Path]:
    """Write ``report.json`` and ``report.md`` into ``result.out_dir``; returns their paths."""
    out = result.out_dir
    files = {"json": out / "report.json", "markdown": out / "report.md"}
    files["json"].write_text(json.dumps(report_dict(result), indent=2) + "\n", encoding="utf-8")
    files["markdown"].write_text(markdown(result), encoding="utf-8")
    logger.info("retrieval report in %s", out)
    return files
