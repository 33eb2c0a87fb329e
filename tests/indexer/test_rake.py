"""RAKE (Rose et al. 2010): candidates, degree/frequency scores, keywords of real prose."""

from __future__ import annotations

from pathlib import Path

from mathsearch.indexer.extract import extract
from mathsearch.indexer.rake import (
    candidate_phrases,
    keyword_scores,
    rake_keywords,
    strip_latex,
    word_scores,
)

TEX = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "hep-th0301999.tex"

ABSTRACT = (
    "Compatibility of systems of linear constraints over the set of natural numbers. Criteria "
    "of compatibility of a system of linear Diophantine equations, strict inequations, and "
    "nonstrict inequations are considered. Upper bounds for components of a minimal set of "
    "solutions and algorithms of construction of minimal generating sets of solutions for all "
    "types of systems are given."
)


def test_candidates_split_at_stopwords_and_punctuation() -> None:
    assert candidate_phrases("the free action, of a scalar field.") == [
        ("free", "action"),
        ("scalar", "field"),
    ]


def test_word_score_is_degree_over_frequency() -> None:
    scores = word_scores([("minimal", "generating", "sets"), ("minimal", "set")])
    assert scores["minimal"] == (3 + 2) / 2
    assert scores["generating"] == 3.0


def test_rose_et_al_sample_abstract() -> None:
    """The paper's running example: the top keywords and their scores (Rose et al., fig. 1.3)."""
    scores = keyword_scores(ABSTRACT)
    assert scores["minimal generating sets"] == 8.5
    assert scores["linear diophantine equations"] == 8.5
    assert scores["linear constraints"] == 4.5
    top = [k for k, _ in rake_keywords(ABSTRACT)]
    assert top[:2] == ["linear diophantine equations", "minimal generating sets"]
    assert len(top) == len({w for k in scores for w in k.split()}) // 3


def test_latex_math_and_commands_are_delimiters() -> None:
    text = r"a scalar field $\phi$ on the circle \cite{x} of radius $R$"
    assert "phi" not in strip_latex(text)
    assert candidate_phrases(text) == [("scalar", "field"), ("circle",), ("radius",)]


def test_keywords_of_a_real_paper_context() -> None:
    records = [r for r in extract([str(TEX)], "tex") if getattr(r, "context", "")]
    assert records
    keywords = [k for k, _ in rake_keywords(records[0].context, max_words=3)]
    assert "scalar field" in keywords
    assert all(len(k.split()) <= 3 for k in keywords)
