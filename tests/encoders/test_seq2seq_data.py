"""ExpEmb data: vocabulary (hash shared with the runtime), E-Gen clusters, pairs, batches."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from mathsearch.encoders.seq2seq import EOE, PAD, SOE, UNK
from mathsearch.encoders.seq2seq_data import (
    SPECIALS,
    EncodedPairs,
    TokenVocabulary,
    VocabularyError,
    autoencoder_pairs,
    cluster_pairs,
    make_batch,
    read_egen,
    semvec_pairs,
    split_clusters,
)
from mathsearch.indexer.semvec_prefix import read_semvec_prefix
from mathsearch.runtime.seq2seq_runtime import load_vocab_tokens, vocab_hash

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
EGEN = RESOURCES / "encoders" / "egen-clusters.txt"
SEMVEC = RESOURCES / "indexer" / "semvec" / "oneVarPoly10-validationset.json.gz"


def test_read_egen_clusters() -> None:
    clusters = read_egen([EGEN])
    assert len(clusters) >= 25  # one-member clusters are no pairs and are dropped
    assert all(len(c) >= 2 for c in clusters)
    assert ("+", "x", "pow", "csc", "+", "-70", "*", "6", "pi", "-1") in clusters[0]
    assert len(read_egen([EGEN], limit=3)) == 3
    assert all(len(s) <= 8 for c in read_egen([EGEN], max_len=8) for s in c)


def test_split_is_stable_and_disjoint() -> None:
    clusters = read_egen([EGEN])
    train, held = split_clusters(clusters, 0.3)
    assert len(train) + len(held) == len(clusters) and held and train
    assert split_clusters(list(reversed(clusters)), 0.3)[1] == list(reversed(held))


def test_pairs() -> None:
    clusters = read_egen([EGEN])
    pairs = cluster_pairs(clusters, random.Random(0), per_cluster=6)
    members = {s: n for n, c in enumerate(clusters) for s in c}
    assert all(a != b and members[a] == members[b] for a, b in pairs)
    assert all(a == b for a, b in autoencoder_pairs(s for c in clusters for s in c))
    classes = read_semvec_prefix(SEMVEC)
    kept = semvec_pairs(classes, random.Random(0), exclude={classes[0].canonical})
    assert kept and not any(a in classes[0].members for a, _ in kept)


def test_vocabulary_round_trip_and_hash(tmp_path: Path) -> None:
    sequences = [s for c in read_egen([EGEN]) for s in c]
    vocab = TokenVocabulary.build(sequences, min_count=2)
    assert tuple(vocab.tokens[:4]) == SPECIALS and "x" in vocab.index
    assert vocab.encode(["x", "never-seen"])[1] == UNK
    saved = vocab.save(tmp_path / "vocab.json")
    assert TokenVocabulary.load(saved).tokens == vocab.tokens
    assert vocab_hash(load_vocab_tokens(saved)) == vocab.hash  # the runtime's hash is the same
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    with pytest.raises(VocabularyError):
        TokenVocabulary.load(tmp_path / "bad.json")


def test_batch_is_teacher_forcing() -> None:
    vocab = TokenVocabulary([*SPECIALS, "+", "x", "1", "pow", "2"])
    batch = make_batch([(("+", "x", "1"), ("+", "1", "x")), (("x",), ("pow", "x", "2"))], vocab)
    assert batch.src.tolist() == [[4, 5, 6], [5, PAD, PAD]]
    assert batch.lengths.tolist() == [3, 1]
    assert batch.tgt_in.tolist() == [[SOE, 4, 6, 5], [SOE, 7, 5, 8]]
    assert batch.tgt_out.tolist() == [[4, 6, 5, EOE], [7, 5, 8, EOE]]


def _semvec_all_pairs() -> list:
    return semvec_pairs(read_semvec_prefix(SEMVEC), random.Random(0), all_pairs=True)


def test_encoded_pairs_store_each_sequence_once_and_give_back_every_pair() -> None:
    pairs = _semvec_all_pairs()
    vocab = TokenVocabulary.build((s for p in pairs for s in p), 1)
    table = EncodedPairs.build(pairs, vocab)
    distinct = {s for p in pairs for s in p}
    assert len(table) == len(pairs) and table.index.dtype == np.int32
    assert len(table.sequences) == len(distinct) < 2 * len(pairs)
    rows = np.arange(len(pairs))
    for (a, b), (ids_a, ids_b) in zip(pairs, table.take(rows), strict=True):
        assert ids_a.tolist() == vocab.encode(a) and ids_b.tolist() == vocab.encode(b)


def test_encoded_pairs_batches_cover_an_epoch_bucketed_and_seeded() -> None:
    pairs = _semvec_all_pairs()
    table = EncodedPairs.build(pairs, TokenVocabulary.build((s for p in pairs for s in p), 1))
    size = 8
    batches = table.batches(size, random.Random(1))
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(len(pairs)))  # every pair once an epoch
    assert sum(len(b) < size for b in batches) <= 1  # only the last chunk's tail is short
    lengths = np.array([len(s) for s in table.sequences])

    def padding(groups: list[np.ndarray]) -> float:
        tgt = [lengths[table.index[g, 1]] for g in groups]
        pad = sum(float((t.max() - t).sum()) for t in tgt)
        return pad / sum(int(t.max()) * len(t) for t in tgt)

    shuffled = np.random.default_rng(0).permutation(len(pairs))
    unbucketed = [shuffled[i : i + size] for i in range(0, len(pairs), size)]
    assert padding(batches) < padding(unbucketed) / 3  # sorting by length within chunks
    again = table.batches(size, random.Random(1))
    assert all(np.array_equal(x, y) for x, y in zip(batches, again, strict=True))
    other = table.batches(size, random.Random(2))
    assert not all(np.array_equal(x, y) for x, y in zip(batches, other, strict=True))
    with pytest.raises(ValueError, match="batch size"):
        table.batches(0, random.Random(0))
