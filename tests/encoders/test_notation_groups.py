"""mathsearch.encoders.notation_groups: papers grouped by the symbols they write with."""

from __future__ import annotations

import numpy as np
import pytest

from mathsearch.encoders.notation_groups import (
    NotationGroupError,
    notation_groups,
    notation_vectors,
)


def _papers(chars_per_paper: list[list[int]]) -> tuple[np.ndarray, ...]:
    """One graph per paper whose nodes carry these character slots (-1: no character)."""
    char = np.array([c for chars in chars_per_paper for c in chars], dtype=np.int32)
    offsets = np.concatenate(([0], np.cumsum([len(c) for c in chars_per_paper])))
    return char, offsets, np.arange(len(chars_per_paper))


def test_vectors_are_unit_tf_idf_histograms() -> None:
    char, offsets, eq_paper = _papers([[0, 0, 1, -1], [1, 2], [2, 2, 2]])
    vectors = notation_vectors(char, offsets, eq_paper, 3)
    assert vectors.shape == (3, 3)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    # slot 0 is in one paper only, slot 1 in two: paper 0's rarer slot weighs more per count
    idf0, idf1 = np.log(4 / 2) + 1, np.log(4 / 3) + 1
    assert vectors[0, 0] / vectors[0, 1] == pytest.approx(2 * idf0 / idf1, rel=1e-5)
    assert vectors[2, 0] == 0 and vectors[2, 1] == 0


def test_papers_with_the_same_symbols_share_a_group() -> None:
    greek = [[40, 41, 42, 40, 41]] * 4  # four papers writing with slots 40-42
    latin = [[1, 2, 3, 1, 2]] * 4  # four with slots 1-3
    char, offsets, eq_paper = _papers(greek + latin)
    groups = notation_groups(char, offsets, eq_paper, 8, n_groups=2, seed=3)
    assert len(set(groups[:4].tolist())) == 1 and len(set(groups[4:].tolist())) == 1
    assert groups[0] != groups[4]
    again = notation_groups(char, offsets, eq_paper, 8, n_groups=2, seed=3)
    assert np.array_equal(groups, again)


def test_impossible_group_counts_are_refused() -> None:
    char, offsets, eq_paper = _papers([[1], [2]])
    with pytest.raises(NotationGroupError, match="n_groups"):
        notation_groups(char, offsets, eq_paper, 2, n_groups=3)
    with pytest.raises(NotationGroupError, match="n_groups"):
        notation_groups(char, offsets, eq_paper, 2, n_groups=0)
