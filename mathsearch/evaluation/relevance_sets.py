"""Relevance data from real data: a collection, topics and qrels, for three retrieval tasks.

* :func:`build_same_document` (the KDD 2020 seed's contextual similarity, section 4.2): hep-th
  papers are the documents; a topic is one equation of a paper, relevant are the other
  equations of the same paper, the query itself is excluded from its ranking. The collection
  is every parseable equation of ``papers`` randomly chosen papers (those with at least two
  records); topics come only from papers with at least two parseable equations, spread
  round-robin over the papers.
* :func:`build_equivalence` (SemVec, :mod:`mathsearch.indexer.semvec`): the collection is every
  member of
  the chosen validation sets, a topic is one member, relevant are the other members of its
  equivalence class; ``topics_per_set`` topics per set, round-robin over its classes of at
  least two members.
* ``wildcard`` (:func:`mathsearch.evaluation.wildcard_topics.build_wildcard`): the collection of
  :func:`build_same_document`; a topic is a pattern made from one equation by replacing
  sub-expressions with query variables, relevant is every equation that unifies with it.

"Parseable" means the one featurisation (:class:`~mathsearch.indexer.parse.Featuriser`) accepts the
LaTeX: what it refuses could not be indexed. The qid of a topic is the eq_id of its equation
(``w:<eq_id>`` for a wildcard pattern).
Everything is deterministic given the seed (papers, classes and members are sorted before
they are drawn). No cluster is involved.

Example::

    data = build_same_document(["../shared/data/hepth2003/equation.txt"], papers=100,
                               topics=200, seed=0)
    len(data.collection), len(data.topics), data.qrels[data.topics[0].qid]
    data = build_equivalence(validation_sets("../shared/data/semvec"), sets=["poly8"],
                             topics_per_set=50, seed=0)
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathsearch.core.errors import EvaluationError
from mathsearch.core.paths import SHARED_DATA as _SHARED_DATA
from mathsearch.evaluation.trec_files import Qrels, Topic
from mathsearch.indexer.hepth import iter_hepth
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.indexer.semvec import read_semvec, set_name

logger = logging.getLogger(__name__)

TASKS = ("same-document", "equivalence", "wildcard")

_PARSE_BATCH = 512

#: SemVec validation sets of the default equivalence task (13,754 expressions in all).
DEFAULT_SETS: tuple[str, ...] = ("boolean10", "largeBoolean5", "largeSimpleBoolean5", "poly8")
DEFAULT_SETS += ("simpleBoolean10", "simplepoly8")

#: The shared data beside the clone (``../shared/data``).
SHARED_DATA = _SHARED_DATA


@dataclass(frozen=True)
class CollectionEquation:
    """One equation of an evaluation collection; ``doc_id`` is its paper or its class."""

    eq_id: str
    doc_id: str
    latex: str

    def to_dict(self) -> dict[str, str]:
        return {"eq_id": self.eq_id, "doc_id": self.doc_id, "latex": self.latex}


#: Collection equations in, the ids the featurisation accepts out.
Parseable = Callable[[Sequence[CollectionEquation]], set[str]]


@dataclass
class RelevanceSet:
    """The collection, the topics (``exclude`` = the query's own id) and the qrels.

    ``groups`` maps a qid to the paper or class it was drawn from (a split by group keeps a
    paper's topics together); ``info`` counts what was read, refused and drawn.
    """

    task: str
    collection: list[CollectionEquation]
    topics: list[Topic]
    qrels: Qrels
    groups: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    #: qid -> the one equation a topic was made from, when it has one (wildcard patterns): the
    #: known item whose rank the evaluation reports beside the relevance measures
    known_items: dict[str, str] = field(default_factory=dict)
    #: qid -> the topic's LaTeX as Approach Zero reads it, where it differs (``\\qvar{x}``)
    peer_latex: dict[str, str] = field(default_factory=dict)
    #: qid -> what else a topic records (a wildcard pattern's source, variables, bindings)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)


def featuriser_filter(
    featuriser: Featuriser, keep: dict[str, ParsedEquation] | None = None
) -> Parseable:
    """A :data:`Parseable` over ``featuriser`` (batches of 512); logs the refusal reasons.

    ``keep``, when given, receives every accepted :class:`ParsedEquation` by id, so that a
    caller who embeds the collection featurises it only once.
    """

    def parseable(items: Sequence[CollectionEquation]) -> set[str]:
        kept: set[str] = set()
        reasons: Counter[str] = Counter()
        for start in range(0, len(items), _PARSE_BATCH):
            chunk = items[start : start + _PARSE_BATCH]
            records = [
                EquationRecord(eq_id=e.eq_id, doc_id=e.doc_id, position=0, latex=e.latex)
                for e in chunk
            ]
            for result in featuriser.parse_batch(records):
                if isinstance(result, ParsedEquation):
                    kept.add(result.eq_id)
                    if keep is not None:
                        keep[result.eq_id] = result
                else:
                    reasons[f"{result.stage}/{result.reason}"] += 1
        if reasons:
            logger.info("not parseable: %s", dict(reasons.most_common()))
        return kept

    return parseable


def _keep(items: list[CollectionEquation], parseable: Parseable | None) -> set[str]:
    if parseable is not None:
        return parseable(items)
    with Featuriser() as featuriser:
        return featuriser_filter(featuriser)(items)


def _round_robin(
    groups: dict[str, list[str]], count: int, rng: random.Random
) -> list[tuple[str, str]]:
    """``count`` (group, member) pairs: groups in a random order, one random member each round."""
    order = sorted(groups)
    rng.shuffle(order)
    pools = {group: rng.sample(sorted(groups[group]), len(groups[group])) for group in order}
    chosen: list[tuple[str, str]] = []
    while len(chosen) < count and any(pools.values()):
        for group in order:
            if pools[group] and len(chosen) < count:
                chosen.append((group, pools[group].pop()))
    return chosen


def _triple(
    task: str,
    collection: list[CollectionEquation],
    drawn: list[tuple[str, str]],
    members: dict[str, list[str]],
) -> tuple[list[Topic], Qrels, dict[str, str]]:
    latex = {e.eq_id: e.latex for e in collection}
    topics: list[Topic] = []
    qrels: Qrels = {}
    groups: dict[str, str] = {}
    for group, eq_id in drawn:
        topics.append(Topic(qid=eq_id, latex=latex[eq_id], exclude=(eq_id,)))
        qrels[eq_id] = {other: 1 for other in members[group] if other != eq_id}
        groups[eq_id] = group
    logger.info("%s: %d equations, %d topics", task, len(collection), len(topics))
    return topics, qrels, groups


@dataclass
class HepthCollection:
    """Every parseable equation of some hep-th papers (:func:`hepth_collection`): the
    collection, its equations by paper, what was read, and the generator that drew the papers
    (the tasks draw their topics from it next, so that a seed gives one result)."""

    collection: list[CollectionEquation]
    members: dict[str, list[str]]
    info: dict[str, Any]
    rng: random.Random
    papers: list[str]


def hepth_collection(
    sources: Sequence[str | Path],
    *,
    papers: int,
    seed: int = 0,
    parseable: Parseable | None = None,
    only_papers: Collection[str] | None = None,
) -> HepthCollection:
    """``papers`` randomly chosen hep-th papers (among ``only_papers`` when given; those with at
    least two records) and every parseable equation of theirs, in file order.

    Raises:
        EvaluationError: ``papers`` < 1.
    """
    if papers < 1:
        raise EvaluationError(f"papers ({papers}) must be >= 1")
    positions: dict[str, int] = {}
    by_paper: dict[str, list[EquationRecord]] = {}
    read = 0
    for source in sources:
        for item in iter_hepth(source, positions=positions):
            if isinstance(item, EquationRecord) and item.latex:
                by_paper.setdefault(item.doc_id, []).append(item)
                read += 1
    candidates = sorted(doc for doc, records in by_paper.items() if len(records) >= 2)
    if only_papers is not None:
        allowed = set(only_papers)
        candidates = [doc for doc in candidates if doc in allowed]
    rng = random.Random(seed)
    chosen = sorted(rng.sample(candidates, min(papers, len(candidates))))
    items = [
        CollectionEquation(r.eq_id, r.doc_id, r.latex or "")
        for doc in chosen
        for r in by_paper[doc]
    ]
    kept = _keep(items, parseable)
    collection = [e for e in items if e.eq_id in kept]
    members: dict[str, list[str]] = {}
    for equation in collection:
        members.setdefault(equation.doc_id, []).append(equation.eq_id)
    info = {
        "sources": [str(s) for s in sources],
        "seed": seed,
        "equations_read": read,
        "papers_available": len(candidates),
        "papers_restricted_to": None if only_papers is None else len(set(only_papers)),
        "papers": len(chosen),
        "equations": len(collection),
        "not_parseable": len(items) - len(collection),
    }
    return HepthCollection(collection, members, info, rng, chosen)


def build_same_document(
    sources: Sequence[str | Path],
    *,
    papers: int,
    topics: int,
    seed: int = 0,
    parseable: Parseable | None = None,
    only_papers: Collection[str] | None = None,
) -> RelevanceSet:
    """Same-paper relevance on hep-th record files (see the module docstring).

    ``parseable`` decides which equations can be indexed (default: the featurisation);
    ``only_papers`` restricts the papers drawn from (e.g. those a model never trained on).

    Raises:
        EvaluationError: ``papers`` or ``topics`` < 1, or no paper has two parseable equations.
    """
    if papers < 1 or topics < 1:
        raise EvaluationError(f"papers ({papers}) and topics ({topics}) must be >= 1")
    found = hepth_collection(
        sources, papers=papers, seed=seed, parseable=parseable, only_papers=only_papers
    )
    collection, members = found.collection, found.members
    topical = {doc: ids for doc, ids in members.items() if len(ids) >= 2}
    if not topical:
        raise EvaluationError(
            f"none of the {len(found.papers)} papers has two parseable equations: nothing to ask"
        )
    drawn = _round_robin(topical, topics, found.rng)
    topic_list, qrels, groups = _triple("same-document", collection, drawn, members)
    info = {
        **{key: found.info[key] for key in ("sources", "seed", "equations_read")},
        "papers_available": found.info["papers_available"],
        "papers_restricted_to": found.info["papers_restricted_to"],
        "papers": found.info["papers"],
        "papers_with_topics": len(topical),
        "equations": len(collection),
        "not_parseable": found.info["not_parseable"],
        "topics": len(topic_list),
        "topics_asked": topics,
    }
    return RelevanceSet("same-document", collection, topic_list, qrels, groups, info)


def build_equivalence(
    files: Iterable[str | Path],
    *,
    sets: Sequence[str] | None = None,
    topics_per_set: int,
    seed: int = 0,
    parseable: Parseable | None = None,
) -> RelevanceSet:
    """Equivalence-class relevance on SemVec set files (see the module docstring).

    ``sets`` picks set names among ``files`` (default: every file given).

    Raises:
        EvaluationError: an unknown set name, ``topics_per_set`` < 1, or no class with two
            members.
        ExtractionError, SemvecTokenError: a file is unreadable or holds an unmapped token.
    """
    if topics_per_set < 1:
        raise EvaluationError(f"topics per set ({topics_per_set}) must be >= 1")
    available = {set_name(path): Path(path) for path in files}
    wanted = list(dict.fromkeys(sets)) if sets else sorted(available)
    unknown = [name for name in wanted if name not in available]
    if unknown:
        raise EvaluationError(
            f"unknown SemVec set(s) {', '.join(unknown)}; available: {', '.join(sorted(available))}"
        )
    rng = random.Random(seed)
    items: list[CollectionEquation] = []
    classes_of: dict[str, list[str]] = {}
    for name in sorted(wanted):
        for klass in read_semvec(available[name]):
            classes_of.setdefault(name, []).append(klass.class_id)
            items += [CollectionEquation(m.eq_id, klass.class_id, m.latex) for m in klass.members]
    kept = _keep(items, parseable)
    collection = [e for e in items if e.eq_id in kept]
    members: dict[str, list[str]] = {}
    for equation in collection:
        members.setdefault(equation.doc_id, []).append(equation.eq_id)
    drawn: list[tuple[str, str]] = []
    per_set: dict[str, int] = {}
    for name in sorted(wanted):
        topical = {c: members[c] for c in classes_of.get(name, []) if len(members.get(c, [])) >= 2}
        picked = _round_robin(topical, topics_per_set, rng)
        per_set[name] = len(picked)
        drawn += picked
    if not drawn:
        raise EvaluationError("no equivalence class of the chosen sets has two members")
    topic_list, qrels, groups = _triple("equivalence", collection, drawn, members)
    info = {
        "sets": sorted(wanted),
        "seed": seed,
        "classes": sum(len(v) for v in classes_of.values()),
        "equations": len(collection),
        "not_parseable": len(items) - len(collection),
        "topics": len(topic_list),
        "topics_per_set": per_set,
    }
    return RelevanceSet("equivalence", collection, topic_list, qrels, groups, info)
