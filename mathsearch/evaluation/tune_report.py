"""The report folder of ``mathsearch tune``: table, plots, best profile and a JSON summary.

::

    REPORT_DIR/
      results.csv            one row per configuration, best first by the chosen metric, with
                             the paired t-test of its metric against the best's (difference, p)
      results.md             the same table for people, with the confidence width
      plots/<m>_vs_alpha.png each measure against alpha: a line per mode / normalisation /
                             combination / window, modes without alpha as dashed lines
      best_profile.json      the recommended configuration as a SearchProfile (--profile of
                             search and serve): the best, or with Selection.SIGNIFICANT the
                             baseline unless the best beats it (mathsearch.evaluation.
                             tune_selection); source = {"tuned_on", "metric", "value", "report",
                             "selection", "reason", "baseline", ...}
      report.json            everything above as data (+ the best configuration's per-topic values)
      runs/<name>.txt        TREC runs (written by :func:`mathsearch.evaluation.tuning.tune`)

Plots use matplotlib's object API on the Agg canvas (no pyplot, no display, no global state).

Example::

    result = tune(searcher, topics, qrels, configs, out_dir="report")
    files = write_report(result, topics_path="topics.jsonl", qrels_path="qrels.txt")
    SearchProfile.load(files["best_profile"])
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from mathsearch.evaluation.paired_test import PairedComparison, compare_per_topic
from mathsearch.evaluation.tune_selection import Choice, choose
from mathsearch.evaluation.tuning import ConfigResult, TuneResult
from mathsearch.opensearch.search_profile import SearchProfile

logger = logging.getLogger(__name__)

REPORT_FORMAT = "mathsearch-tune-report/1"
PARAMETERS: tuple[str, ...] = ("mode", "alpha", "window", "depth", "normalization", "combination")
PARAMETERS += ("rank_constant", "k", "max_df", "max_terms")


def write_report(
    result: TuneResult,
    *,
    topics_path: str | Path,
    qrels_path: str | Path,
    choice: Choice | None = None,
) -> dict[str, Path]:
    """Write the report files into ``result.out_dir``; returns name -> path. ``choice`` is the
    configuration ``best_profile.json`` recommends (default: :func:`choose` with
    :attr:`Selection.BEST`, the best)."""
    out = result.out_dir
    out.mkdir(parents=True, exist_ok=True)
    choice = choice or choose(result)
    logger.info(
        "recommended (%s): %s - %s", choice.selection.value, choice.chosen.config.name,
        choice.reason,
    )  # fmt: skip
    against = against_best(result)
    files: dict[str, Path] = {
        "results_csv": write_csv(result, out / "results.csv", against),
        "results_md": out / "results.md",
    }
    files["results_md"].write_text(results_markdown(result, against, choice), encoding="utf-8")
    for measure in result.best.evaluation.measures:
        files[f"plot_{measure}"] = plot_vs_alpha(
            result, measure, out / "plots" / f"{measure}_vs_alpha.png"
        )
    files["best_profile"] = best_profile(result, topics_path, qrels_path, choice).save(
        out / "best_profile.json"
    )
    files["report"] = out / "report.json"
    summary = report_dict(result, topics_path, qrels_path, files, against, choice=choice)
    files["report"].write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    logger.info("tune report in %s", out)
    return files


def best_profile(
    result: TuneResult,
    topics_path: str | Path,
    qrels_path: str | Path,
    choice: Choice,
) -> SearchProfile:
    """The recommended configuration's profile (``choice``), its ``source`` saying how it was
    chosen."""
    item = choice.chosen
    source: dict[str, Any] = {
        "tuned_on": str(topics_path),
        "qrels": str(qrels_path),
        "metric": result.metric,
        "value": item.score(result.metric),
        "confidence_width": item.evaluation.confidence.get(result.metric),
        "topics": result.topics,
        "configuration": item.config.name,
        "report": str(result.out_dir),
        "selection": choice.selection.value,
        "reason": choice.reason,
    }
    if choice.baseline is not None:
        source["baseline"] = baseline_dict(result, choice)
    return replace(item.config.profile, source=source)


def baseline_dict(result: TuneResult, choice: Choice) -> dict[str, Any] | None:
    """The baseline's name, label, score and the best - baseline paired test (None: no
    baseline)."""
    if choice.baseline is None:
        return None
    versus = choice.versus_baseline
    return {
        "configuration": choice.baseline.config.name,
        "label": result.baseline_label,
        "value": choice.baseline.score(result.metric),
        "best_minus_baseline": None if versus is None else versus.to_dict(),
    }


#: configuration name -> its paired t-test against the best (None: the best, or < 2 topics)
AgainstBest = dict[str, dict[str, Any] | None]


def against_best(result: TuneResult) -> AgainstBest:
    """Configuration name -> the two-tailed paired t-test of it against the best configuration
    by the metric, over the same topics (:mod:`mathsearch.evaluation.paired_test`;
    ``PairedComparison.to_dict()``), or ``None`` for the best itself and when there are fewer
    than two topics. A configuration whose p is above 0.05 is one the topics cannot tell from
    the best."""
    best = result.best
    against: AgainstBest = {}
    for item in result.results:
        testable = item is not best and result.topics >= 2
        against[item.config.name] = (
            compare_per_topic(
                item.evaluation.per_topic, best.evaluation.per_topic, result.metric
            ).to_dict()
            if testable
            else None
        )
    return against


def rows(result: TuneResult, against: AgainstBest) -> list[dict[str, Any]]:
    """One flat dict per configuration (blank for parameters its mode does not use)."""
    out: list[dict[str, Any]] = []
    for rank, item in enumerate(result.results, start=1):
        params = item.config.parameters()
        row: dict[str, Any] = {"rank": rank, "configuration": item.config.name}
        row["baseline"] = "yes" if item.config.name == result.baseline else ""
        row.update({name: params.get(name, "") for name in PARAMETERS})
        row.update({m: round(v, 6) for m, v in item.evaluation.means.items()})
        width = item.evaluation.confidence.get(result.metric)
        row["confidence_width"] = "" if width is None else round(width, 6)
        paired = against[item.config.name]
        row["difference_to_best"] = "" if paired is None else round(paired["mean_difference"], 6)
        row["p_against_best"] = "" if paired is None else round(paired["p_value"], 6)
        row["failed_topics"] = len(item.failures)
        row["seconds"] = round(item.seconds, 3)
        row["run"] = item.run_path.relative_to(result.out_dir).as_posix()
        out.append(row)
    return out


def write_csv(result: TuneResult, path: Path, against: AgainstBest) -> Path:
    table = rows(result, against)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    return path


def results_markdown(result: TuneResult, against: AgainstBest, choice: Choice) -> str:
    """The results table in Markdown, best first, with the confidence width of the metric, the
    baseline marked, and the recommendation (``choice``)."""
    measures = result.best.evaluation.measures
    width = result.best.evaluation.confidence.get(result.metric)
    bound = (
        f"Each mean of a [0, 1] measure lies within ±{width:.4f} of its expectation with "
        f"probability ≥ {1 - result.delta:.2f} (Hoeffding over {result.topics} independent "
        "topics, KDD 2020 section 5); uMAP is unbounded and has no width."
        if width is not None
        else f"{result.metric} is unbounded: no confidence width."
    )
    lines = [
        f"# mathsearch tune: {len(result.results)} configurations by {result.metric}",
        "",
        f"Index `{result.meta.get('index', '')}`, {result.topics} judged topics, "
        f"{result.seconds:.1f} s. {bound}",
        "",
        "| # | configuration | " + " | ".join(measures) + f" | ± {result.metric} | "
        "vs best: difference, p | failed |",
        "|---|---|" + "---|" * len(measures) + "---|---|---|",
    ]
    close = 0
    for rank, item in enumerate(result.results, start=1):
        values = " | ".join(_cell(item, m, result.metric) for m in measures)
        plus = item.evaluation.confidence.get(result.metric)
        plus_text = "-" if plus is None else f"{plus:.4f}"
        paired = against[item.config.name]
        if paired is None:
            versus = "-"
        else:
            versus = f"{paired['mean_difference']:+.4f}, {paired['p_value']:.3f}"
            close += not paired["significant"]
        marker = " (baseline)" if item.config.name == result.baseline else ""
        lines.append(
            f"| {rank} | `{item.config.name}`{marker} | {values} | {plus_text} | {versus} | "
            f"{len(item.failures)} |"
        )
    best = result.best
    chosen = choice.chosen
    lines += [
        "",
        f"Best: `{best.config.name}` ({result.metric} = {best.score(result.metric):.4f}).",
        *_baseline_lines(result, choice),
        f"Recommended ({choice.selection.value}: {choice.reason}): `{chosen.config.name}` "
        f"({result.metric} = {chosen.score(result.metric):.4f}), saved as `best_profile.json` "
        "(`mathsearch search --profile best_profile.json ...`).",
        f"vs best: the mean per-topic difference of {result.metric} to the best and p of the "
        f"two-tailed paired t-test; {close} of the other {len(result.results) - 1} "
        "configurations are within the noise of these topics (p >= 0.05).",
        "",
    ]
    lines += [f"![{m} against alpha](<plots/{m}_vs_alpha.png>)" for m in measures]
    return "\n".join(lines) + "\n"


def _baseline_lines(result: TuneResult, choice: Choice) -> list[str]:
    """One line on the baseline and the best - baseline paired test (none without a baseline)."""
    if choice.baseline is None:
        return []
    name = choice.baseline.config.name
    label = f", {result.baseline_label}" if result.baseline_label else ""
    value = choice.baseline.score(result.metric)
    text = f"Baseline: `{name}`{label} ({result.metric} = {value:.4f})"
    versus = choice.versus_baseline
    if versus is None:
        return [text + "."]
    verdict = "significant" if versus.significant else "within the noise of these topics"
    tally = f"{versus.wins} wins / {versus.losses} losses"
    return [f"{text}; {versus_text(versus)}, {tally}: {verdict}."]


def versus_text(versus: PairedComparison) -> str:
    """``best - baseline +d [low, high], p P`` (the report's and ``mathsearch tune``'s words)."""
    return (
        f"best - baseline {versus.mean_difference:+.4f} "
        f"[{versus.ci_low:+.4f}, {versus.ci_high:+.4f}], p {versus.p_value:.3g}"
    )


def plot_vs_alpha(result: TuneResult, measure: str, path: Path) -> Path:
    """``measure`` against alpha: a line per setting of the other parameters, a dashed line per
    configuration whose mode has no alpha."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series: dict[str, list[tuple[float, float]]] = {}
    flat: dict[str, float] = {}
    for item in result.results:
        params = item.config.parameters()
        value = item.evaluation.means[measure]
        if "alpha" in params:
            alpha = float(params["alpha"])
            label = item.config.name.replace(f"-a{alpha:g}-", "-", 1)
            series.setdefault(label, []).append((alpha, value))
        else:
            flat[item.config.name] = value
    figure = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, points in sorted(series.items()):
        points.sort()
        axes.plot([a for a, _ in points], [v for _, v in points], marker="o", label=label)
    for index, (label, value) in enumerate(sorted(flat.items())):
        axes.axhline(value, linestyle="--", linewidth=1, color=f"C{(len(series) + index) % 10}",
                     label=label)  # fmt: skip
    axes.set_xlabel("alpha (share of the vector score)")
    axes.set_ylabel(measure)
    axes.set_xlim(0.0, 1.0)
    axes.set_title(f"{measure} against alpha ({result.topics} topics)")
    axes.grid(True, alpha=0.3)
    if series or flat:
        axes.legend(fontsize="small", loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def report_dict(
    result: TuneResult,
    topics_path: str | Path,
    qrels_path: str | Path,
    files: dict[str, Path],
    against: AgainstBest,
    *,
    choice: Choice,
) -> dict[str, Any]:
    """The report as JSON-ready data (also what ``mathsearch tune --json`` prints)."""
    best = result.best
    return {
        "format": REPORT_FORMAT,
        "metric": result.metric,
        "topics_file": str(topics_path),
        "qrels_file": str(qrels_path),
        "topics": result.topics,
        "unjudged_topics": list(result.unjudged),
        "qrels_topics_not_asked": list(result.untopiced),
        "delta": result.delta,
        "seconds": round(result.seconds, 3),
        **result.meta,
        "best": {
            "configuration": best.config.name,
            "parameters": best.config.parameters(),
            "value": best.score(result.metric),
            "means": best.evaluation.means,
            "confidence": best.evaluation.confidence,
            "per_topic": best.evaluation.per_topic,
        },
        "baseline": baseline_dict(result, choice),
        "recommended": {
            "configuration": choice.chosen.config.name,
            "selection": choice.selection.value,
            "reason": choice.reason,
            "value": choice.chosen.score(result.metric),
        },
        "configurations": [
            {**_config_dict(item, result.out_dir), "against_best": against[item.config.name]}
            for item in result.results
        ],
        "files": {
            name: path.relative_to(result.out_dir).as_posix() for name, path in files.items()
        },
    }


def _config_dict(item: ConfigResult, out: Path) -> dict[str, Any]:
    return {
        "configuration": item.config.name,
        "parameters": item.config.parameters(),
        "means": item.evaluation.means,
        "confidence": item.evaluation.confidence,
        "failed_topics": item.failures,
        "seconds": round(item.seconds, 3),
        "run": item.run_path.relative_to(out).as_posix(),
    }


def _cell(item: ConfigResult, measure: str, metric: str) -> str:
    value = item.evaluation.means[measure]
    text = f"{value:.2f}" if measure == "uMAP" else f"{value:.4f}"
    return f"**{text}**" if measure == metric else text
