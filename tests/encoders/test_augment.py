"""mathsearch.encoders.augment: identifier permutation of KDD 2020 section 4.2 (data
augmentation)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch

from mathsearch.encoders.augment import (
    identifier_permutation,
    identifier_permutations,
    mi_character_nodes,
    permute_identifiers,
)
from mathsearch.encoders.graph_data import EncoderInputError, collate, to_data
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.mathml_graph import EquationGraph, build_graph
from mathsearch.indexer.mathml_reader import parse_mathml
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.indexer.vocabulary import TEXT_TAG, Vocabulary, default_vocabulary

# tags: #text 0, mi 1, mo 2, mn 3, mrow 4, math 5; characters: x 0, y 1, + 2, 1 3
VOCAB = Vocabulary([TEXT_TAG, "mi", "mo", "mn", "mrow", "math"], [], ["x", "y", "+", "1"])


@lru_cache(maxsize=1)
def _sample_graphs() -> tuple[EquationGraph, ...]:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    parsed = Featuriser().parse_batch(records[:24])
    return tuple(p.graph for p in parsed if isinstance(p, ParsedEquation))


def _small() -> EquationGraph:
    # x + xy + 1: 0 math, 1 mrow, 2 mi, 3 "x", 4 mo, 5 "+", 6 mi, 7 "x", 8 "y", 9 mn, 10 "1"
    tree = parse_mathml("<math><mrow><mi>x</mi><mo>+</mo><mi>xy</mi><mn>1</mn></mrow></math>")
    return build_graph(tree, VOCAB)


def test_permutation_is_a_permutation_of_poisson_swaps() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        perm = identifier_permutation(192, rng)
        assert sorted(perm.tolist()) == list(range(192))
    assert identifier_permutation(192, rng, mean_swaps=0.0).tolist() == list(range(192))
    moved = [
        np.count_nonzero(identifier_permutation(192, rng) != np.arange(192)) for _ in range(200)
    ]
    assert 40 < np.mean(moved) < 64  # about 2 * 32 displaced slots, minus overlapping swaps


def test_batched_permutations_are_the_one_at_a_time_ones() -> None:
    """Same seed, same draws: the batched rounds give what one call per equation gives, and
    what each row's swaps applied one after the other by hand give."""
    count, num_chars = 300, 192
    perms = identifier_permutations(count, num_chars, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    one_by_one = np.stack([identifier_permutation(num_chars, rng) for _ in range(count)])
    assert np.array_equal(perms, one_by_one)
    rng = np.random.default_rng(7)
    for g in range(count):  # the definition, replayed with a plain loop of swaps
        swaps = int(rng.poisson(32.0))
        first = rng.integers(0, num_chars, size=swaps)
        second = (first + rng.integers(1, num_chars, size=swaps)) % num_chars
        expected = list(range(num_chars))
        for i, j in zip(first.tolist(), second.tolist(), strict=True):
            expected[i], expected[j] = expected[j], expected[i]
        assert perms[g].tolist() == expected
    assert len({tuple(row) for row in perms.tolist()}) == count  # independent rows


def test_mi_leaves_by_hand() -> None:
    found = mi_character_nodes(to_data(_small()), VOCAB.tag_id("mi"))
    assert torch.nonzero(found).flatten().tolist() == [3, 7, 8]


def test_only_identifier_characters_change_consistently() -> None:
    data = to_data(_small())
    out = permute_identifiers(data, VOCAB, np.random.default_rng(5), mean_swaps=400)
    chars = out.x_char.tolist()
    assert chars[3] == chars[7] != 0  # both x renamed the same way
    assert chars[8] != chars[3]  # y stays distinct from x
    assert chars[5] == 2 and chars[10] == 3  # + under mo and 1 under mn untouched
    assert [chars[i] for i in (0, 1, 2, 4, 6, 9)] == [-1] * 6  # elements carry no character
    for name in ("x_tag", "x_attr", "pos", "edge_index"):
        assert torch.equal(getattr(out, name), getattr(data, name))
    assert data.x_char.tolist()[3] == 0  # the input is not modified


def test_real_batch_one_permutation_per_equation() -> None:
    graphs = _sample_graphs()
    vocab = default_vocabulary()
    batch = collate(graphs)
    out = permute_identifiers(batch, vocab, np.random.default_rng(1))
    targets = mi_character_nodes(batch, vocab.tag_id("mi"))
    assert targets.any()
    assert torch.equal(out.x_char[~targets], batch.x_char[~targets])
    assert not torch.equal(out.x_char[targets], batch.x_char[targets])
    for g in range(batch.num_graphs):
        nodes = (batch.batch == g) & targets
        mapping: dict[int, int] = {}
        for old, new in zip(batch.x_char[nodes].tolist(), out.x_char[nodes].tolist(), strict=True):
            assert mapping.setdefault(old, new) == new  # consistent
        assert len(set(mapping.values())) == len(mapping)  # injective
    # sizes mean the default vocabulary
    again = permute_identifiers(batch, (32, 32, 192), np.random.default_rng(1))
    assert torch.equal(again.x_char, out.x_char)


def test_vocabulary_mismatch_is_refused() -> None:
    data = to_data(_small())
    with pytest.raises(EncoderInputError, match="another vocabulary"):
        permute_identifiers(data, default_vocabulary(), np.random.default_rng(0))
    with pytest.raises(EncoderInputError, match="do not match"):
        permute_identifiers(data, (8, 8, 8), np.random.default_rng(0))
