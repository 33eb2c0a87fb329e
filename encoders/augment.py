"""Identifier-renaming augmentation of the KDD 2020 seed (section 4.2, "Data-Augmentation").

"Since a renaming of symbols in equations rarely changes the semantic", the character features
of all nodes that belong to a math identifier (``<mi>``) are permuted: for each equation, draw
``k ~ Poisson(32)`` flips; starting from the identity permutation ``pi`` of the 192 character
slots, exchange two random slots ``k`` times::

    pi = id_192;  repeat k times: (i, j) uniform, i != j;  pi[i], pi[j] = pi[j], pi[i]
    x_char'_v = pi[x_char_v]   for every text leaf v whose parent has tag mi
    x_char'_v = x_char_v       otherwise

One permutation per equation, so the same character is renamed the same way everywhere in it
(``x + x^2`` -> ``q + q^2``); characters under ``mn``, ``mo``, ``mtext``, ... are untouched.
All 192 slots take part, the unknown slot included, as in the seed.

In the graph (:mod:`mathsearch.encoders.graph_data`) a node's parent has the smaller index
(pre-order), so
for every edge ``(u, v)`` the parent is ``min(u, v)``; this also holds inside a batch, where
each graph gets its own permutation (via ``batch``).

Example::

    rng = np.random.default_rng(0)
    augmented = permute_identifiers(batch, default_vocabulary(), rng)   # new x_char
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from mathsearch.encoders.graph_data import EncoderInputError
from mathsearch.indexer.vocabulary import Vocabulary, default_vocabulary

logger = logging.getLogger(__name__)

__all__ = [
    "identifier_permutation",
    "identifier_permutations",
    "mi_character_nodes",
    "permute_identifiers",
]


def _swap_draws(
    num_chars: int, rng: np.random.Generator, mean_swaps: float
) -> tuple[np.ndarray, np.ndarray]:
    """One equation's swaps: ``Poisson(mean_swaps)`` pairs of distinct slots, in order."""
    swaps = int(rng.poisson(mean_swaps))
    first = rng.integers(0, num_chars, size=swaps)
    second = (first + rng.integers(1, num_chars, size=swaps)) % num_chars  # != first
    return first, second


def identifier_permutations(
    count: int, num_chars: int, rng: np.random.Generator, mean_swaps: float = 32.0
) -> np.ndarray:
    """``count`` permutations of ``range(num_chars)``, int64 ``(count, num_chars)``: row ``g``
    is built from ``Poisson(mean_swaps)`` swaps of two distinct slots, applied in order;
    ``perm[g, c]`` is the new slot of character ``c`` in equation ``g``.

    The same draws, in the same order, as ``count`` calls of :func:`identifier_permutation`
    (so a seeded run is unchanged), but the swaps are applied one round at a time for all rows
    at once (round ``k`` swaps one pair in every row with more than ``k`` swaps): a few NumPy
    calls per round instead of a Python loop over every swap of every equation.
    """
    perms = np.tile(np.arange(num_chars, dtype=np.int64), (max(0, count), 1))
    if num_chars < 2 or count < 1:
        return perms
    draws = [_swap_draws(num_chars, rng, mean_swaps) for _ in range(count)]
    swaps = np.fromiter((len(f) for f, _ in draws), dtype=np.int64, count=count)
    rounds = int(swaps.max(initial=0))
    if rounds == 0:
        return perms
    first = np.zeros((count, rounds), dtype=np.int64)
    second = np.zeros((count, rounds), dtype=np.int64)
    for row, (f, s) in enumerate(draws):
        first[row, : len(f)] = f
        second[row, : len(s)] = s
    rows = np.arange(count)
    for k in range(rounds):
        active = rows[swaps > k]
        i, j = first[active, k], second[active, k]
        held = perms[active, i]  # fancy indexing copies
        perms[active, i] = perms[active, j]
        perms[active, j] = held
    return perms


def identifier_permutation(
    num_chars: int, rng: np.random.Generator, mean_swaps: float = 32.0
) -> np.ndarray:
    """One permutation of ``range(num_chars)`` (:func:`identifier_permutations` with one row),
    int64 ``(num_chars,)``; ``perm[c]`` is the new slot of character ``c``.
    """
    return identifier_permutations(1, num_chars, rng, mean_swaps)[0]


def mi_character_nodes(data: Data, mi_tag: int) -> Tensor:
    """(N,) bool: the text leaves (character id >= 0) whose parent has tag ``mi_tag``."""
    edge_index = data.edge_index
    parent = torch.minimum(edge_index[0], edge_index[1])
    child = torch.maximum(edge_index[0], edge_index[1])
    hit = (data.x_tag[parent] == mi_tag) & (data.x_char[child] >= 0)
    found = torch.zeros_like(data.x_char, dtype=torch.bool)
    found[child[hit]] = True
    return found


def _resolve(vocab_or_sizes: Vocabulary | tuple[int, int, int], data: Data) -> tuple[int, int]:
    if isinstance(vocab_or_sizes, Vocabulary):
        vocab = vocab_or_sizes
    else:
        vocab = default_vocabulary()
        if tuple(vocab_or_sizes) != tuple(vocab.sizes):
            raise EncoderInputError(
                f"sizes {tuple(vocab_or_sizes)} do not match the default vocabulary "
                f"{vocab.sizes}; pass the Vocabulary itself"
            )
    hashes = getattr(data, "vocab_hash", None)
    hashes = [hashes] if isinstance(hashes, str) else list(hashes or [])
    if any(h != vocab.content_hash for h in hashes):
        raise EncoderInputError(
            f"the graphs were built with another vocabulary than {vocab.content_hash[:12]}"
        )
    mi_tag = vocab.tag_id("mi")
    if mi_tag == vocab.unknown_tag:
        raise EncoderInputError("the vocabulary has no 'mi' tag")
    return mi_tag, vocab.sizes[2]


def permute_identifiers(
    data: Data,
    vocab_or_sizes: Vocabulary | tuple[int, int, int],
    rng: np.random.Generator,
    mean_swaps: float = 32.0,
) -> Data:
    """Rename the identifiers of every equation in ``data`` (see the module docstring).

    Args:
        data: a :class:`Data` or :class:`Batch` from :mod:`mathsearch.encoders.graph_data` (not
        modified).
        vocab_or_sizes: the graphs' :class:`Vocabulary` (gives ``tag_id("mi")`` and the 192
            character slots), or the segment sizes, meaning the default vocabulary.
        rng: e.g. ``np.random.default_rng(seed)``.
        mean_swaps: expected number of swaps per equation (32).

    Returns:
        a copy with a new ``x_char``; everything else is unchanged.

    Raises:
        EncoderInputError: when the vocabulary does not match the graphs' or has no ``mi``.
    """
    mi_tag, num_chars = _resolve(vocab_or_sizes, data)
    batch_index = getattr(data, "batch", None)
    num_graphs = int(data.num_graphs) if batch_index is not None else 1
    tables = identifier_permutations(num_graphs, num_chars, rng, mean_swaps)
    targets = mi_character_nodes(data, mi_tag)
    chars = data.x_char
    graph = batch_index if batch_index is not None else torch.zeros_like(chars)
    table = torch.from_numpy(tables).to(chars.device)
    renamed = table[graph, chars.clamp_min(0)]
    out = data.clone()
    out.x_char = torch.where(targets, renamed, chars)
    return out
