"""The training corpus of the graph CNN: papers -> sections -> featurised equations.

KDD 2020 seed, sections 4.2 and 6: triplets are sampled by paper, section and citation, and the
train/test split is by paper. :class:`EquationCorpus` holds every equation's graph (featurised once
with :class:`mathsearch.indexer.parse.Featuriser`, the one featurisation of docs/architecture.md,
rule 2), the paper and section it comes from, and optional citation edges between papers.

* ``paper`` is the record's ``doc_id``; ``section`` its section title. Records without one (all
  hep-th record files, equations before the first ``\\section`` of a .tex file) have section
  ``""``: per paper they form one "unknown" section, so a same-section positive of such an anchor
  is a same-paper positive (see :mod:`mathsearch.encoders.sampler`).
* ``citations`` maps a paper to the papers it cites; edges to papers outside the corpus are
  ignored, and an edge makes both papers related (the seed: "one paper references the other").
* Featurisation failures are dropped and counted by reason (:attr:`EquationCorpus.failures`).

The featurised corpus is cached as one ``.npz`` of plain arrays plus a JSON header (no pickle),
named after a key over the vocabulary hash, the converter and the sources (path, size, mtime),
so that repeated training runs do not parse again::

    corpus = EquationCorpus.cached(["data/hepth2003/equation.txt"], "hepth", cache_dir)
    train, test = corpus.split_by_paper(test_fraction=0.2, seed=0)
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mathsearch.encoders.corpus_store import CorpusError
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure

logger = logging.getLogger(__name__)

__all__ = ["CorpusError", "EquationCorpus"]


class EquationCorpus:
    """Featurised equations grouped by paper and section (see the module docstring).

    Args:
        graphs: one graph per equation, all from the same vocabulary.
        eq_ids: the equation ids (``doc_id#position``).
        papers: the paper (``doc_id``) of each equation.
        sections: the section title of each equation ("" when unknown).
        citations: optional ``{paper: [cited paper, ...]}``.
        failures: counts of dropped equations by ``stage/reason``.

    Raises:
        CorpusError: when the columns differ in length or the graphs mix vocabularies.
    """

    def __init__(
        self,
        graphs: Sequence[EquationGraph],
        eq_ids: Sequence[str],
        papers: Sequence[str],
        sections: Sequence[str],
        *,
        citations: Mapping[str, Sequence[str]] | None = None,
        failures: Mapping[str, int] | None = None,
    ) -> None:
        if not len(graphs) == len(eq_ids) == len(papers) == len(sections):
            raise CorpusError("graphs, eq_ids, papers and sections must be equally long")
        hashes = {(g.vocab_hash, tuple(g.sizes)) for g in graphs}
        if len(hashes) > 1:
            raise CorpusError(f"the graphs come from {len(hashes)} different vocabularies")
        self.graphs: list[EquationGraph] = list(graphs)
        self.eq_ids: list[str] = list(eq_ids)
        self.vocab_hash: str = next(iter(hashes))[0] if hashes else ""
        self.failures: Counter[str] = Counter(failures or {})
        self.citations: dict[str, list[str]] = {
            str(k): [str(v) for v in vs] for k, vs in (citations or {}).items()
        }
        paper_index: dict[str, int] = {}
        section_index: dict[tuple[int, str], int] = {}
        eq_paper = np.empty(len(papers), dtype=np.int64)
        eq_section = np.empty(len(papers), dtype=np.int64)
        for i, (paper, section) in enumerate(zip(papers, sections, strict=True)):
            p = paper_index.setdefault(str(paper), len(paper_index))
            eq_paper[i] = p
            eq_section[i] = section_index.setdefault((p, str(section or "")), len(section_index))
        #: paper ids in order of first appearance; ``eq_paper[i]`` indexes this list
        self.paper_ids: list[str] = list(paper_index)
        #: ``(paper index, title)`` of each section; ``eq_section[i]`` indexes this list
        self.section_keys: list[tuple[int, str]] = list(section_index)
        self.eq_paper = eq_paper
        self.eq_section = eq_section

    # -- shape ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.graphs)

    def __repr__(self) -> str:
        return (
            f"EquationCorpus({len(self)} equations, {self.num_papers} papers, "
            f"{len(self.section_keys)} sections, vocab={self.vocab_hash[:12]})"
        )

    @property
    def num_papers(self) -> int:
        return len(self.paper_ids)

    @property
    def papers(self) -> list[str]:
        """The paper of each equation."""
        return [self.paper_ids[p] for p in self.eq_paper]

    @property
    def sections(self) -> list[str]:
        """The section title of each equation ("" when unknown)."""
        return [self.section_keys[s][1] for s in self.eq_section]

    def equations_per_paper(self) -> np.ndarray:
        """``(num_papers,)`` equation counts."""
        return np.bincount(self.eq_paper, minlength=self.num_papers)

    def paper_equations(self, paper: int) -> np.ndarray:
        """Indices of the equations of paper number ``paper``, in corpus order."""
        return np.flatnonzero(self.eq_paper == paper)

    def citation_neighbours(self) -> list[list[int]]:
        """Per paper index, the sorted indices of the corpus papers it cites or is cited by."""
        index = {paper: i for i, paper in enumerate(self.paper_ids)}
        neighbours: list[set[int]] = [set() for _ in self.paper_ids]
        for paper, cited in self.citations.items():
            p = index.get(paper)
            if p is None:
                continue
            for other in cited:
                q = index.get(other)
                if q is not None and q != p:
                    neighbours[p].add(q)
                    neighbours[q].add(p)
        return [sorted(found) for found in neighbours]

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def from_parsed(
        cls,
        items: Iterable[ParsedEquation | Failure],
        citations: Mapping[str, Sequence[str]] | None = None,
    ) -> EquationCorpus:
        """A corpus of already featurised equations; failures are counted, not kept."""
        graphs: list[EquationGraph] = []
        eq_ids: list[str] = []
        papers: list[str] = []
        sections: list[str] = []
        failures: Counter[str] = Counter()
        for item in items:
            if isinstance(item, Failure):
                failures[f"{item.stage}/{item.reason}"] += 1
                continue
            record = item.record
            graphs.append(item.graph)
            eq_ids.append(record.eq_id)
            papers.append(record.doc_id or record.eq_id)
            sections.append(record.section or "")
        corpus = cls(graphs, eq_ids, papers, sections, citations=citations, failures=failures)
        logger.info("%r; dropped %d failure(s)", corpus, sum(failures.values()))
        return corpus

    @classmethod
    def from_records(
        cls,
        items: Iterable[EquationRecord | Failure],
        featuriser: Featuriser | None = None,
        citations: Mapping[str, Sequence[str]] | None = None,
        limit: int | None = None,
    ) -> EquationCorpus:
        """Featurise extraction output once (at most ``limit`` equation records) into a corpus."""
        own = featuriser is None
        featuriser = featuriser or Featuriser()
        try:
            return cls.from_parsed(featuriser.parse_stream(_take(items, limit)), citations)
        finally:
            if own:
                featuriser.close()

    @classmethod
    def from_sources(
        cls,
        paths: Sequence[str],
        fmt: str | None = None,
        limit: int | None = None,
        *,
        featuriser: Featuriser | None = None,
        citations: Mapping[str, Sequence[str]] | None = None,
    ) -> EquationCorpus:
        """Extract (:func:`mathsearch.indexer.extract.extract`) and featurise ``paths`` into a
        corpus."""
        from mathsearch.indexer.extract import extract

        return cls.from_records(extract(list(paths), fmt), featuriser, citations, limit)

    @classmethod
    def cached(
        cls,
        paths: Sequence[str],
        fmt: str | None,
        cache_dir: str | os.PathLike[str],
        limit: int | None = None,
        *,
        featuriser: Featuriser | None = None,
        citations: Mapping[str, Sequence[str]] | None = None,
    ) -> EquationCorpus:
        """:meth:`from_sources` through a cache file in ``cache_dir`` (see :func:`cache_key`)."""
        own = featuriser is None
        featuriser = featuriser or Featuriser()
        try:
            from mathsearch.encoders.corpus_store import cache_key

            key = cache_key(paths, fmt, limit, featuriser, citations)
            path = Path(cache_dir) / f"corpus-{key[:20]}.npz"
            if path.exists():
                try:
                    corpus = cls.load(path, vocab_hash=featuriser.vocabulary.content_hash)
                except CorpusError as exc:
                    logger.warning("ignoring the corpus cache %s: %s", path, exc)
                else:
                    logger.info("loaded %r from the cache %s", corpus, path)
                    return corpus
            corpus = cls.from_sources(paths, fmt, limit, featuriser=featuriser, citations=citations)
            corpus.save(path)
            logger.info("cached the featurised corpus in %s", path)
            return corpus
        finally:
            if own:
                featuriser.close()

    # -- splitting --------------------------------------------------------------------------

    def subset(self, papers: Iterable[int]) -> EquationCorpus:
        """The equations of the given paper indices (corpus order kept, citations kept)."""
        wanted = np.zeros(self.num_papers, dtype=bool)
        wanted[list(papers)] = True
        keep = np.flatnonzero(wanted[self.eq_paper])
        titles = self.sections
        return EquationCorpus(
            [self.graphs[i] for i in keep],
            [self.eq_ids[i] for i in keep],
            [self.paper_ids[self.eq_paper[i]] for i in keep],
            [titles[i] for i in keep],
            citations=self.citations,
        )

    def split_by_paper(
        self, test_fraction: float = 0.2, seed: int = 0
    ) -> tuple[EquationCorpus, EquationCorpus]:
        """Random ``(train, test)`` split of the papers (seed, section 6.1): no paper in both.

        ``round(test_fraction * papers)`` papers (at least one, and at least one left for
        training) go to the test side.

        Raises:
            CorpusError: for a fraction outside (0, 1) or fewer than two papers.
        """
        if not 0.0 < test_fraction < 1.0:
            raise CorpusError(f"test_fraction must be in (0, 1), not {test_fraction}")
        if self.num_papers < 2:
            raise CorpusError(f"cannot split {self.num_papers} paper(s) into train and test")
        n_test = min(max(round(test_fraction * self.num_papers), 1), self.num_papers - 1)
        order = np.random.default_rng(seed).permutation(self.num_papers)
        test, train = order[:n_test], order[n_test:]
        return self.subset(sorted(train.tolist())), self.subset(sorted(test.tolist()))

    # -- cache files ------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the corpus as ``.npz`` (plain int arrays + a JSON header, no pickle)."""
        from mathsearch.encoders.corpus_store import write_corpus

        return write_corpus(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], vocab_hash: str | None = None) -> EquationCorpus:
        """Read a file written by :meth:`save`; refuses another layout or vocabulary.

        Raises:
            CorpusError: unreadable file, other format version, or ``vocab_hash`` mismatch.
        """
        from mathsearch.encoders.corpus_store import read_corpus

        columns = read_corpus(path, vocab_hash)
        return cls(**columns)

    def summary(self) -> dict[str, Any]:
        """Counts for logs and reports."""
        per_paper = self.equations_per_paper()
        return {
            "equations": len(self),
            "papers": self.num_papers,
            "papers_with_2_or_more": int((per_paper >= 2).sum()),
            "sections": len(self.section_keys),
            "citation_edges": sum(len(n) for n in self.citation_neighbours()) // 2,
            "failures": dict(self.failures),
            "vocab_hash": self.vocab_hash,
        }


def _take(
    items: Iterable[EquationRecord | Failure], limit: int | None
) -> Iterable[EquationRecord | Failure]:
    """Items until ``limit`` equation records have passed (failures do not count)."""
    if limit is None:
        yield from items
        return
    seen = 0
    for item in items:
        if not isinstance(item, Failure):
            if seen >= limit:
                return
            seen += 1
        yield item
