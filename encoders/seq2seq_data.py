"""Data of the ExpEmb seq2seq encoder: token vocabulary, equivalent pairs, batches.

* :class:`TokenVocabulary`: prefix tokens -> ids, with 4 reserved ids (``<pad> <soe> <eoe>
  <unk>``); saved as JSON (``{"format", "tokens"}``); :attr:`TokenVocabulary.hash` (SHA-256 of
  the token list) is the model card's ``vocab_hash``.
* :func:`read_egen`: E-Gen clusters (``../shared/data/egen/*.txt``: prefix lines, clusters
  separated by blank lines); a split by cluster (:func:`split_clusters`) keeps held-out clusters
  unseen.
* :func:`cluster_pairs`: ordered pairs of different members of a cluster (EXPEMB-E,
  section 4), at most ``per_cluster`` each; :func:`autoencoder_pairs` ``(x, x)`` (EXPEMB-A).
* :func:`semvec_pairs`: pairs within SemVec training classes, leaving out the classes named in
  ``exclude`` (the validation classes, so they stay *unseen* - the seed's UNSEENEQCLASS protocol).
* :func:`make_batch`: right-padded source ids + lengths, decoder input ``SOE y`` and target
  ``y EOE`` (teacher forcing).
* :class:`EncodedPairs`: a run's pairs as two int32 columns into one table of sequences, each
  tokenised once, and its length-bucketed batches (what ``train seq2seq`` iterates).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mathsearch.encoders.seq2seq import EOE, PAD, SOE, UNK
from mathsearch.indexer.prefix import PrefixError, parse_prefix_line
from mathsearch.indexer.semvec_prefix import SemvecPrefixClass

logger = logging.getLogger(__name__)

__all__ = [
    "SPECIALS",
    "Batch",
    "EncodedPair",
    "EncodedPairs",
    "Pair",
    "TokenVocabulary",
    "VocabularyError",
    "all_class_pairs",
    "autoencoder_pairs",
    "batch_of_ids",
    "cluster_pairs",
    "make_batch",
    "read_egen",
    "semvec_pairs",
    "split_clusters",
]

SPECIALS = ("<pad>", "<soe>", "<eoe>", "<unk>")
VOCAB_FORMAT = "mathsearch-seq2seq-vocab/1"
Pair = tuple[tuple[str, ...], tuple[str, ...]]


class VocabularyError(ValueError):
    """A vocabulary file that is unreadable or of another format."""


class TokenVocabulary:
    """Prefix tokens <-> ids (ids 0-3 reserved: pad, SOE, EOE, unknown)."""

    def __init__(self, tokens: Sequence[str]) -> None:
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise VocabularyError(f"a vocabulary starts with {SPECIALS}")
        self.tokens = list(tokens)
        self.index = {token: n for n, token in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def hash(self) -> str:
        """SHA-256 of the token list (the model card's ``vocab_hash``)."""
        text = json.dumps(self.tokens, ensure_ascii=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @classmethod
    def build(cls, sequences: Iterable[Sequence[str]], min_count: int = 2) -> TokenVocabulary:
        """Tokens seen at least ``min_count`` times (ties sorted), after the specials."""
        counts = Counter(token for seq in sequences for token in seq)
        kept = sorted(t for t, c in counts.items() if c >= min_count and t not in SPECIALS)
        return cls([*SPECIALS, *kept])

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.index.get(token, UNK) for token in tokens]

    def decode(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[i] for i in ids if i not in (PAD, SOE, EOE)]

    def unknown(self, tokens: Sequence[str]) -> int:
        """How many of ``tokens`` are out of the vocabulary."""
        return sum(token not in self.index for token in tokens)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        data = {"format": VOCAB_FORMAT, "hash": self.hash, "tokens": self.tokens}
        path.write_text(json.dumps(data, indent=0) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> TokenVocabulary:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise VocabularyError(f"cannot read vocabulary {path}: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != VOCAB_FORMAT:
            raise VocabularyError(f"{path} is not a {VOCAB_FORMAT} file")
        return cls(list(data["tokens"]))


def read_egen(
    paths: Iterable[str | Path], max_len: int = 512, limit: int | None = None
) -> list[list[tuple[str, ...]]]:
    """E-Gen clusters (lists of prefix sequences) of the files, in order; malformed lines and
    sequences longer than ``max_len`` are skipped; at most ``limit`` clusters."""
    clusters: list[list[tuple[str, ...]]] = []
    skipped = 0
    for path in paths:
        current: list[tuple[str, ...]] = []
        seen: set[tuple[str, ...]] = set()
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    if len(current) > 1:
                        clusters.append(current)
                    current, seen = [], set()
                    if limit is not None and len(clusters) >= limit:
                        return clusters
                    continue
                try:
                    tokens = tuple(parse_prefix_line(line))
                except PrefixError:
                    skipped += 1
                    continue
                if len(tokens) <= max_len and tokens not in seen:
                    current.append(tokens)
                    seen.add(tokens)
        if len(current) > 1:
            clusters.append(current)
    logger.info("E-Gen: %d clusters (%d malformed lines skipped)", len(clusters), skipped)
    return clusters[:limit] if limit is not None else clusters


def split_clusters(
    clusters: Sequence[list[tuple[str, ...]]], held_out: float, salt: str = "expemb"
) -> tuple[list[list[tuple[str, ...]]], list[list[tuple[str, ...]]]]:
    """``(train, held_out)`` by a stable hash of each cluster's first member (same split every
    run, whatever the file order)."""
    train: list[list[tuple[str, ...]]] = []
    test: list[list[tuple[str, ...]]] = []
    for cluster in clusters:
        key = zlib.crc32((salt + " ".join(cluster[0])).encode("utf-8")) / 2**32
        (test if key < held_out else train).append(cluster)
    return train, test


def cluster_pairs(
    clusters: Iterable[Sequence[tuple[str, ...]]], rng: random.Random, per_cluster: int = 20
) -> list[Pair]:
    """Ordered pairs ``(a, b)``, ``a != b``, of members of one cluster; at most
    ``per_cluster`` per cluster, drawn at random when there are more."""
    out: list[Pair] = []
    for cluster in clusters:
        n = len(cluster)
        if n < 2:
            continue
        if n * (n - 1) <= per_cluster:
            out += [(cluster[i], cluster[j]) for i in range(n) for j in range(n) if i != j]
            continue
        for _ in range(per_cluster):
            i, j = rng.sample(range(n), 2)
            out.append((cluster[i], cluster[j]))
    return out


def all_class_pairs(
    clusters: Iterable[Sequence[tuple[str, ...]]], rng: random.Random, cap: int = 100_000
) -> list[Pair]:
    """Appendix C: every unordered pair of distinct members of a class (at most ``cap`` per
    class, drawn at random without replacement beyond it), in both directions.

    This reproduces the seed's Table 8 counts exactly: ``sum 2 * min(C(n, 2), 100000)``.
    """
    out: list[Pair] = []
    for members in clusters:
        n = len(members)
        total = n * (n - 1) // 2
        if total == 0:
            continue
        if total <= cap:
            chosen = ((i, j) for i in range(n) for j in range(i + 1, n))
        else:
            chosen = (_unrank_pair(r, n) for r in sorted(rng.sample(range(total), cap)))
        for i, j in chosen:
            out += [(members[i], members[j]), (members[j], members[i])]
    return out


def _unrank_pair(rank: int, n: int) -> tuple[int, int]:
    """The ``rank``-th pair ``i < j`` of ``range(n)`` in lexicographic order."""
    i = n - 2 - math.floor(math.sqrt(-8 * rank + 4 * n * (n - 1) - 7) / 2 - 0.5)
    j = rank + i + 1 - n * (n - 1) // 2 + (n - i) * ((n - i) - 1) // 2
    return i, j


def autoencoder_pairs(sequences: Iterable[tuple[str, ...]]) -> list[Pair]:
    """EXPEMB-A: each expression is its own target."""
    return [(seq, seq) for seq in dict.fromkeys(sequences)]


def semvec_pairs(
    classes: Iterable[SemvecPrefixClass],
    rng: random.Random,
    per_class: int = 20,
    exclude: set[str] | None = None,
    *,
    all_pairs: bool = False,
) -> list[Pair]:
    """Pairs within SemVec classes whose canonical form is not in ``exclude``: at most
    ``per_class`` ordered pairs each, or with ``all_pairs`` the seed's Appendix C set
    (:func:`all_class_pairs`)."""
    exclude = exclude or set()
    if all_pairs:  # every member as listed: Table 8 counts duplicates too
        kept = [list(c.members) for c in classes if c.canonical not in exclude]
        return all_class_pairs(kept, rng)
    kept = [list(dict.fromkeys(c.members)) for c in classes if c.canonical not in exclude]
    return cluster_pairs(kept, rng, per_class)


@dataclass(frozen=True)
class Batch:
    """Teacher-forcing tensors: ``src (B, S)``, ``lengths (B,)``, ``tgt_in``/``tgt_out (B, T)``."""

    src: torch.Tensor
    lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor

    def to(self, device: str | torch.device) -> Batch:
        """The same batch on ``device`` (itself when already there)."""
        if self.src.device == torch.device(device):
            return self
        tensors = (self.src, self.lengths, self.tgt_in, self.tgt_out)
        return Batch(*(t.to(device, non_blocking=True) for t in tensors))


def pad_ids(sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(B, S)`` int64 ids and ``(B,)`` lengths."""
    width = max([1, *(len(s) for s in sequences)])
    out = torch.full((len(sequences), width), PAD, dtype=torch.long)
    for row, seq in enumerate(sequences):
        out[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out, torch.tensor([max(1, len(s)) for s in sequences], dtype=torch.long)


def make_batch(pairs: Sequence[Pair], vocab: TokenVocabulary) -> Batch:
    """The batch of ``pairs``: source ids, decoder inputs ``SOE y`` and targets ``y EOE``."""
    src, lengths = pad_ids([vocab.encode(a) for a, _ in pairs])
    targets = [vocab.encode(b) for _, b in pairs]
    tgt_in, _ = pad_ids([[SOE, *t] for t in targets])
    tgt_out, _ = pad_ids([[*t, EOE] for t in targets])
    return Batch(src, lengths, tgt_in, tgt_out)


#: A pair tokenised once: source ids, target ids (int64 arrays, no specials).
EncodedPair = tuple[np.ndarray, np.ndarray]


def batch_of_ids(pairs: Sequence[EncodedPair]) -> Batch:
    """The :func:`make_batch` tensors of already encoded pairs, padded with NumPy."""
    size = len(pairs)
    src_len = np.fromiter((max(1, len(a)) for a, _ in pairs), dtype=np.int64, count=size)
    tgt_len = np.fromiter((len(b) + 1 for _, b in pairs), dtype=np.int64, count=size)
    src = np.full((size, int(src_len.max(initial=1))), PAD, dtype=np.int64)
    tgt_in = np.full((size, int(tgt_len.max(initial=1))), PAD, dtype=np.int64)
    tgt_out = np.full_like(tgt_in, PAD)
    for row, (a, b) in enumerate(pairs):
        src[row, : len(a)] = a
        tgt_in[row, 0] = SOE
        tgt_in[row, 1 : len(b) + 1] = b
        tgt_out[row, : len(b)] = b
        tgt_out[row, len(b)] = EOE
    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(src_len),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
    )


@dataclass(frozen=True)
class EncodedPairs:
    """A run's pairs as ``index`` rows ``(source, target)`` into ``sequences``.

    Appendix C's pair sets are large and highly redundant: BOOL8 has 16.1M pairs over 146,488
    expressions. Each distinct sequence is tokenised and stored once, and a pair costs 8 bytes
    (two int32), instead of two id arrays per pair (~670 bytes a pair measured on SIMPPOLY10).

    Attributes:
        sequences: the encoded ids of each distinct sequence (int64, no specials).
        index: ``(n, 2)`` int32, row ``r`` = pair ``r`` of the list it was built from.
    """

    sequences: tuple[np.ndarray, ...]
    index: np.ndarray

    @classmethod
    def build(cls, pairs: Iterable[Pair], vocab: TokenVocabulary) -> EncodedPairs:
        """Encode ``pairs`` (in order), each distinct sequence once."""
        rows: dict[tuple[str, ...], int] = {}
        sequences: list[np.ndarray] = []

        def row(seq: tuple[str, ...]) -> int:
            found = rows.get(seq)
            if found is None:
                found = rows[seq] = len(sequences)
                sequences.append(np.asarray(vocab.encode(seq), dtype=np.int64))
            return found

        flat = np.fromiter((row(s) for pair in pairs for s in pair), dtype=np.int32)
        return cls(tuple(sequences), flat.reshape(-1, 2))

    def __len__(self) -> int:
        return len(self.index)

    def take(self, rows: Sequence[int] | np.ndarray) -> list[EncodedPair]:
        """The pairs of ``rows`` as id arrays (what :func:`batch_of_ids` pads)."""
        return [(self.sequences[a], self.sequences[b]) for a, b in self.index[rows]]

    def batches(self, size: int, rng: random.Random, group: int = 50) -> list[np.ndarray]:
        """One epoch's batches (row arrays): the pairs shuffled, then sorted by (target length,
        source length) within chunks of ``group`` batches so that a batch holds little padding,
        and the batches shuffled. Draws from ``rng``, so a seeded run repeats its order."""
        if size < 1:
            raise ValueError("batch size must be >= 1")
        generator = np.random.default_rng(rng.getrandbits(63))
        lengths = np.fromiter((len(s) for s in self.sequences), dtype=np.int64)
        order = generator.permutation(len(self.index))
        src_len = lengths[self.index[order, 0]]
        tgt_len = lengths[self.index[order, 1]]
        batches: list[np.ndarray] = []
        chunk = group * size
        for start in range(0, len(order), chunk):
            end = start + chunk
            part = order[start:end][np.lexsort((src_len[start:end], tgt_len[start:end]))]
            batches += [part[i : i + size] for i in range(0, len(part), size)]
        rng.shuffle(batches)
        return batches
