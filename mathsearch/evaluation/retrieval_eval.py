"""``mathsearch eval retrieval --task ...``: every ranking mode against Approach Zero, on real data.

One evaluation, from relevance data (:mod:`mathsearch.evaluation.relevance_sets`) to a side-by-side
table:

1. the collection is indexed into ``<prefix>-eval-<task>`` with the default model
   (:func:`mathsearch.evaluation.eval_index.ensure_eval_index`: reused when it already holds exactly
   this
   collection and model);
2. the topics are split by paper / class (seeded) into a tuning half and a test half, so no
   paper or class has topics in both;
3. the tuning half runs the default grid of ``mathsearch tune``
   (:data:`~mathsearch.evaluation.tuning_grid.DEFAULT_GRID`: every mode, alpha 0.1 .. 0.9, three
   normalisations; k = ``k``; or ``grid``) and picks the best by ``metric``;
4. on the test half: BM25 only, kNN only, rescore, knn-rescore, fusion and rrf with the
   parameters of the shipped default profile (:meth:`SearchProfile.default`: what a user gets
   without ``--profile``), that profile itself (``default``), the tuned best, Approach Zero
   (pya0, indexed in its own workdir and searched in a child process; equations and queries
   its parser refuses are counted) and a
   seeded random ranking (the trivial baseline), each evaluated with
   :func:`mathsearch.evaluation.ir_metrics.evaluate` (P@5, P@10, P@100, nDCG@10, MAP, uMAP,
   Hoeffding
   widths).

The wildcard task (:mod:`mathsearch.evaluation.wildcard_topics`) runs the same steps on patterns
with query variables: every mode's search is then a wildcard search (the first stage, then the
structural check), its table leads with recall@10 (:data:`TASK_MEASURES`; tuned by it), pya0 is
asked each pattern in its ``\\qvar{x}`` syntax, and the source equation of each pattern (not
excluded: it is relevant) gets a known-item table (:func:`known_item_table`).

Files (``out_dir``): ``collection.jsonl``, ``topics.jsonl`` (all), ``topics-tune.jsonl``,
``topics-test.jsonl``, ``qrels.txt``, ``runs/<system>.txt`` (test half), ``tune/`` (the tune
report of the tuning half), ``topic-details.jsonl`` (wildcard: each pattern's source, variables,
bindings and relevant count), ``report.json`` and ``report.md``
(:mod:`mathsearch.evaluation.retrieval_report`).

Example::

    data = build_same_document(["equation.txt"], papers=100, topics=200, seed=0)
    result = run_retrieval_eval(data, "eval-same-document", seed=0)
    result.systems[0].name, result.systems[0].evaluation.means["nDCG@10"]
"""

from __future__ import annotations

import importlib.util
import json
import logging
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opensearchpy import OpenSearch
from tqdm import tqdm

from mathsearch.core.cluster_faults import cluster_fault
from mathsearch.core.errors import ClusterUnavailableError, EvaluationError
from mathsearch.core.redact import redact_url
from mathsearch.evaluation.eval_index import EvalIndex, ensure_eval_index, eval_alias, fingerprint
from mathsearch.evaluation.ir_metrics import (
    DEFAULT_DELTA,
    DEFAULT_MEASURES,
    Evaluation,
    evaluate,
    hoeffding_width,
)
from mathsearch.evaluation.paired_test import compare_per_topic
from mathsearch.evaluation.relevance_sets import RelevanceSet
from mathsearch.evaluation.trec_files import (
    Qrels,
    Run,
    Topic,
    write_qrels,
    write_run,
    write_topics,
)
from mathsearch.evaluation.tuning import DEFAULT_METRIC
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.search_request import WILDCARD_SAME
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.runtime.model_card import ModelCard

if TYPE_CHECKING:
    from mathsearch.evaluation.tuning import TuneResult
    from mathsearch.opensearch.searcher import Searcher

logger = logging.getLogger(__name__)

PYA0_HINT = "install it with `pip install pya0==0.3.7` (the `bench` extra) or pass --no-pya0"
BASELINES: tuple[Mode, ...] = (Mode.BM25, *(mode for mode in MODES if mode is not Mode.BM25))

#: The measures of a task's table where they are not :data:`DEFAULT_MEASURES`: a wildcard
#: pattern's relevant set is small and exact, so recall at 10 (and 100) leads.
TASK_MEASURES: dict[str, tuple[str, ...]] = {
    "wildcard": ("R@10", "nDCG@10", "R@100", "P@10", "MAP", "uMAP"),
}
#: The tuning and paired-test metric of a task unless one is given.
TASK_METRICS: dict[str, str] = {"wildcard": "R@10"}


def task_measures(task: str) -> tuple[str, ...]:
    """The measures of ``task``'s table (:data:`TASK_MEASURES`, else the default ones)."""
    return TASK_MEASURES.get(task, DEFAULT_MEASURES)


def task_metric(task: str, metric: str | None = None) -> str:
    """``metric``, else the task's (:data:`TASK_METRICS`, else ``nDCG@10``)."""
    return metric or TASK_METRICS.get(task, DEFAULT_METRIC)


@dataclass
class SystemResult:
    """One system on the test half: its run file, evaluation, failed topics and wall time."""

    name: str
    parameters: dict[str, Any]
    evaluation: Evaluation
    run_path: Path
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class RetrievalEval:
    """Everything one evaluation measured; :mod:`mathsearch.evaluation.retrieval_report` writes
    it."""

    task: str
    out_dir: Path
    k: int
    seed: int
    metric: str
    index: EvalIndex | None
    data_info: dict[str, Any]
    split: dict[str, int]
    systems: list[SystemResult]
    tuned: dict[str, Any] = field(default_factory=dict)
    pya0: dict[str, Any] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    delta: float = DEFAULT_DELTA
    #: every system against BM25 on the test half (:func:`paired_with_baseline`)
    paired: dict[str, Any] = field(default_factory=dict)
    #: the known item of each topic (a wildcard pattern's source) in each system's run
    #: (:func:`known_item_table`); empty when the topics have none
    known_item: dict[str, Any] = field(default_factory=dict)


#: The system every other one is compared with, topic by topic.
PAIRED_BASELINE = "bm25"


def paired_with_baseline(
    systems: Sequence[SystemResult],
    metric: str,
    groups: Mapping[str, str],
    baseline: str = PAIRED_BASELINE,
) -> dict[str, Any]:
    """``{"baseline", "measure", "test", "systems"}``: in ``systems``, name -> the paired t-test
    of that system against ``baseline`` by ``metric`` (``PairedComparison.to_dict()``, over
    topics), with ``by_group``: the same test over the mean differences of the ``groups``
    (topic -> paper or class) when the topics span two or more. No systems when none is called
    ``baseline`` or the metric is not measured."""
    block: dict[str, Any] = {
        "baseline": baseline, "measure": metric, "test": "two-tailed paired t-test",
        "systems": {},
    }  # fmt: skip
    base = next((item for item in systems if item.name == baseline), None)
    if base is None or metric not in base.evaluation.means:
        return block
    grouped = len(set(groups.values())) >= 2
    for item in systems:
        if item.name == baseline or item.evaluation.topics < 2:
            continue
        pair = (item.evaluation.per_topic, base.evaluation.per_topic, metric)
        entry = compare_per_topic(*pair).to_dict()
        if grouped:
            entry["by_group"] = compare_per_topic(*pair, groups=groups).to_dict()
        block["systems"][item.name] = entry
    return block


def known_item_ranks(
    run: Run, known: Mapping[str, str], qids: Sequence[str]
) -> dict[str, int | None]:
    """qid -> the 1-based rank of the topic's known item in ``run`` (None: not ranked)."""
    out: dict[str, int | None] = {}
    for qid in qids:
        ranking = [doc for doc, _ in run.get(qid, [])]
        out[qid] = ranking.index(known[qid]) + 1 if known[qid] in ranking else None
    return out


def known_item_summary(
    ranks: Mapping[str, int | None], depth: int = 10, delta: float = DEFAULT_DELTA
) -> dict[str, Any]:
    """The known item's rank over topics: how often it is ranked at all, MRR (1/rank, 0 when
    not ranked), success@1 and success@``depth``, the median rank of the ranked ones, and the
    Hoeffding half-width that each mean of a [0, 1] value carries.

    >>> known_item_summary({"a": 1, "b": 4, "c": None})["MRR"]
    0.4167
    """
    values = list(ranks.values())
    n = len(values)
    found = sorted(rank for rank in values if rank is not None)
    if not n:
        return {"topics": 0}
    return {
        "topics": n,
        "found": len(found),
        "MRR": round(sum(1.0 / rank for rank in found) / n, 4),
        "S@1": round(sum(1 for rank in found if rank == 1) / n, 4),
        f"S@{depth}": round(sum(1 for rank in found if rank <= depth) / n, 4),
        "median_rank": statistics.median(found) if found else None,
        "width": round(hoeffding_width(n, delta), 4),
    }


def known_item_table(
    systems: Sequence[SystemResult],
    known: Mapping[str, str],
    topics: Sequence[Topic],
    depth: int = 10,
    delta: float = DEFAULT_DELTA,
) -> dict[str, Any]:
    """``{"depth", "systems": {name: summary with per_topic ranks}}`` over the topics that
    have a known item (each system's run read back from its file); empty without any."""
    from mathsearch.evaluation.trec_files import read_run

    qids = [t.qid for t in topics if t.qid in known]
    if not qids:
        return {}
    table: dict[str, Any] = {"depth": depth, "systems": {}}
    for item in systems:
        run = read_run(item.run_path) if item.run_path.is_file() else {}
        ranks = known_item_ranks(run, known, qids)
        summary = known_item_summary(ranks, depth, delta)
        table["systems"][item.name] = {**summary, "per_topic": ranks}
    return table


def pya0_available() -> bool:
    """Whether pya0 (Approach Zero) can be imported here."""
    return importlib.util.find_spec("pya0") is not None


def split_topics(
    data: RelevanceSet, seed: int, tune_fraction: float = 0.5
) -> tuple[list[Topic], list[Topic]]:
    """(tuning topics, test topics): groups (papers, classes) in a seeded order, whole groups to
    the tuning half until it holds ``tune_fraction`` of the topics.

    Raises:
        EvaluationError: fewer than two groups (one half would be empty).
    """
    groups = sorted({data.groups.get(t.qid, t.qid) for t in data.topics})
    if len(groups) < 2:
        raise EvaluationError(f"{len(groups)} paper/class among the topics: cannot split in two")
    random.Random(seed).shuffle(groups)
    size: dict[str, int] = {}
    for topic in data.topics:
        group = data.groups.get(topic.qid, topic.qid)
        size[group] = size.get(group, 0) + 1
    tuning: set[str] = set()
    taken = 0
    for group in groups[:-1]:  # the last group always goes to the test half
        if taken >= tune_fraction * len(data.topics):
            break
        tuning.add(group)
        taken += size[group]
    tune = [t for t in data.topics if data.groups.get(t.qid, t.qid) in tuning]
    test = [t for t in data.topics if data.groups.get(t.qid, t.qid) not in tuning]
    return tune, test


def random_run(data: RelevanceSet, topics: Sequence[Topic], k: int, seed: int) -> Run:
    """The trivial baseline: ``k`` collection ids in a seeded random order per topic."""
    ids = [e.eq_id for e in data.collection]
    run: Run = {}
    for topic in topics:
        rng = random.Random(f"{seed}:{topic.qid}")
        excluded = set(topic.exclude)
        drawn = rng.sample(ids, min(len(ids), k + len(excluded)))
        kept = [eq_id for eq_id in drawn if eq_id not in excluded][:k]
        run[topic.qid] = [(eq_id, float(-rank)) for rank, eq_id in enumerate(kept, start=1)]
    return run


def _subset(qrels: Qrels, topics: Sequence[Topic]) -> Qrels:
    return {t.qid: qrels[t.qid] for t in topics if t.qid in qrels}


def check_cluster(client: OpenSearch, settings: OpenSearchSettings) -> None:
    """Raise :class:`ClusterUnavailableError` (with how to start one) unless the node answers."""
    try:
        client.info()
    except Exception as exc:  # opensearch-py raises several unrelated classes here
        url = redact_url(settings.url)
        raise ClusterUnavailableError(
            cluster_fault(exc, url)
            or f"OpenSearch at {url} does not answer ({type(exc).__name__}): "
            "start it with `mathsearch stack up` or set MATHSEARCH_OPENSEARCH_URL"
        ) from exc


def eval_encoders(encoders: Sequence[str]) -> tuple[list[str], list[ModelCard]]:
    """What an eval index with ``encoders`` is built and searched with: the encoders it is
    indexed with (the default model first, one per vector field: ``gcn`` and the default
    model's path are one field) and the cards of the fields searched, in ``encoders``' order.

    Raises:
        ModelCardError: an encoder without its model or card, or two different models that
            write the same field.
    """
    from mathsearch.runtime.embedders import encoder_card, one_field_each
    from mathsearch.runtime.settings import RuntimeSettings

    names = dict.fromkeys([str(RuntimeSettings.from_env().model), *encoders])
    cards = {name: encoder_card(name) for name in names}
    by_field = one_field_each(list(cards.items()))
    wanted = dict.fromkeys(cards[name].vector_field for name in encoders)
    return list(by_field.values()), [cards[by_field[field]] for field in wanted]


def run_retrieval_eval(
    data: RelevanceSet,
    out_dir: str | Path,
    *,
    index: str | None = None,
    k: int = 100,
    seed: int = 0,
    metric: str | None = None,
    pya0: bool = True,
    pya0_dir: str | Path | None = None,
    grid: dict[str, tuple[Any, ...]] | None = None,
    client: OpenSearch | None = None,
    settings: OpenSearchSettings | None = None,
    encoder: Any = None,
    progress: bool = True,
    encoders: Sequence[str] | None = None,
    rerank: Sequence[str] | None = None,
    measures: Sequence[str] | None = None,
) -> RetrievalEval:
    """Run one evaluation (see the module docstring) and write its files; returns the result.

    ``metric`` (tuning, paired tests) and ``measures`` (the table) default to the task's
    (:func:`task_metric`, :func:`task_measures`). Topics with a known item
    (``data.known_items``: a wildcard pattern's source) also get the known-item table
    (:func:`known_item_table`); Approach Zero is asked ``data.peer_latex`` where a topic has
    it (a pattern in its ``\\qvar{x}`` syntax).

    ``grid`` replaces the default tuning grid (a
    :func:`~mathsearch.evaluation.tuning_grid.parse_grid`
    result; its ``k`` is always ``k``). ``pya0_dir`` is pya0's workdir (default
    ``out_dir/pya0``; its index is reused when it holds the same collection). ``encoders``
    (families or ``.onnx`` paths): the queries are embedded with these and every mode searches
    their vector fields (one: that field; several: BM25 and one kNN list per field, each field
    weighted ``alpha / n``, as ``mathsearch search --encoders``); the collection is indexed with
    the default model first (so that an equation these encoders refuse is still indexed, with
    its refusal) and then them, one encoder per field. ``rerank`` (None: the default
    profile's) replaces the second stage's encoders of every hybrid row and of the grid
    (``[]``: none); BM25 and kNN alone never re-rank.

    Raises:
        ClusterUnavailableError: the cluster does not answer.
        MappingError: ``index`` names an index that is not an eval index.
        ModelCardError: an encoder without its model or card, or two different models that
            write the same field.
        EvaluationError: too few topics or groups to split, or no judged topic.
        Pya0Unavailable, Pya0Error: pya0 is asked for but missing, or failed to index.
    """
    from mathsearch.evaluation.retrieval_report import write_report
    from mathsearch.opensearch.client import connect

    _require_pya0(pya0)
    started = time.perf_counter()
    metric = task_metric(data.task, metric)
    measures = tuple(dict.fromkeys([*(measures or task_measures(data.task)), metric]))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = settings or OpenSearchSettings.from_env()
    client = client or connect(settings)
    check_cluster(client, settings)
    tune_topics, test_topics = split_topics(data, seed)
    _write_inputs(out, data, tune_topics, test_topics)
    built, searcher = _eval_searcher(
        client, settings, data, index=index, encoders=encoders, encoder=encoder, progress=progress
    )
    clock: dict[str, float] = {"index": built.seconds}
    tick = time.perf_counter()
    base = _base_profile(encoders, rerank)
    # wildcard patterns: each mode (tuned or a row) runs as the first stage itself, the default
    # row as users get it
    searched = replace(base, wildcard_mode=WILDCARD_SAME) if data.task == "wildcard" else base
    tuned, tuned_info = _tune_half(
        searcher, data, tune_topics, out, searched, grid=grid, k=k, metric=metric,
        progress=progress, measures=measures,
    )  # fmt: skip
    clock["tune"] = time.perf_counter() - tick
    test_qrels = _subset(data.qrels, test_topics)
    # the timings below are searches, not featurisation
    _featurise(searcher, _searched_topics(data, test_topics))
    profiles = _test_profiles(searched, tuned, k, default=base)
    tick = time.perf_counter()
    systems = _profile_systems(
        out, searcher, profiles, test_topics, test_qrels, progress=progress, measures=measures
    )
    clock["test"] = time.perf_counter() - tick
    pya0_info: dict[str, Any] | None = None
    if pya0:
        system, pya0_info, clock["pya0"] = _timed_pya0_system(
            out, data, test_topics, test_qrels, pya0_dir=pya0_dir, k=k, progress=progress,
            measures=measures,
        )  # fmt: skip
        systems.append(system)
    systems.append(
        _random_system(out, data, test_topics, test_qrels, k=k, seed=seed, measures=measures)
    )
    clock["total"] = time.perf_counter() - started
    result = _result(
        data, out, k=k, seed=seed, metric=metric, built=built, halves=(tune_topics, test_topics),
        systems=systems, tuned_info=tuned_info, pya0_info=pya0_info, clock=clock,
    )  # fmt: skip
    result.known_item = known_item_table(systems, data.known_items, test_topics)
    write_report(result)
    return result


def _searched_topics(data: RelevanceSet, topics: Sequence[Topic]) -> list[Topic]:
    """The topics as the encoder sees them: a wildcard pattern's first stage embeds its neutral
    LaTeX (every variable a plain identifier), not the pattern."""
    out = []
    for topic in topics:
        neutral = data.details.get(topic.qid, {}).get("neutral_latex")
        out.append(replace(topic, latex=neutral) if neutral else topic)
    return out


def _require_pya0(pya0: bool) -> None:
    """Refuse to start when pya0 is asked for but cannot be imported."""
    if pya0 and not pya0_available():
        from mathsearch.evaluation.pya0_peer import Pya0Unavailable

        raise Pya0Unavailable(f"pya0 is not importable; {PYA0_HINT}")


def _eval_searcher(
    client: OpenSearch,
    settings: OpenSearchSettings,
    data: RelevanceSet,
    *,
    index: str | None,
    encoders: Sequence[str] | None,
    encoder: Any,
    progress: bool,
) -> tuple[EvalIndex, Searcher]:
    """Reuse or build the eval index of the collection; a searcher over its vector fields."""
    from mathsearch.opensearch.query_encoder import ModelQueryEncoder
    from mathsearch.opensearch.search_fields import EQUATION_FIELDS
    from mathsearch.opensearch.searcher import Searcher

    alias = index or eval_alias(settings, data.task)
    fields = EQUATION_FIELDS
    index_encoders = None
    searched: list[ModelCard] = []
    if encoders:
        index_encoders, searched = eval_encoders(encoders)
        fields = replace(EQUATION_FIELDS, vectors=tuple(c.vector_field for c in searched))
    built = ensure_eval_index(
        client, alias, data.collection, settings=settings, progress=progress,
        encoders=index_encoders,
    )  # fmt: skip
    if searched and list(fields.vectors) != [built.vector_field]:
        built.searched_field = " + ".join(fields.vectors)
        built.searched_model = " + ".join(card.name for card in searched)
    query_encoder = encoder or ModelQueryEncoder(encoders=list(encoders or []) or None)
    return built, Searcher(client, alias, encoder=query_encoder, fields=fields)


def _base_profile(encoders: Sequence[str] | None, rerank: Sequence[str] | None) -> SearchProfile:
    """The shipped default profile with ``encoders`` (and ``rerank``, when given)."""
    # the grid keeps the query tokens of the profile users get (max_terms, max_df) unless it
    # names them, so the tuned row and the default rows below search with the same tokens
    base = replace(SearchProfile.default(), encoders=tuple(encoders or ()))
    if rerank is not None:
        base = replace(base, rerank=tuple(rerank))
    return base


def _tune_half(
    searcher: Searcher,
    data: RelevanceSet,
    topics: list[Topic],
    out: Path,
    base: SearchProfile,
    *,
    grid: dict[str, tuple[Any, ...]] | None,
    k: int,
    metric: str,
    progress: bool,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> tuple[TuneResult, dict[str, Any]]:
    """Tune the grid on the tuning half (its report in ``out/tune``); the result and its info."""
    from mathsearch.evaluation.tune_report import write_report as write_tune_report
    from mathsearch.evaluation.tuning import tune
    from mathsearch.evaluation.tuning_grid import DEFAULT_GRID, expand

    configs = expand({**(grid or DEFAULT_GRID), "k": (k,)}, base=base)
    tuned = tune(
        searcher, topics, _subset(data.qrels, topics), configs,
        out_dir=out / "tune", metric=metric, progress=progress, measures=measures,
    )  # fmt: skip
    write_tune_report(tuned, topics_path=out / "topics-tune.jsonl", qrels_path=out / "qrels.txt")
    best = tuned.best
    tuned_info = {
        "configuration": best.config.name,
        "parameters": best.config.parameters(),
        "tuning_value": best.score(metric),
        "configurations": len(configs),
        "tuning_topics": tuned.topics,
        "report": "tune/report.json",
    }
    return tuned, tuned_info


def _test_profiles(
    base: SearchProfile, tuned: TuneResult, k: int, *, default: SearchProfile | None = None
) -> list[tuple[str, SearchProfile]]:
    """The test half's searched systems: every mode, the default profile (``default``, else
    ``base``), the tuned best."""
    # every mode with the parameters users get without --profile (the shipped default
    # profile's alpha, normalisation, ...), the default profile itself, and the tuned best
    modes = replace(base, k=k)
    profiles = [(mode.value, replace(modes, mode=mode)) for mode in BASELINES]
    profiles.append(("default", replace(default or base, k=k)))
    profiles.append(("tuned", replace(tuned.best.config.profile, k=k)))
    return profiles


def _profile_systems(
    out: Path,
    searcher: Searcher,
    profiles: list[tuple[str, SearchProfile]],
    topics: list[Topic],
    qrels: Qrels,
    *,
    progress: bool,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> list[SystemResult]:
    """Search the test half with each profile: one run file and evaluation each."""
    from mathsearch.evaluation.topic_runs import run_topics

    systems: list[SystemResult] = []
    with tqdm(
        total=len(profiles) * len(topics), desc="test half", unit="query",
        file=sys.stderr, disable=not progress,
    ) as bar:  # fmt: skip
        for name, profile in profiles:
            bar.set_postfix_str(name, refresh=False)
            begun = time.perf_counter()
            found = run_topics(searcher, topics, profile, progress=bar.update)
            parameters = {"mode": profile.mode.value, **profile.request("x").parameters()}
            systems.append(
                _system(
                    out, name, parameters=parameters, run=found.run, qrels=qrels,
                    failures=found.failures, seconds=time.perf_counter() - begun,
                    measures=measures,
                )
            )  # fmt: skip
    return systems


def _random_system(
    out: Path,
    data: RelevanceSet,
    topics: list[Topic],
    qrels: Qrels,
    *,
    k: int,
    seed: int,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> SystemResult:
    """The seeded random ranking of the test half (the trivial baseline)."""
    begun = time.perf_counter()
    trivial = random_run(data, topics, k, seed)
    return _system(
        out, "random", parameters={"k": k, "seed": seed}, run=trivial, qrels=qrels,
        failures={}, seconds=time.perf_counter() - begun, measures=measures,
    )  # fmt: skip


def _timed_pya0_system(
    out: Path,
    data: RelevanceSet,
    topics: list[Topic],
    qrels: Qrels,
    *,
    pya0_dir: str | Path | None,
    k: int,
    progress: bool,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> tuple[SystemResult, dict[str, Any], float]:
    """Approach Zero on the test half (:func:`_pya0_system`), its info and its seconds."""
    tick = time.perf_counter()
    workdir = Path(pya0_dir) if pya0_dir else out / "pya0"
    system, info = _pya0_system(
        out, data, topics=topics, qrels=qrels, workdir=workdir, k=k, progress=progress,
        measures=measures,
    )  # fmt: skip
    return system, info, time.perf_counter() - tick


def _result(
    data: RelevanceSet,
    out: Path,
    *,
    k: int,
    seed: int,
    metric: str,
    built: EvalIndex,
    halves: tuple[list[Topic], list[Topic]],
    systems: list[SystemResult],
    tuned_info: dict[str, Any],
    pya0_info: dict[str, Any] | None,
    clock: dict[str, float],
) -> RetrievalEval:
    """The evaluation's result, with every system compared with BM25 on the test half."""
    tune_topics, test_topics = halves
    return RetrievalEval(
        task=data.task, out_dir=out, k=k, seed=seed, metric=metric, index=built,
        data_info=data.info,
        split={"topics": len(data.topics), "tune": len(tune_topics), "test": len(test_topics)},
        systems=systems, tuned=tuned_info, pya0=pya0_info,
        seconds={name: round(value, 2) for name, value in clock.items()},
        paired=paired_with_baseline(
            systems, metric, {t.qid: data.groups.get(t.qid, t.qid) for t in test_topics}
        ),
    )  # fmt: skip


def _featurise(searcher: Any, topics: Sequence[Topic]) -> None:
    from mathsearch.core.errors import QueryError
    from mathsearch.evaluation.topic_runs import cache_features

    cache = cache_features(searcher)
    for topic in topics:
        try:
            cache.features(topic.latex)
        except QueryError:
            continue  # cached as a failure; run_topics records it per system


def _write_inputs(
    out: Path, data: RelevanceSet, tune_topics: list[Topic], test_topics: list[Topic]
) -> None:
    with (out / "collection.jsonl").open("w", encoding="utf-8") as handle:
        for equation in data.collection:
            handle.write(json.dumps(equation.to_dict(), ensure_ascii=False) + "\n")
    write_topics(out / "topics.jsonl", data.topics)
    write_topics(out / "topics-tune.jsonl", tune_topics)
    write_topics(out / "topics-test.jsonl", test_topics)
    write_qrels(out / "qrels.txt", data.qrels)
    if data.details:  # e.g. each wildcard pattern's source, variables and relevant count
        with (out / "topic-details.jsonl").open("w", encoding="utf-8") as handle:
            for topic in data.topics:
                row = {"qid": topic.qid, **data.details.get(topic.qid, {})}
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _system(
    out: Path,
    name: str,
    *,
    parameters: dict[str, Any],
    run: Run,
    qrels: Qrels,
    failures: dict[str, str],
    seconds: float,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> SystemResult:
    path = write_run(out / "runs" / f"{name}.txt", run, tag=name)
    evaluation = evaluate(qrels, run, measures)
    logger.info("%s: %s", name, {m: round(v, 4) for m, v in evaluation.means.items()})
    return SystemResult(name, parameters, evaluation, path, failures, seconds)


def _pya0_system(
    out: Path,
    data: RelevanceSet,
    *,
    topics: list[Topic],
    qrels: Qrels,
    workdir: Path,
    k: int,
    progress: bool,
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> tuple[SystemResult, dict[str, Any]]:
    """Index the collection with pya0 (reused when its stamp matches), search the test half
    (each topic in pya0's syntax where ``data.peer_latex`` has it)."""
    from mathsearch.evaluation.pya0_peer import INDEX_DIR, index_with_pya0
    from mathsearch.evaluation.pya0_search import search_with_pya0

    stamp, stats = workdir / "collection.sha256", workdir / "index.json"
    expected = fingerprint(data.collection, "pya0", "0.3.7")
    reused = (
        stamp.is_file()
        and stamp.read_text(encoding="utf-8").strip() == expected
        and stats.is_file()
        and (workdir / INDEX_DIR).is_dir()
    )
    if reused:
        indexed: dict[str, Any] = json.loads(stats.read_text(encoding="utf-8"))
        logger.info("pya0 index in %s reused", workdir)
    else:
        stamp.unlink(missing_ok=True)
        logger.info("pya0: indexing %d equations in %s", len(data.collection), workdir)
        pairs = [(e.eq_id, e.latex) for e in data.collection]
        indexed = index_with_pya0(pairs, workdir).to_dict()
        stats.write_text(json.dumps(indexed, indent=2) + "\n", encoding="utf-8")
        stamp.write_text(expected + "\n", encoding="utf-8")
    with tqdm(
        total=len(topics), desc="pya0 search", unit="query", file=sys.stderr,
        disable=not progress,
    ) as bar:  # fmt: skip
        asked = [replace(t, latex=data.peer_latex.get(t.qid, t.latex)) for t in topics]
        found = search_with_pya0(workdir, asked, k=k, progress=bar.update)
    system = _system(
        out, "pya0", parameters={"k": k}, run=found.run, qrels=qrels, failures=found.failures,
        seconds=found.seconds, measures=measures,
    )  # fmt: skip
    info = {
        "workdir": str(workdir),
        "reused": reused,
        "equations": indexed["equations"],
        "indexed": indexed["indexed"],
        "rejected": indexed["rejected"],
        "index_seconds": round(float(indexed["seconds"]), 2),
        "unparsed_topics": len(found.unparsed),
        "failed_topics": len(found.failures),
        "crashes": found.crashes,
        "search_seconds": round(found.seconds, 3),
    }
    system.notes = info
    return system, info
