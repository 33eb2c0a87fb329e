"""The relevance data of each ``eval retrieval --task``, built by name: :func:`build_relevance`
(same-document and equivalence from :mod:`mathsearch.evaluation.relevance_sets`, wildcard from
:mod:`mathsearch.evaluation.wildcard_topics`)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from pathlib import Path

from mathsearch.core.errors import EvaluationError
from mathsearch.core.paths import SHARED_DATA
from mathsearch.evaluation.relevance_sets import (
    DEFAULT_SETS,
    TASKS,
    Parseable,
    RelevanceSet,
    build_equivalence,
    build_same_document,
)
from mathsearch.evaluation.wildcard_topics import build_wildcard

logger = logging.getLogger(__name__)

__all__ = ["build_relevance"]


def build_relevance(
    task: str,
    *,
    sources: Sequence[str | Path] | None = None,
    semvec_dir: str | Path | None = None,
    papers: int = 100,
    topics: int = 200,
    sets: Sequence[str] | None = None,
    seed: int = 0,
    only_papers: Collection[str] | None = None,
    parseable: Parseable | None = None,
) -> RelevanceSet:
    """The relevance set of ``task`` from the shared data (or the given sources).

    ``parseable`` decides which equations enter the collection (default: the featurisation;
    pass one that keeps what it parses to featurise the collection only once).

    same-document: ``papers`` papers (among ``only_papers`` when given) and ``topics`` topics
    of ``sources`` (default ``../shared/data/hepth2003/equation.txt``); equivalence:
    ``topics`` topics per SemVec set of ``sets`` (default :data:`DEFAULT_SETS`) in
    ``semvec_dir`` (default ``../shared/data/semvec``).

    Raises:
        EvaluationError: an unknown task, or data that is not there.
    """
    if task not in TASKS:
        raise EvaluationError(f"unknown task {task!r}: one of {', '.join(TASKS)}")
    if task in ("same-document", "wildcard"):
        paths = [Path(s) for s in sources or [SHARED_DATA / "hepth2003" / "equation.txt"]]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise EvaluationError(f"no hep-th source {missing[0]}: pass --source FILE")
        if task == "wildcard":
            return build_wildcard(
                paths, papers=papers, topics=topics, seed=seed, only_papers=only_papers
            )
        return build_same_document(
            paths,
            papers=papers,
            topics=topics,
            seed=seed,
            only_papers=only_papers,
            parseable=parseable,
        )
    folder = Path(semvec_dir) if semvec_dir else SHARED_DATA / "semvec"
    files = sorted(folder.glob("*-validationset.json.gz"))
    if not files:
        raise EvaluationError(f"no SemVec validation sets in {folder}: pass --semvec DIR")
    chosen = list(sets) if sets else list(DEFAULT_SETS)
    return build_equivalence(
        files, sets=chosen, topics_per_set=topics, seed=seed, parseable=parseable
    )
