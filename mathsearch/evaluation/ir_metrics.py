"""Retrieval metrics of a run against qrels (ir-measures), with the KDD seed's uMAP and bounds.

Measures (names as in reports; any other ir-measures name such as ``R@100`` works too):

* ``P@5``, ``P@10``, ``P@100`` - precision at k; ``nDCG@10``; ``MAP`` - ir-measures ``AP@1000``;
* ``uMAP`` - the KDD seed's unnormalised average precision (section 6.3):
  ``sum_{k<=1000} P(k) * rel(k)``, which is ``AP@1000 * R`` with ``R`` the topic's number of
  relevant documents in the qrels (AP divides the same sum by ``R``). It is computed from
  ir-measures' per-topic AP, not hand-rolled.

Topics: those of the qrels with at least one relevant document (grade > 0) are evaluated; a
topic with none is reported in ``Evaluation.unjudged`` and left out of every mean; a judged topic
absent from the run (or with an empty ranking) scores 0. The run's order is the ranking: scores
are replaced by ``-rank`` before evaluation, so ties in score keep the run's order instead of
trec_eval's docid tie-break.

Confidence (section 5 of the seed): each per-topic value of P@k, nDCG, AP lies in [0, 1] and the
topics are taken as independent, so Hoeffding's inequality gives, with probability at least
``1 - delta``, ``true mean <= observed mean + sqrt(ln(1/delta) / (2 n))`` over ``n`` topics (the
seed's Theorem 5.1 without the factor 3 its U-statistics over dependent triples need; the
same width bounds the mean from below). uMAP gets no width: a topic's uMAP lies in
``[0, min(R, 1000)]``, a range that depends on the topic and can reach 1000, so the bound needs a
fixed range the measure does not have (scaled by the largest R it would be uselessly wide).

Example::

    evaluation = evaluate({"q1": {"a": 1, "c": 1}}, {"q1": [("a", 3.0), ("b", 2.0), ("c", 1.0)]})
    evaluation.means["MAP"]     # (1/1 + 2/3) / 2 = 0.8333
    evaluation.means["uMAP"]    # 1/1 + 2/3 = 1.6667
    evaluation.confidence["P@5"]  # sqrt(ln 20 / 2) = 1.2239 for one topic
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ir_measures

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.trec_files import Qrels, Run

logger = logging.getLogger(__name__)

#: The measures of ``mathsearch tune`` and ``mathsearch eval retrieval``.
DEFAULT_MEASURES: tuple[str, ...] = ("P@5", "P@10", "P@100", "nDCG@10", "MAP", "uMAP")

#: Report names that are not ir-measures names.
ALIASES = {"MAP": "AP@1000"}

#: Measures whose per-topic values are not bounded by [0, 1] (no confidence width).
UNBOUNDED = frozenset({"uMAP"})

#: The seed's rank cut-off of uMAP.
UMAP_DEPTH = 1000

DEFAULT_DELTA = 0.05


@dataclass
class Evaluation:
    """Per-topic values and means of each measure, the confidence width and the topic sets.

    ``confidence[m]`` is the Hoeffding half-width (``None`` for uMAP); ``unjudged`` are qrels
    topics without a relevant document (left out), ``missing`` judged topics the run does not
    rank (scored 0), ``unknown`` run topics the qrels do not judge (ignored).
    """

    measures: tuple[str, ...]
    per_topic: dict[str, dict[str, float]]
    means: dict[str, float]
    confidence: dict[str, float | None]
    delta: float
    unjudged: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    relevant: dict[str, int] = field(default_factory=dict)

    @property
    def topics(self) -> int:
        """How many topics the means average over."""
        return len(self.per_topic)

    def to_dict(self) -> dict[str, Any]:
        return {
            "measures": list(self.measures),
            "topics": self.topics,
            "means": self.means,
            "confidence": self.confidence,
            "delta": self.delta,
            "unjudged": list(self.unjudged),
            "missing": list(self.missing),
            "unknown": list(self.unknown),
            "per_topic": self.per_topic,
        }


def hoeffding_width(n: int, delta: float = DEFAULT_DELTA) -> float:
    """``sqrt(ln(1/delta) / (2n))``: how far the mean of ``n`` independent [0, 1] values can
    lie below the true mean with probability ``1 - delta`` (one-sided Hoeffding).

    >>> round(hoeffding_width(50), 4)
    0.1731
    """
    if n < 1:
        raise EvaluationError(f"a confidence bound needs at least one topic, not {n}")
    if not 0.0 < delta < 1.0:
        raise EvaluationError(f"delta must lie in (0, 1), not {delta}")
    return math.sqrt(math.log(1.0 / delta) / (2.0 * n))


def parse_measures(names: Sequence[str]) -> dict[str, Any]:
    """Report name -> ir-measures measure (uMAP maps to ``AP@1000``); unknown names raise."""
    parsed: dict[str, Any] = {}
    for name in names:
        target = f"AP@{UMAP_DEPTH}" if name == "uMAP" else ALIASES.get(name, name)
        try:
            parsed[name] = ir_measures.parse_measure(target)
        except Exception as exc:  # ir-measures raises NameError / ValueError / SyntaxError
            raise EvaluationError(
                f"unknown measure {name!r} (e.g. {', '.join(DEFAULT_MEASURES)}): {exc}"
            ) from exc
    return parsed


def relevant_counts(qrels: Qrels) -> dict[str, int]:
    """Topic -> number of relevant documents (grade > 0)."""
    return {qid: sum(1 for grade in judged.values() if grade > 0) for qid, judged in qrels.items()}


def evaluate(
    qrels: Qrels,
    run: Run,
    measures: Sequence[str] = DEFAULT_MEASURES,
    *,
    delta: float = DEFAULT_DELTA,
) -> Evaluation:
    """Evaluate ``run`` against ``qrels``; see the module docstring.

    Raises:
        EvaluationError: an unknown measure, or no qrels topic has a relevant document.
    """
    parsed = parse_measures(measures)
    counts = relevant_counts(qrels)
    judged = sorted(qid for qid, count in counts.items() if count > 0)
    unjudged = tuple(sorted(qid for qid, count in counts.items() if count == 0))
    if not judged:
        raise EvaluationError("no topic of the qrels has a relevant document")
    if unjudged:
        logger.warning("%d topics have no relevant document and are left out", len(unjudged))
    judged_set = set(judged)
    missing = tuple(qid for qid in judged if not run.get(qid))
    unknown = tuple(sorted(qid for qid in run if qid not in qrels))
    ranked = {
        qid: {docid: float(-rank) for rank, (docid, _) in enumerate(ranking, start=1)}
        for qid, ranking in run.items()
        if qid in judged_set and ranking
    }
    raw: dict[str, dict[Any, float]] = {qid: {} for qid in judged}
    wanted = list(dict.fromkeys(parsed.values()))
    if ranked:
        judged_qrels = {qid: qrels[qid] for qid in judged}
        for metric in ir_measures.iter_calc(wanted, judged_qrels, ranked):
            if metric.query_id in raw:
                raw[metric.query_id][metric.measure] = float(metric.value)
    per_topic: dict[str, dict[str, float]] = {}
    for qid in judged:
        values: dict[str, float] = {}
        for name, measure in parsed.items():
            value = raw[qid].get(measure, 0.0)
            values[name] = value * counts[qid] if name == "uMAP" else value
        per_topic[qid] = values
    n = len(judged)
    means = {name: sum(per_topic[qid][name] for qid in judged) / n for name in parsed}
    width = hoeffding_width(n, delta)
    confidence = {name: (None if name in UNBOUNDED else width) for name in parsed}
    return Evaluation(
        measures=tuple(parsed),
        per_topic=per_topic,
        means=means,
        confidence=confidence,
        delta=delta,
        unjudged=unjudged,
        missing=missing,
        unknown=unknown,
        relevant={qid: counts[qid] for qid in judged},
    )


def umap_direct(relevant: Mapping[str, int], ranking: Sequence[str]) -> float:
    """The seed's uMAP of one ranking, straight from its definition (for checks and docs).

    >>> umap_direct({"a": 1, "c": 1}, ["a", "b", "c"])  # P(1) + P(3) = 1 + 2/3
    1.6666666666666665
    """
    found = 0
    total = 0.0
    for k, docid in enumerate(ranking[:UMAP_DEPTH], start=1):
        if relevant.get(docid, 0) > 0:
            found += 1
            total += found / k
    return total
