"""The training corpus of every equation in ``../shared/data``, split by paper once for all.

Three real sources hold hep-th equations (see ``../shared/data/README.md``):

* ``hepth2003/equation.txt`` + ``eqnarray.txt`` (format ``hepth``): ~20,700 display
  environments of ~630 papers of Jan-Mar 2003, no sections;
* ``hepth2003-documents/`` (format ``tex``): the full bodies of 588 of those papers, so the
  same equations again *with their section titles* (the KDD 2020 sampler's same-section
  positives, section 4.2);
* ``hep_array.txt.xz`` (format ``hepth``): ~97,500 ``array`` environments of ~12,000 hep-th
  papers of 1992-2003.

Paper ids are arXiv numbers in all three (``0301004``), so one paper is one paper everywhere.
The rules, applied in this order (the held-out and validation papers are left out of training):

1. **Held-out papers**: the test side of ``hepth2003`` split by paper exactly as the gcn-v1
   run did (:meth:`EquationCorpus.split_by_paper` with ``test_fraction`` 0.2, seed 0: 95 of 474
   papers). Those papers are dropped from *every* source, so ``eval ranking`` on ``hepth2003``
   and ``eval retrieval --task same-document --held-out`` keep measuring papers no model saw.
2. **Validation papers**: the training side of that split is split again
   (``VALIDATION_SPLIT``: 0.1, seed 1: 38 papers); they are dropped from every source too, so the
   search defaults can be tuned on papers that are neither trained on nor tested on
   (``eval retrieval --task same-document --validation``).
3. A paper with a full document takes its equations from the document (sections known), not
   from the ``hepth2003`` records (the same equations without sections).
4. ``hep_array`` papers that the two 2003 sources already cover are dropped: their arrays sit
   inside equations of the same paper, so they would make near-copies into positives.

:func:`shared_training_corpus` returns the training corpus, the held-out test corpus (the
``hepth2003`` records of the held-out papers) and a JSON-able description for the model card.
Each source goes through :meth:`EquationCorpus.cached`, so a second run parses nothing.

``sources`` picks which of the three to train on (``hepth2003`` is always read: it defines the
held-out and validation papers). The hep_array arrays are 87k of the 116k training equations
and 9.6k of the 10.1k papers, so with all three most anchors (drawn by paper) are arrays of
older papers; ``("hepth2003", "documents")`` trains on the 2003 papers' own equations only.

Example::

    train, test, card = shared_training_corpus("../shared/data", featuriser, cache_dir)
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from mathsearch.encoders.corpus import CorpusError, EquationCorpus
from mathsearch.indexer.parse import Featuriser

logger = logging.getLogger(__name__)

__all__ = [
    "HELD_OUT_SPLIT",
    "SHARED_SOURCES",
    "VALIDATION_SPLIT",
    "hepth2003_splits",
    "shared_sources",
    "shared_training_corpus",
]

#: The paper split of ``hepth2003`` whose test side is held out of every source.
HELD_OUT_SPLIT: dict[str, Any] = {"test_fraction": 0.2, "seed": 0, "limit": None}
#: The split of the remaining ``hepth2003`` papers whose test side is the validation set.
VALIDATION_SPLIT: dict[str, Any] = {"test_fraction": 0.1, "seed": 1}


def hepth2003_splits(
    hepth: EquationCorpus,
    validation: dict[str, Any] | None = VALIDATION_SPLIT,
    held_out_split: dict[str, Any] = HELD_OUT_SPLIT,
) -> tuple[EquationCorpus, EquationCorpus | None, EquationCorpus]:
    """``(train, validation, held_out)`` papers of the ``hepth2003`` corpus (module docstring);
    ``validation`` None: no validation set (everything but the held-out papers trains).
    ``held_out_split``: ``test_fraction`` and ``seed`` of the held-out side (a run's recorded
    ``split`` redoes that run's)."""
    rest, held_out = hepth.split_by_paper(
        float(held_out_split["test_fraction"]), int(held_out_split.get("seed", 0))
    )
    if not validation:
        return rest, None, held_out
    train, valid = rest.split_by_paper(validation["test_fraction"], validation["seed"])
    return train, valid, held_out


#: the sources of the shared data folder, in the order they are merged
SHARED_SOURCES = ("hepth2003", "documents", "hep_array")


def shared_sources(
    data_dir: str | os.PathLike[str], names: tuple[str, ...] = SHARED_SOURCES
) -> dict[str, tuple[list[str], str]]:
    """``{name: (paths, format)}`` of the three sources under ``data_dir``.

    Raises:
        CorpusError: when one of ``names`` is missing.
    """
    data = Path(data_dir)
    sources = {
        "hepth2003": (
            [str(data / "hepth2003" / n) for n in ("equation.txt", "eqnarray.txt")],
            "hepth",
        ),
        "documents": ([str(data / "hepth2003-documents")], "tex"),
        "hep_array": ([str(data / "hep_array.txt.xz")], "hepth"),
    }
    for name, (paths, _) in sources.items():
        for path in paths if name in names else ():
            if not Path(path).exists():
                raise CorpusError(f"{name}: {path} does not exist (is {data} the shared data?)")
    return sources


def _keep(corpus: EquationCorpus, drop: set[str]) -> EquationCorpus:
    return corpus.subset(i for i, paper in enumerate(corpus.paper_ids) if paper not in drop)


def shared_training_corpus(
    data_dir: str | os.PathLike[str],
    featuriser: Featuriser,
    cache_dir: str | os.PathLike[str],
    *,
    sources: tuple[str, ...] = SHARED_SOURCES,
) -> tuple[EquationCorpus, EquationCorpus, dict[str, Any]]:
    """``(train, held_out, description)`` from the shared data (see the module docstring).

    Args:
        data_dir: the ``../shared/data`` folder.
        featuriser: the featurisation of training, indexing and querying.
        cache_dir: where each source's featurised corpus is cached.
        sources: which of the three to train on (the held-out rule always applies).

    Raises:
        CorpusError: a missing source, or nothing left to train on.
    """
    unknown = set(sources) - set(SHARED_SOURCES)
    if unknown or not sources:
        raise CorpusError(
            f"unknown shared source(s) {sorted(unknown) or '(none given)'}; "
            f"known: {', '.join(SHARED_SOURCES)}"
        )
    paths = shared_sources(data_dir, ("hepth2003", *sources))
    corpora = {
        name: EquationCorpus.cached(files, fmt, cache_dir, featuriser=featuriser)
        for name, (files, fmt) in paths.items()
        if name == "hepth2003" or name in sources
    }
    hepth = corpora["hepth2003"]
    _, valid, held_out = hepth2003_splits(hepth)
    test_papers = set(held_out.paper_ids) | set(valid.paper_ids if valid is not None else [])
    parts: dict[str, EquationCorpus] = {}
    covered: set[str] = set()
    if "documents" in corpora:
        parts["documents"] = _keep(corpora["documents"], test_papers)
        covered |= set(corpora["documents"].paper_ids)
    if "hepth2003" in sources:
        parts["hepth2003"] = _keep(hepth, test_papers | covered)
    covered |= set(hepth.paper_ids)
    if "hep_array" in corpora:
        parts["hep_array"] = _keep(corpora["hep_array"], test_papers | covered)
    merged = _merge(list(parts.values()))
    if len(merged) == 0:
        raise CorpusError("no training equations left in the shared data")
    leak = test_papers & set(merged.paper_ids)
    if leak:  # cannot happen by construction; refuse rather than train on test papers
        raise CorpusError(f"{len(leak)} held-out or validation papers in the training corpus")
    description = {
        "sources": {name: [str(p) for p in paths[name][0]] for name in parts},
        "held_out": {
            "rule": "hepth2003 test side of split_by_paper, dropped from every source",
            **HELD_OUT_SPLIT,
            "papers": held_out.num_papers,
            "equations": len(held_out),
        },
        "validation": {
            "rule": "test side of the remaining hepth2003 papers split again, dropped too",
            **VALIDATION_SPLIT,
            "papers": valid.num_papers if valid is not None else 0,
        },
        "parts": {name: part.summary() for name, part in parts.items()},
        "hepth2003": hepth.summary(),
        "train": merged.summary(),
    }
    logger.info("shared training corpus: %r; held out %r", merged, held_out)
    return merged, held_out, description


def _merge(parts: list[EquationCorpus]) -> EquationCorpus:
    graphs, eq_ids, papers, sections = [], [], [], []
    for part in parts:
        graphs += part.graphs
        eq_ids += part.eq_ids
        papers += part.papers
        sections += part.sections
    if len(set(papers)) != sum(p.num_papers for p in parts):
        raise CorpusError("a paper appears in two parts of the shared corpus")
    return EquationCorpus(graphs, eq_ids, papers, sections)
