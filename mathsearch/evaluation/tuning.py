"""Tuning: every configuration of a grid against the live index, evaluated on judged topics.

:func:`tune` runs each :class:`~mathsearch.evaluation.tuning_grid.Configuration` over every topic
(:func:`~mathsearch.evaluation.topic_runs.run_topics`: a topic's query is featurised once for the
whole
grid), writes the TREC run ``runs/<name>.txt`` under the report folder, evaluates it
(:func:`~mathsearch.evaluation.ir_metrics.evaluate`) and returns the results best first by the
chosen
metric. :mod:`mathsearch.evaluation.tune_report` turns a :class:`TuneResult` into the report folder.

Example::

    searcher = Searcher(connect(), "mathsearch-equations")
    result = tune(searcher, read_topics("t.jsonl"), read_qrels("q.txt"),
                  expand(DEFAULT_GRID), out_dir="report", metric="nDCG@10")
    result.best.config.profile        # the SearchProfile that scored highest

With ``baseline`` (a :func:`~mathsearch.evaluation.tuning_grid.baseline_configuration`, e.g. the
profile users search with now) the baseline is run too, unless a grid point ranks the same, and
``result.baseline_result`` is its result: :mod:`mathsearch.evaluation.tune_selection` compares the
best with it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.ir_metrics import (
    DEFAULT_DELTA,
    DEFAULT_MEASURES,
    Evaluation,
    evaluate,
    hoeffding_width,
    parse_measures,
)
from mathsearch.evaluation.topic_runs import cache_features, run_topics
from mathsearch.evaluation.trec_files import Qrels, Topic, write_run
from mathsearch.evaluation.tuning_grid import Configuration, with_baseline
from mathsearch.opensearch.read_cache import ReadCache
from mathsearch.opensearch.searcher import Searcher

logger = logging.getLogger(__name__)

DEFAULT_METRIC = "nDCG@10"
RUNS_DIR = "runs"


@dataclass
class ConfigResult:
    """One configuration's run file, evaluation, failed topics and wall time."""

    config: Configuration
    evaluation: Evaluation
    run_path: Path
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def score(self, metric: str) -> float:
        return self.evaluation.means[metric]


@dataclass
class TuneResult:
    """All configurations' results, best first by ``metric`` (grid order breaks ties)."""

    metric: str
    results: list[ConfigResult]
    topics: int
    out_dir: Path
    delta: float = DEFAULT_DELTA
    seconds: float = 0.0
    unjudged: tuple[str, ...] = ()
    untopiced: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    baseline: str | None = None
    baseline_label: str | None = None

    @property
    def best(self) -> ConfigResult:
        return self.results[0]

    @property
    def baseline_result(self) -> ConfigResult | None:
        """The baseline configuration's result (None: no baseline was given)."""
        if self.baseline is None:
            return None
        return next(r for r in self.results if r.config.name == self.baseline)


def tune(
    searcher: Searcher,
    topics: Sequence[Topic],
    qrels: Qrels,
    configs: Sequence[Configuration],
    *,
    out_dir: str | Path,
    metric: str = DEFAULT_METRIC,
    measures: Sequence[str] = DEFAULT_MEASURES,
    delta: float = DEFAULT_DELTA,
    progress: bool = True,
    read_cache: bool = True,
    baseline: Configuration | None = None,
) -> TuneResult:
    """Run, write and evaluate every configuration; see the module docstring.

    With ``read_cache`` (the default) the configurations share the cluster's answers for the
    run (:class:`~mathsearch.opensearch.read_cache.ReadCache`): a candidate search or a hit's
    stored fields that one configuration fetched is not fetched again, so each configuration's
    ``seconds`` counts only the reads it was first to make. The runs are the same either way.

    ``baseline``: a configuration to compare the best with (see the module docstring); it is
    added to ``configs`` unless one of them ranks the same.

    Raises:
        EvaluationError: an unknown measure, no configurations or topics, or no topic both
            asked and judged.
        MappingError, ClusterUnavailableError: the index is missing or the cluster is down.
    """
    measures = tuple(dict.fromkeys([*measures, metric]))
    parse_measures(measures)
    hoeffding_width(1, delta)  # refuses a delta outside (0, 1) before any search
    if not configs:
        raise EvaluationError("the grid has no configurations")
    baseline_name = None
    if baseline is not None:
        configs, baseline_name = with_baseline(configs, baseline)
    if not topics:
        raise EvaluationError("no topics")
    asked = {topic.qid for topic in topics}
    judged = {qid: rels for qid, rels in qrels.items() if qid in asked}
    if not any(grade > 0 for rels in judged.values() for grade in rels.values()):
        raise EvaluationError("no topic has a relevant document in the qrels")
    untopiced = tuple(sorted(set(qrels) - asked))
    if untopiced:
        logger.warning("%d qrels topics are not in the topics file: ignored", len(untopiced))
    unasked = sorted(asked - set(qrels))
    if unasked:
        logger.warning("%d topics have no qrels: searched, not evaluated", len(unasked))
    searcher.default_field()  # fail fast on a missing index, before the first search
    cache_features(searcher)
    # the run's own cache (none when the caller set one, which is left to the caller)
    cache = ReadCache() if read_cache and searcher.read_cache is None else None
    if cache is not None:
        searcher.read_cache = cache
    started = time.perf_counter()
    try:
        results = _run_grid(
            searcher, topics, judged, configs,
            out_dir=out_dir, measures=measures, delta=delta, progress=progress,
        )  # fmt: skip
    finally:
        if cache is not None:
            searcher.read_cache = None
            logger.info("read cache: %d reads from memory, %d sent", cache.hits, cache.misses)
    ranked = sorted(results, key=lambda r: -r.score(metric))
    first = ranked[0].evaluation
    return TuneResult(
        metric=metric,
        results=ranked,
        topics=first.topics,
        out_dir=Path(out_dir),
        delta=delta,
        seconds=time.perf_counter() - started,
        unjudged=first.unjudged,
        untopiced=untopiced,
        meta={"index": searcher.index, "vector_field": searcher.default_field()},
        baseline=baseline_name,
        baseline_label=None if baseline is None else baseline.profile.label,
    )


def _run_grid(
    searcher: Searcher,
    topics: Sequence[Topic],
    judged: Qrels,
    configs: Sequence[Configuration],
    *,
    out_dir: str | Path,
    measures: Sequence[str],
    delta: float,
    progress: bool,
) -> list[ConfigResult]:
    """Each configuration's run over every topic, written under ``out_dir`` and evaluated."""
    runs_dir = Path(out_dir) / RUNS_DIR
    runs_dir.mkdir(parents=True, exist_ok=True)
    results: list[ConfigResult] = []
    with tqdm(
        total=len(configs) * len(topics),
        desc="tune",
        unit="query",
        file=sys.stderr,
        disable=not progress,
    ) as bar:
        for config in configs:
            bar.set_postfix_str(config.name, refresh=False)
            config_started = time.perf_counter()
            topic_run = run_topics(searcher, topics, config.profile, progress=bar.update)
            seconds = time.perf_counter() - config_started
            path = write_run(runs_dir / f"{config.name}.txt", topic_run.run, tag=config.name)
            evaluation = evaluate(judged, topic_run.run, measures, delta=delta)
            results.append(ConfigResult(config, evaluation, path, topic_run.failures, seconds))
            logger.debug("%s: %s", config.name, evaluation.means)
    return results
