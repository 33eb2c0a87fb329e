"""mathsearch.encoders.corpus: papers -> sections -> featurised equations, split by paper, cache
files."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from mathsearch.encoders.corpus import CorpusError, EquationCorpus
from mathsearch.encoders.corpus_store import cache_key
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.vocabulary import default_vocabulary


@lru_cache(maxsize=1)
def _sample() -> EquationCorpus:
    return EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))


class CountingFeaturiser(Featuriser):
    """Counts how many records go through the parser."""

    def __init__(self) -> None:
        super().__init__()
        self.parsed = 0

    def parse_batch(self, records: Sequence[EquationRecord]) -> list:
        self.parsed += len(records)
        return super().parse_batch(records)


def test_hepth_sample_is_grouped_by_paper_with_unknown_sections() -> None:
    corpus = _sample()
    assert len(corpus) == 206
    assert corpus.num_papers == 8
    assert sorted(corpus.equations_per_paper().tolist()) == [11, 15, 22, 25, 27, 31, 36, 39]
    # hep-th records carry no section: one "" section per paper
    assert set(corpus.sections) == {""}
    assert len(corpus.section_keys) == corpus.num_papers
    assert corpus.vocab_hash == default_vocabulary().content_hash
    assert all(g.vocab_hash == corpus.vocab_hash for g in corpus.graphs)
    assert corpus.failures == {"extract/macro-fragment": 18}
    assert corpus.eq_ids[0] == "0301004#0"
    assert corpus.papers[0] == "0301004"
    for paper in range(corpus.num_papers):
        members = corpus.paper_equations(paper)
        assert {corpus.papers[i] for i in members} == {corpus.paper_ids[paper]}


def test_each_equation_is_featurised_once_and_failures_are_counted() -> None:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    bad = EquationRecord(eq_id="bad#0", doc_id="bad", position=0, latex=r"\frac{a")
    featuriser = CountingFeaturiser()
    corpus = EquationCorpus.from_records([*records[:30], bad], featuriser)
    assert featuriser.parsed == 31
    assert len(corpus) == 30
    assert sum(corpus.failures.values()) == 1
    assert next(iter(corpus.failures)).startswith("convert/")
    assert "bad" not in corpus.paper_ids


def test_limit_counts_equation_records() -> None:
    corpus = EquationCorpus.from_records(iter_hepth(bundled_sample_lines()), limit=25)
    assert len(corpus) == 25


def test_tex_sources_keep_their_sections(tmp_path: Path) -> None:
    source = tmp_path / "paper.tex"
    source.write_text(
        textwrap.dedent(r"""
        \documentclass{article}
        \begin{document}
        \section{Gauge fields}
        \begin{equation} F_{\mu\nu} = \partial_\mu A_\nu - \partial_\nu A_\mu \end{equation}
        \begin{equation} D_\mu = \partial_\mu - i A_\mu \end{equation}
        \section{Gravity}
        \begin{equation} R_{\mu\nu} - \frac{1}{2} g_{\mu\nu} R = 8 \pi G T_{\mu\nu} \end{equation}
        \begin{equation} ds^2 = g_{\mu\nu} dx^\mu dx^\nu \end{equation}
        \begin{equation} \Gamma^\lambda_{\mu\nu} = \frac12 g^{\lambda\sigma} \end{equation}
        \end{document}
        """),
        encoding="utf-8",
    )
    corpus = EquationCorpus.from_sources([str(source)], "tex")
    assert len(corpus) == 5
    assert corpus.num_papers == 1
    assert corpus.sections == ["Gauge fields"] * 2 + ["Gravity"] * 3
    assert [title for _, title in corpus.section_keys] == ["Gauge fields", "Gravity"]
    assert corpus.eq_section.tolist() == [0, 0, 1, 1, 1]


def test_citations_are_symmetric_and_limited_to_the_corpus() -> None:
    graph = _sample().graphs[0]
    corpus = EquationCorpus(
        [graph] * 4,
        ["a#0", "a#1", "b#0", "c#0"],
        ["a", "a", "b", "c"],
        ["", "", "", ""],
        citations={"a": ["b", "elsewhere", "a"], "c": ["b"]},
    )
    assert corpus.citation_neighbours() == [[1], [0, 2], [1]]


def test_mismatched_columns_are_refused() -> None:
    graph = _sample().graphs[0]
    with pytest.raises(CorpusError):
        EquationCorpus([graph], ["a#0", "a#1"], ["a"], [""])


def test_split_by_paper_is_disjoint_complete_and_seeded() -> None:
    corpus = _sample()
    train, test = corpus.split_by_paper(test_fraction=0.25, seed=0)
    assert set(train.paper_ids).isdisjoint(test.paper_ids)
    assert set(train.paper_ids) | set(test.paper_ids) == set(corpus.paper_ids)
    assert test.num_papers == 2
    assert len(train) + len(test) == len(corpus)
    assert set(train.eq_ids) | set(test.eq_ids) == set(corpus.eq_ids)
    # every equation keeps its paper and section
    where = dict(zip(corpus.eq_ids, zip(corpus.papers, corpus.sections, strict=True), strict=True))
    for side in (train, test):
        for eq_id, paper, section in zip(side.eq_ids, side.papers, side.sections, strict=True):
            assert where[eq_id] == (paper, section)
    again = corpus.split_by_paper(test_fraction=0.25, seed=0)
    assert again[1].paper_ids == test.paper_ids
    tests = {tuple(corpus.split_by_paper(0.25, seed)[1].paper_ids) for seed in range(10)}
    assert len(tests) > 1


def test_split_needs_two_papers_and_a_proper_fraction() -> None:
    corpus = _sample()
    for fraction in (0.0, 1.0, -0.1):
        with pytest.raises(CorpusError):
            corpus.split_by_paper(fraction)
    one = corpus.subset([0])
    with pytest.raises(CorpusError):
        one.split_by_paper(0.5)
    # tiny fractions still hold out one paper, large ones keep one for training
    assert corpus.split_by_paper(0.01)[1].num_papers == 1
    assert corpus.split_by_paper(0.99)[0].num_papers == 1


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    corpus = _sample().subset(range(8))
    corpus.citations = {"0301004": ["0301005"]}
    path = corpus.save(tmp_path / "corpus.npz")
    loaded = EquationCorpus.load(path, vocab_hash=corpus.vocab_hash)
    assert loaded.eq_ids == corpus.eq_ids
    assert loaded.papers == corpus.papers
    assert loaded.sections == corpus.sections
    assert loaded.citations == corpus.citations
    assert loaded.failures == corpus.failures
    assert all(a == b for a, b in zip(loaded.graphs, corpus.graphs, strict=True))
    assert np.array_equal(loaded.eq_section, corpus.eq_section)


def test_load_refuses_another_vocabulary_and_broken_files(tmp_path: Path) -> None:
    path = _sample().subset([0]).save(tmp_path / "corpus.npz")
    with pytest.raises(CorpusError, match="vocabulary"):
        EquationCorpus.load(path, vocab_hash="0" * 64)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip file")
    with pytest.raises(CorpusError):
        EquationCorpus.load(broken)


def test_cached_parses_once_then_reads_the_cache(tmp_path: Path) -> None:
    source = tmp_path / "sample.txt"
    source.write_text("".join(bundled_sample_lines()), encoding="utf-8")
    first = CountingFeaturiser()
    corpus = EquationCorpus.cached([str(source)], "hepth", tmp_path / "cache", featuriser=first)
    assert first.parsed > 0
    assert len(list((tmp_path / "cache").glob("corpus-*.npz"))) == 1
    second = CountingFeaturiser()
    again = EquationCorpus.cached([str(source)], "hepth", tmp_path / "cache", featuriser=second)
    assert second.parsed == 0
    assert again.eq_ids == corpus.eq_ids
    assert all(a == b for a, b in zip(again.graphs, corpus.graphs, strict=True))
    # another limit is another corpus
    limited = EquationCorpus.cached(
        [str(source)], "hepth", tmp_path / "cache", limit=10, featuriser=second
    )
    assert len(limited) == 10
    assert len(list((tmp_path / "cache").glob("corpus-*.npz"))) == 2


def test_cache_key_follows_vocabulary_converter_and_sources(tmp_path: Path) -> None:
    source = tmp_path / "a.txt"
    source.write_text("x", encoding="utf-8")
    featuriser = Featuriser()
    key = cache_key([str(source)], "hepth", None, featuriser)
    assert key == cache_key([str(source)], "hepth", None, featuriser)
    assert key != cache_key([str(source)], "hepth", 5, featuriser)
    assert key != cache_key([str(source)], "tex", None, featuriser)
    assert key != cache_key([str(source)], "hepth", None, Featuriser(strict=True))
    source.write_text("y", encoding="utf-8")  # same size, other bytes
    assert key != cache_key([str(source)], "hepth", None, featuriser)
    source.write_text("longer", encoding="utf-8")
    assert key != cache_key([str(source)], "hepth", None, featuriser)


def test_a_fresh_copy_of_the_same_sources_keeps_its_cache_key(tmp_path: Path) -> None:
    """The key follows the bytes, not the modification time (a new copy of the shared data)."""
    source = tmp_path / "a.txt"
    source.write_text("x", encoding="utf-8")
    featuriser = Featuriser()
    key = cache_key([str(source)], "hepth", None, featuriser)
    os.utime(source, ns=(1, 1))
    assert key == cache_key([str(source)], "hepth", None, featuriser)


def test_failures_only_make_an_empty_corpus() -> None:
    failure = Failure("x#0", "x", "extract", "macro-fragment")
    corpus = EquationCorpus.from_records([failure])
    assert len(corpus) == 0
    assert corpus.failures == {"extract/macro-fragment": 1}
