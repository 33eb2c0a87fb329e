"""Sub-formula crops: an equation's fragment as the positive of the equation (beyond the seeds).

Users type *part* of an equation (``\\sum_k \\phi_k(x) \\exp(iky/R)`` out of a longer line), and
one mean-pooled vector per equation does not, by itself, learn that a fragment belongs to the
equation that contains it. Random cropping, the augmentation of Contriever (Izacard et al., TMLR
2022, section 3.1: "independent cropping" of a document gives a positive pair), does this for
text; here the crop respects the formula's tree. In the equation graph
(:mod:`mathsearch.indexer.mathml_graph`, pre-order, a subtree is a contiguous index range)
a crop is

* a container node ``v`` (a tag of ``containers``, by default ``mrow`` and the ``math`` root)
  with at least two children, drawn uniformly;
* a contiguous run of its children ``c_i .. c_j`` (length uniform in ``1..k`` for ``k``
  children, start uniform), kept with their whole subtrees;
* ``v`` itself and, when ``v`` is not the root, the root above it (so the crop has the same
  ``math`` top as a parsed query), the ancestors in between dropped::

    kept = {0} u {v} u [c_i, c_j + size(c_j))          positions of c_i .. c_j shifted by -pos(c_i)

A draw is refused when the crop keeps fewer than ``min_nodes`` nodes or more than
``max_fraction`` of the graph; after ``tries`` refusals the graph has no crop (``None``).

In training (``train gcn --crop-rate R``, infonce only) a fraction ``R`` of each batch's pairs
becomes ``(crop(P), P)``: the anchor is a crop of the pair's positive, which the in-batch softmax
must find among the batch's other equations.

Example::

    rng = np.random.default_rng(0)
    crop = crop_tree(parent, tag, pos, containers={mrow_id, math_id}, rng=rng)
    if crop is not None:
        nodes, new_parent, new_pos = crop        # local node ids kept, their parents, positions
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import numpy as np

from mathsearch.encoders.corpus import CorpusError
from mathsearch.encoders.packed_corpus import PackedCorpus
from mathsearch.indexer.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

__all__ = [
    "CROP_CONTAINERS",
    "container_tags",
    "crop_tree",
    "cut_children",
    "packed_with_crops",
]

#: Tags whose children runs are cropped: rows, and the root when it holds several children.
CROP_CONTAINERS = ("mrow", "math")


def container_tags(vocabulary: Vocabulary, names: Collection[str] = CROP_CONTAINERS) -> set[int]:
    """The tag slots of ``names`` in ``vocabulary`` (names the vocabulary lacks are skipped).

    Raises:
        CorpusError: none of ``names`` is in the vocabulary.
    """
    slots = {vocabulary.tag_id(name) for name in names} - {vocabulary.unknown_tag}
    if not slots:
        raise CorpusError(f"the vocabulary has none of the container tags {sorted(names)}")
    return slots


def _subtree_sizes(parent: np.ndarray) -> np.ndarray:
    """``(n,)`` nodes in each node's subtree (itself included); parents precede children."""
    size = np.ones(parent.size, dtype=np.int64)
    for node in range(parent.size - 1, 0, -1):
        size[parent[node]] += size[node]
    return size


def crop_tree(
    parent: np.ndarray,
    tag: np.ndarray,
    pos: np.ndarray,
    containers: Collection[int],
    rng: np.random.Generator,
    *,
    min_nodes: int = 6,
    max_fraction: float = 0.9,
    tries: int = 8,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """One crop of a graph (see the module docstring), or ``None`` when no draw is accepted.

    Args:
        parent: ``(n,)`` each node's parent index within the graph, -1 for the root (index 0).
        tag: ``(n,)`` tag slots.
        pos: ``(n,)`` each node's position among its parent's children.
        containers: tag slots whose children runs may be cropped.
        rng: the generator every draw comes from.
        min_nodes: fewest nodes a crop keeps.
        max_fraction: most of the graph's nodes a crop keeps.
        tries: draws before giving up.

    Returns:
        ``(nodes, parent, pos)``: the kept local node ids in pre-order, each one's parent index
        *within the crop* (-1 for its root) and its position (the kept children of ``v``
        renumbered from 0; ``v`` at position 0 under the root).
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    if n < 3:
        return None
    children = np.bincount(parent[1:], minlength=n)
    candidates = np.flatnonzero((children >= 2) & np.isin(tag, list(containers)))
    if candidates.size == 0:
        return None
    size = _subtree_sizes(parent)
    limit = max_fraction * n
    for _ in range(tries):
        v = int(candidates[rng.integers(candidates.size)])
        k = int(children[v])
        length = int(rng.integers(1, k + 1))
        first = int(rng.integers(0, k - length + 1))
        crop = cut_children(parent, pos, v, first, length, size=size)
        if min_nodes <= crop[0].size <= limit:
            return crop
    return None


def cut_children(
    parent: np.ndarray,
    pos: np.ndarray,
    v: int,
    first: int,
    length: int,
    *,
    size: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The crop that keeps children ``first .. first + length - 1`` of node ``v`` (counted in
    order, text leaves included), their subtrees, ``v`` and the root; see :func:`crop_tree`.

    Args:
        parent: ``(n,)`` parents within the graph (-1 for the root), parents before children.
        pos: ``(n,)`` positions among the parent's children.
        v: the container node.
        first: index of the first kept child among ``v``'s children.
        length: how many consecutive children are kept (>= 1).
        size: ``(n,)`` subtree sizes, when the caller has them.

    Raises:
        CorpusError: ``v`` has no such run of children.
    """
    parent = np.asarray(parent, dtype=np.int64)
    kids = np.flatnonzero(parent == v)
    if length < 1 or first < 0 or first + length > kids.size:
        raise CorpusError(f"node {v} has {kids.size} children, not a run of {length} from {first}")
    size = _subtree_sizes(parent) if size is None else size
    lo, last = int(kids[first]), int(kids[first + length - 1])
    hi = last + int(size[last])
    head = np.asarray([0, v] if v else [0], dtype=np.int64)
    nodes = np.concatenate((head, np.arange(lo, hi, dtype=np.int64)))
    remap = np.full(parent.size, -1, dtype=np.int64)
    remap[nodes] = np.arange(nodes.size)
    new_parent = remap[np.maximum(parent[nodes], 0)]
    new_parent[0] = -1
    new_pos = np.asarray(pos, dtype=np.int64)[nodes]
    new_pos[: head.size] = 0
    if v:
        new_parent[1] = 0
    top = head.size + np.flatnonzero(parent[lo:hi] == v)  # the kept children of v
    new_pos[top] -= new_pos[top[0]]
    return nodes, new_parent, new_pos


def packed_with_crops(
    packed: PackedCorpus,
    order: np.ndarray,
    crops: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> PackedCorpus:
    """The graphs ``order`` as a new packed corpus, slot ``i`` replaced by ``crops[i]`` (a
    :func:`crop_tree` result for graph ``order[i]``); ``.batch(np.arange(len(order)))`` then
    gives the step's batch.
    """
    order = np.asarray(order, dtype=np.int64)
    starts = packed.offsets[order]
    counts = packed.offsets[order + 1] - starts
    for i, (nodes, _, _) in crops.items():
        counts[i] = nodes.size
    offsets = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    slot = np.repeat(np.arange(order.size, dtype=np.int64), counts)
    source = np.arange(int(offsets[-1]), dtype=np.int64) + (starts - offsets[:-1])[slot]
    parent = packed.parent[source].astype(np.int32)
    pos = packed.pos[source].astype(np.int32)
    for i, (nodes, new_parent, new_pos) in crops.items():
        cut = slice(int(offsets[i]), int(offsets[i + 1]))
        source[cut] = starts[i] + nodes
        parent[cut], pos[cut] = new_parent, new_pos
    return PackedCorpus(
        tag=np.asarray(packed.tag[source], dtype=np.int32),
        attr=np.asarray(packed.attr[source], dtype=np.int32),
        char=np.asarray(packed.char[source], dtype=np.int32),
        pos=pos,
        parent=parent,
        offsets=offsets,
        vocab_hash=packed.vocab_hash,
    )
