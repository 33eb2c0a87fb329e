r"""Wildcard topics: patterns made from real equations, with exact relevance by unification.

``mathsearch eval retrieval --task wildcard`` (issue 75, section 3) and the wildcard row of
``mathsearch bench query`` ask patterns with query variables (``?x``). A pattern is made from
one equation of the collection (:func:`make_pattern`):

1. the equation's MathML tree (the one featurisation,
   :class:`~mathsearch.indexer.parse.Featuriser`) is copied; an equation of more than
   ``max_source_tokens`` tokens (40) makes no pattern (people type short queries; it stays in
   the collection);
2. 1 to ``max_variables`` times (the count drawn uniformly), a sub-expression is drawn among
   the candidates: elements that are not the root, not a lone operator (``mo``), not text or
   space, not a bracket with scripts (``)^2``), hold no variable yet and at most
   ``max_fraction`` of the tree's elements; a leaf
   (an identifier or a number) or a compound one with even odds when both exist, then
   uniformly among those. Every sub-expression of the tree equal to it
   (:func:`~mathsearch.indexer.unify.equal_trees`) becomes the same variable, so a repeated
   sub-expression gives a repeated name (``x``, then ``y``, then ``z``);
3. a pattern whose variables leave fewer than ``min_fixed`` tokens (identifiers, numbers,
   operators) outside them, or less than ``min_fixed_fraction`` of the equation's tokens, is
   refused (nearly all variables: it says little about structure);
4. the tree is written as LaTeX (:func:`~mathsearch.indexer.unify.subtree_latex`,
   ``variables="question"``: ``?x``) and parsed back
   (:func:`~mathsearch.indexer.query_variables.parse_pattern`); only a pattern that gives the
   same tree again (``equal_trees``) and keeps structure tokens for the first stage is kept.
   Up to ``tries`` draws per equation, each from a generator seeded by the seed and the
   equation's id: a seed gives the same patterns whatever else is drawn.

The relevant set of a pattern (:func:`relevant_sets`) is every equation of the collection that
unifies with it as a whole equation (``unify(pattern.tree, tree) is not None``: each variable
binds one sub-expression, a repeated name equal ones), computed by brute force over the whole
collection: exact. The source equation is relevant and is not excluded from the rankings; its
rank is also reported on its own (the known item). A cheap necessary condition skips most
pairs first: the pattern's tokens outside its variables must all occur in the equation, as
often (unification maps every such token to an equal one). :func:`build_wildcard` builds the
relevance set of the task: the hep-th collection of ``same-document`` (the same papers for a
seed; ``--held-out`` / ``--validation`` restrict them), topics drawn round-robin over the
papers, qid ``w:<eq_id>``; Approach Zero gets each pattern in its own syntax
(``\qvar{x}``, :func:`~mathsearch.indexer.query_variables.to_qvar_syntax`).

Example::

    with Featuriser() as featuriser:
        parsed = featuriser.parse_latex(r"(a+b)^2 = \frac{a+b}{c}")
        made = make_pattern(parsed.tree, featuriser, random.Random("0:q"), source="q")
    made.latex, made.variables          # e.g. '(?x)^2 = \frac{?x}{c}', ('x',)
    data = build_wildcard(["equation.txt"], papers=100, topics=100, seed=0)
"""

from __future__ import annotations

import copy
import logging
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.relevance_sets import (
    CollectionEquation,
    RelevanceSet,
    _round_robin,
    featuriser_filter,
    hepth_collection,
)
from mathsearch.evaluation.trec_files import Qrels, Topic
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.query_variables import (
    QVAR_TAG,
    QueryVariableError,
    parse_pattern,
    to_qvar_syntax,
)
from mathsearch.indexer.unify import equal_trees, subtree_latex, unify

logger = logging.getLogger(__name__)

__all__ = [
    "QID_PREFIX",
    "VARIABLE_NAMES",
    "PatternSettings",
    "WildcardPattern",
    "build_wildcard",
    "candidate_nodes",
    "make_pattern",
    "make_patterns",
    "relevant_sets",
]

#: The names of a pattern's variables, in the order they are drawn.
VARIABLE_NAMES: tuple[str, ...] = ("x", "y", "z", "u", "v", "w")
#: A topic's qid is this prefix and its source equation's id.
QID_PREFIX = "w:"
#: Elements never replaced by a variable (besides the root): operators alone, text, space.
_NOT_REPLACED = frozenset({"mo", "mtext", "ms", "mspace", "none", "mprescripts", QVAR_TAG})
#: Scripted elements whose base is one of these operators are no sub-expression either: ``)^2``
#: is the end of a bracket, and replacing it leaves the bracket open.
_SCRIPTED = frozenset({"msub", "msup", "msubsup", "munder", "mover", "munderover"})
_FENCES = frozenset("()[]{}|\u2016\u27e8\u27e9\u2308\u2309\u230a\u230b")
#: Why an equation or a draw was refused (counted in the relevance set's info; and
#: ``duplicate``: a pattern an earlier equation gave).
REASONS = (
    "too-long", "no-candidate", "too-few-fixed-tokens", "not-round-trip", "no-structure-tokens"
)  # fmt: skip


@dataclass(frozen=True)
class PatternSettings:
    """How patterns are drawn (see the module docstring)."""

    max_variables: int = 3
    #: a replaced sub-expression holds at most this share of the equation's elements
    max_fraction: float = 0.5
    #: tokens (identifiers, numbers, operators) left outside the variables, at least
    min_fixed: int = 3
    #: ... and at least this share of the equation's tokens
    min_fixed_fraction: float = 0.5
    #: draws per equation before it gives no pattern
    tries: int = 8
    #: equations with more tokens make no pattern (0: any size): a pattern is a query, and
    #: people type short ones; long equations stay in the collection
    max_source_tokens: int = 40

    def __post_init__(self) -> None:
        if not 1 <= self.max_variables <= len(VARIABLE_NAMES):
            raise EvaluationError(
                f"max_variables must lie in 1..{len(VARIABLE_NAMES)}, not {self.max_variables}"
            )
        if self.tries < 1:
            raise EvaluationError(f"tries must be >= 1, not {self.tries}")


@dataclass(frozen=True)
class WildcardPattern:
    """A pattern made from one equation: its LaTeX in both syntaxes and its parsed tree.

    ``replaced`` maps each variable to the LaTeX of the sub-expression of ``source`` it stands
    for (the binding that makes the source match); ``neutral_latex`` is what the first stage
    searches (every variable a plain identifier).
    """

    source: str
    latex: str
    qvar_latex: str
    variables: tuple[str, ...]
    replaced: dict[str, str]
    tree: MathNode = field(compare=False, repr=False)
    neutral_latex: str = ""
    repeated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "latex": self.latex,
            "qvar_latex": self.qvar_latex,
            "neutral_latex": self.neutral_latex,
            "variables": list(self.variables),
            "replaced": dict(self.replaced),
            "repeated": self.repeated,
        }


def _tokens(node: MathNode) -> list[MathNode]:
    """The token elements (text, no children) that are not variables."""
    return [n for n in node.iter() if n.text is not None and not n.children and n.tag != QVAR_TAG]


def _has_variable(node: MathNode) -> bool:
    return any(n.tag == QVAR_TAG for n in node.iter())


def candidate_nodes(tree: MathNode, settings: PatternSettings | None = None) -> list[MathNode]:
    """The sub-expressions of ``tree`` a variable may replace, in pre-order (module docstring,
    step 2): not the root, not ``mo`` / text / space, no variable inside, at most
    ``max_fraction`` of the tree's elements."""
    settings = settings or PatternSettings()
    limit = settings.max_fraction * tree.size()
    out: list[MathNode] = []
    stack = list(reversed(tree.children))
    while stack:
        node = stack.pop()
        if node.tag == QVAR_TAG:
            continue
        stack.extend(reversed(node.children))
        if node.tag in _NOT_REPLACED or (node.text is None and not node.children):
            continue
        if node.tag in _SCRIPTED and _fence_base(node):
            continue
        if node.size() <= limit and not _has_variable(node):
            out.append(node)
    return out


def _fence_base(node: MathNode) -> bool:
    """Whether a scripted element's base is a bracket (``)^2``)."""
    base = node.children[0] if node.children else None
    while base is not None and base.tag == "mrow" and len(base.children) == 1:
        base = base.children[0]
    return base is not None and base.tag == "mo" and (base.text or "").strip() in _FENCES


def _replace_equal(tree: MathNode, target: MathNode, name: str) -> int:
    """Replace every sub-expression of ``tree`` equal to ``target`` (the root excepted) by the
    variable ``name``; how many were replaced."""
    replaced = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        for index, child in enumerate(node.children):
            if child.tag != QVAR_TAG and equal_trees(child, target):
                node.children[index] = MathNode(QVAR_TAG, text=name)
                replaced += 1
            else:
                stack.append(child)
    return replaced


def _draw(candidates: Sequence[MathNode], rng: random.Random) -> MathNode:
    """A leaf or a compound sub-expression with even odds (when both exist), then uniformly."""
    leaves = [node for node in candidates if not node.children]
    compound = [node for node in candidates if node.children]
    if leaves and compound:
        pool = leaves if rng.random() < 0.5 else compound
    else:
        pool = leaves or compound
    return pool[rng.randrange(len(pool))]


def make_pattern(
    tree: MathNode,
    featuriser: Featuriser,
    rng: random.Random,
    *,
    source: str = "",
    settings: PatternSettings | None = None,
    refused: Counter[str] | None = None,
) -> WildcardPattern | None:
    """A pattern of the equation ``tree`` (module docstring), or None when no draw of
    ``settings.tries`` is kept; ``refused`` counts why draws were refused."""
    settings = settings or PatternSettings()
    refused = refused if refused is not None else Counter()
    size = len(_tokens(tree))
    if settings.max_source_tokens and size > settings.max_source_tokens:
        refused["too-long"] += 1
        return None
    needed = max(settings.min_fixed, math.ceil(settings.min_fixed_fraction * size))
    for _ in range(settings.tries):
        work = copy.deepcopy(tree)
        count = rng.randint(1, settings.max_variables)
        replaced: dict[str, str] = {}
        repeated = False
        for name in VARIABLE_NAMES[:count]:
            candidates = candidate_nodes(work, settings)
            if not candidates:
                break
            chosen = _draw(candidates, rng)
            chosen_latex = subtree_latex(chosen)
            chosen_copy = copy.deepcopy(chosen)
            repeated |= _replace_equal(work, chosen_copy, name) > 1
            replaced[name] = chosen_latex
        if not replaced:
            refused["no-candidate"] += 1
            return None  # no draw can do better: the tree has no candidate at all
        if len(_tokens(work)) < needed:
            refused["too-few-fixed-tokens"] += 1
            continue
        made = _round_trip(work, featuriser)
        if made is None:
            refused["not-round-trip"] += 1
            continue
        latex, pattern = made
        if not pattern.structure_tokens:
            refused["no-structure-tokens"] += 1
            continue
        return WildcardPattern(
            source=source,
            latex=latex,
            qvar_latex=to_qvar_syntax(latex),
            variables=tuple(pattern.variables),
            replaced={name: replaced[name] for name in pattern.variables if name in replaced},
            tree=pattern.tree,
            neutral_latex=pattern.neutral_latex,
            repeated=repeated,
        )
    return None


def _round_trip(work: MathNode, featuriser: Featuriser) -> tuple[str, Any] | None:
    """``(latex, pattern)`` when the LaTeX of ``work`` parses back to the same tree."""
    try:
        latex = subtree_latex(work, variables="question")
        pattern = parse_pattern(latex, featuriser)
    except (QueryVariableError, IndexerError, ValueError, RecursionError) as exc:
        logger.debug("pattern refused: %s", exc)
        return None
    if not equal_trees(pattern.tree, work):
        return None
    return latex, pattern


def make_patterns(
    trees: Iterable[tuple[str, MathNode]],
    featuriser: Featuriser,
    count: int,
    *,
    seed: int = 0,
    settings: PatternSettings | None = None,
    refused: Counter[str] | None = None,
) -> list[WildcardPattern]:
    """Up to ``count`` patterns of distinct LaTeX from ``(eq_id, tree)`` pairs, in their order
    (one per equation at most; each equation's draws seeded by ``seed`` and its id)."""
    refused = refused if refused is not None else Counter()
    out: list[WildcardPattern] = []
    seen: set[str] = set()
    for eq_id, tree in trees:
        if len(out) >= count:
            break
        made = make_pattern(
            tree, featuriser, random.Random(f"{seed}:{eq_id}"), source=eq_id,
            settings=settings, refused=refused,
        )  # fmt: skip
        if made is None:
            continue
        if made.latex in seen:
            refused["duplicate"] += 1
            continue
        seen.add(made.latex)
        out.append(made)
    return out


#: Characters that make a token invisible to unification (it drops such fillers from rows).
_INVISIBLE = str.maketrans(dict.fromkeys("\u2061\u2062\u2063\u2064\u200b\u00a0"))


def _token_counts(tree: MathNode) -> Counter[tuple[str, str]]:
    """Identifiers, numbers and visible operators by (tag, stripped text): unification maps
    each such token of a pattern (outside its variables) to a distinct equal one."""
    counts: Counter[tuple[str, str]] = Counter()
    for node in _tokens(tree):
        text = (node.text or "").strip()
        if node.tag in ("mi", "mn", "mo") and text.translate(_INVISIBLE).strip():
            counts[(node.tag, text)] += 1
    return counts


def relevant_sets(
    patterns: Mapping[str, MathNode],
    trees: Mapping[str, MathNode],
    *,
    prefilter: bool = True,
) -> dict[str, list[str]]:
    """qid -> the ids of ``trees`` (in their order) that unify with the pattern as a whole,
    by brute force over every pair (``prefilter``: skip an equation that lacks one of the
    pattern's tokens outside its variables, a necessary condition of unification)."""
    counts = {eq_id: _token_counts(tree) for eq_id, tree in trees.items()} if prefilter else {}
    out: dict[str, list[str]] = {}
    for qid, pattern in patterns.items():
        needed = _token_counts(pattern) if prefilter else Counter()
        found = []
        for eq_id, tree in trees.items():
            if prefilter and any(counts[eq_id][key] < n for key, n in needed.items()):
                continue
            if unify(pattern, tree) is not None:
                found.append(eq_id)
        out[qid] = found
    return out


def build_wildcard(
    sources: Sequence[str | Path],
    *,
    papers: int,
    topics: int,
    seed: int = 0,
    only_papers: Collection[str] | None = None,
    settings: PatternSettings | None = None,
) -> RelevanceSet:
    """The relevance set of the wildcard task (module docstring): the ``same-document``
    collection of ``papers`` papers, ``topics`` patterns and their exact relevant sets.

    Raises:
        EvaluationError: ``papers`` or ``topics`` < 1, or no pattern could be made.
    """
    if papers < 1 or topics < 1:
        raise EvaluationError(f"papers ({papers}) and topics ({topics}) must be >= 1")
    parsed: dict[str, ParsedEquation] = {}
    with Featuriser() as featuriser:
        found = hepth_collection(
            sources, papers=papers, seed=seed, only_papers=only_papers,
            parseable=featuriser_filter(featuriser, keep=parsed),
        )  # fmt: skip
        collection = found.collection
        if not collection:
            raise EvaluationError(
                f"none of the {len(found.papers)} papers has a parseable equation"
            )
        trees = {e.eq_id: parsed[e.eq_id].tree for e in collection}
        order = _round_robin(found.members, len(collection), found.rng)
        refused: Counter[str] = Counter()
        patterns = make_patterns(
            ((eq_id, trees[eq_id]) for _, eq_id in order), featuriser, topics,
            seed=seed, settings=settings, refused=refused,
        )  # fmt: skip
    if not patterns:
        raise EvaluationError(f"no pattern could be made from {len(collection)} equations")
    info = {**found.info, "topics_asked": topics}
    return wildcard_relevance(collection, trees, patterns, info=info, refused=refused)


def wildcard_relevance(
    collection: Sequence[CollectionEquation],
    trees: Mapping[str, MathNode],
    patterns: Sequence[WildcardPattern],
    *,
    info: Mapping[str, Any] | None = None,
    refused: Mapping[str, int] | None = None,
) -> RelevanceSet:
    """The relevance set of ``patterns`` over ``collection`` (whose trees are ``trees``): the
    brute-force relevant sets, one topic per pattern whose relevant set holds its source (a
    pattern whose source does not unify is dropped and counted: it would be a bug)."""
    started = time.perf_counter()
    relevant = relevant_sets({QID_PREFIX + p.source: p.tree for p in patterns}, trees)
    seconds = time.perf_counter() - started
    paper = {e.eq_id: e.doc_id for e in collection}
    topic_list: list[Topic] = []
    qrels: Qrels = {}
    groups: dict[str, str] = {}
    known: dict[str, str] = {}
    peer: dict[str, str] = {}
    details: dict[str, dict[str, Any]] = {}
    unmatched = []
    for pattern in patterns:
        qid = QID_PREFIX + pattern.source
        if pattern.source not in relevant[qid]:
            unmatched.append(pattern.source)
            continue
        topic_list.append(Topic(qid=qid, latex=pattern.latex))
        qrels[qid] = {eq_id: 1 for eq_id in relevant[qid]}
        groups[qid] = paper[pattern.source]
        known[qid] = pattern.source
        peer[qid] = pattern.qvar_latex
        details[qid] = {**pattern.to_dict(), "relevant": len(relevant[qid])}
    if unmatched:
        logger.warning(
            "%d patterns do not unify with their own source (dropped): %s",
            len(unmatched), ", ".join(unmatched[:5]),
        )  # fmt: skip
    if not topic_list:
        raise EvaluationError("no pattern unifies with its own source equation")
    sizes = [len(qrels[t.qid]) for t in topic_list]
    counts = Counter(len(details[t.qid]["variables"]) for t in topic_list)
    data_info = {
        **dict(info or {}),
        "equations": len(collection),
        "topics": len(topic_list),
        "patterns_refused": dict(sorted((refused or {}).items())),
        "patterns_unmatched": len(unmatched),
        "variables": {str(n): counts[n] for n in sorted(counts)},
        "repeated_variables": sum(1 for t in topic_list if details[t.qid]["repeated"]),
        "relevant": {
            "mean": round(statistics.fmean(sizes), 2),
            "median": statistics.median(sizes),
            "max": max(sizes),
            "only_source": sum(1 for size in sizes if size == 1),
        },
        "qrels_seconds": round(seconds, 2),
    }
    logger.info(
        "wildcard: %d equations, %d patterns, %.1f relevant on average (%.1f s of unification)",
        len(collection), len(topic_list), data_info["relevant"]["mean"], seconds,
    )  # fmt: skip
    return RelevanceSet(
        "wildcard", list(collection), topic_list, qrels, groups, data_info,
        known_items=known, peer_latex=peer, details=details,
    )  # fmt: skip
