"""MathNode tree -> the equation graph of the KDD 2020 seed (sections 3.2 and 4.1).

Nodes, in pre-order (a node's index is larger than its parent's):

- every element of the tree is a node (the root is the ``math`` element);
- the text of an element becomes TEXT-LEAF nodes, one per character, children of that element
  and placed before its element children: ``<mi>sin</mi>`` is 1 element node + 3 leaves at
  positions 0, 1, 2; ``<mn>12</mn>`` is 1 + 2. Text goes through
  :func:`~mathsearch.indexer.vocabulary.leaf_text` (XML whitespace trimmed, NFC; whitespace-only
  text has no
  leaves).

Features (:meth:`EquationGraph.features`, 256-d one-hot with the default vocabulary sizes):
32 tag slots + 32 attribute slots + 192 character slots. Every node has a tag (leaves have the
pseudo-tag ``#text``); an element carries at most one attribute symbol (the best-ranked one, see
:mod:`mathsearch.indexer.vocabulary`) and no character; a leaf carries one character and no
attribute.
"None" is id -1 in :attr:`attr_ids` / :attr:`char_ids` and an all-zero segment in the features
(the masking heads use 32+1 and 192+1 classes). Unknown symbols take the last slot of a segment.

Position: the index of a node among its parent's children (text leaves and element children
counted together), capped at 255; the root has position 0 (the model adds sinusoid embeddings).

Edges: parent-child. :attr:`parents` stores each node's parent (-1 for the root);
:meth:`edge_index` gives both directions, shape ``(2, 2 * (N - 1))``, all top-down edges first and
then all bottom-up edges, and :meth:`edge_type` the matching types (1 top-down, 0 bottom-up), as in
the authors' code (Whadup/arxiv_learning ``load_mathml.py``; no self loops, the model adds the node
itself in its aggregation).

``build_graph`` walks the tree iteratively (no recursion), appends one flat record per node
(tag, attribute, character, position, parent) to a single Python list and converts it to numpy
once: the five arrays are the contiguous rows of one ``(5, N)`` int32 block.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from mathsearch.indexer.errors import LimitExceeded, MathMLError
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.vocabulary import DEFAULT_SIZES, TEXT_TAG, Vocabulary

logger = logging.getLogger(__name__)

__all__ = ["MAX_POSITION", "EquationGraph", "build_graph"]

#: Positions are capped here (the authors' ``MAX_POS - 1``).
MAX_POSITION = 255

_DEFAULT_SETTINGS = IndexerSettings()


@dataclass(eq=False)
class EquationGraph:
    """One equation as a graph: per-node ids (int32 arrays, pre-order) and the parent array."""

    tag_ids: np.ndarray
    attr_ids: np.ndarray
    char_ids: np.ndarray
    positions: np.ndarray
    parents: np.ndarray
    vocab_hash: str
    sizes: tuple[int, int, int] = DEFAULT_SIZES

    @property
    def num_nodes(self) -> int:
        return int(self.tag_ids.shape[0])

    @property
    def dim(self) -> int:
        return sum(self.sizes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EquationGraph):
            return NotImplemented
        return (
            self.vocab_hash == other.vocab_hash
            and tuple(self.sizes) == tuple(other.sizes)
            and all(
                np.array_equal(getattr(self, name), getattr(other, name))
                for name in ("tag_ids", "attr_ids", "char_ids", "positions", "parents")
            )
        )

    __hash__ = None  # type: ignore[assignment]

    def features(self) -> np.ndarray:
        """Dense one-hot node features, float32 ``(N, 256)``."""
        n = self.num_nodes
        s0, s1, _ = self.sizes
        out = np.zeros((n, self.dim), dtype=np.float32)
        rows = np.arange(n)
        out[rows, self.tag_ids] = 1.0
        has = self.attr_ids >= 0
        out[rows[has], s0 + self.attr_ids[has]] = 1.0
        has = self.char_ids >= 0
        out[rows[has], s0 + s1 + self.char_ids[has]] = 1.0
        return out

    def edge_index(self) -> np.ndarray:
        """int64 ``(2, 2 * (N - 1))``: top-down (parent -> child) edges, then bottom-up."""
        child = np.flatnonzero(self.parents >= 0)
        parent = self.parents[child].astype(np.int64)
        child = child.astype(np.int64)
        return np.concatenate((np.stack((parent, child)), np.stack((child, parent))), axis=1)

    def edge_type(self) -> np.ndarray:
        """int64 ``(2 * (N - 1),)``: 1 for the top-down half, 0 for the bottom-up half."""
        edges = int(np.count_nonzero(self.parents >= 0))
        return np.concatenate((np.ones(edges, np.int64), np.zeros(edges, np.int64)))

    def to_dict(self) -> dict[str, Any]:
        """Compact JSON-able form (lists of ints) for ``parsed.jsonl``."""
        return {
            "tags": self.tag_ids.tolist(),
            "attrs": self.attr_ids.tolist(),
            "chars": self.char_ids.tolist(),
            "pos": self.positions.tolist(),
            "parents": self.parents.tolist(),
            "vocab": self.vocab_hash,
            "sizes": list(self.sizes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EquationGraph:
        """Inverse of :meth:`to_dict`; validates shapes, id ranges and the parent order."""
        try:
            sizes = tuple(int(size) for size in data.get("sizes", DEFAULT_SIZES))
            columns = [data[key] for key in ("tags", "attrs", "chars", "pos", "parents")]
            lengths = {len(column) for column in columns}
            if len(sizes) != 3 or len(lengths) != 1 or lengths == {0}:
                raise ValueError("five equally long, non-empty columns and three sizes needed")
            block = np.array(columns, dtype=np.int32)
            vocab_hash = str(data["vocab"])
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise MathMLError(f"malformed graph record: {exc}", "invalid-graph") from exc
        graph = _from_block(block, vocab_hash, sizes)  # type: ignore[arg-type]
        _validate(graph)
        return graph


def _from_block(block: np.ndarray, vocab_hash: str, sizes: tuple[int, int, int]) -> EquationGraph:
    return EquationGraph(block[0], block[1], block[2], block[3], block[4], vocab_hash, sizes)


def _validate(graph: EquationGraph) -> None:
    s0, s1, s2 = graph.sizes
    n = graph.num_nodes
    parents = graph.parents
    checks = (
        (graph.tag_ids, 0, s0 - 1, "tag id"),
        (graph.attr_ids, -1, s1 - 1, "attribute id"),
        (graph.char_ids, -1, s2 - 1, "character id"),
        (graph.positions, 0, MAX_POSITION, "position"),
    )
    for values, low, high, name in checks:
        if values.min() < low or values.max() > high:
            raise MathMLError(f"{name} out of range [{low}, {high}]", "invalid-graph")
    if parents[0] != -1 or (n > 1 and not (parents[1:] >= 0).all()):
        raise MathMLError("node 0 must be the only root", "invalid-graph")
    if n > 1 and not (parents[1:] < np.arange(1, n)).all():
        raise MathMLError("parents must precede their children (pre-order)", "invalid-graph")


def build_graph(
    tree: MathNode, vocab: Vocabulary, settings: IndexerSettings | None = None
) -> EquationGraph:
    """The graph of ``tree`` under ``vocab`` (see the module docstring).

    Raises :class:`~mathsearch.indexer.errors.LimitExceeded` (``too-many-nodes``) when the graph
    would have
    more than ``settings.max_nodes`` nodes (``settings`` default to ``IndexerSettings()``).
    """
    max_nodes = (settings or _DEFAULT_SETTINGS).max_nodes
    unknown_tag = vocab.sizes[0] - 1
    unknown_char = vocab.sizes[2] - 1
    tag_get = vocab._tag_index.get  # hot loop over the package's own class
    char_get = vocab._char_index.get
    attribute_id = vocab.attribute_id
    text_tag = tag_get(TEXT_TAG, unknown_tag)

    # One flat record per node: (tag, attribute, character, position, parent).
    rec: list[int] = []
    stack: list[tuple[MathNode, int, int]] = [(tree, -1, 0)]
    pop, push = stack.pop, stack.append
    count = 0
    while stack:
        node, parent, position = pop()
        attrs = node.attrs
        rec += (
            tag_get(node.tag, unknown_tag),
            attribute_id(attrs) if attrs else -1,
            -1,
            position,
            parent,
        )
        index = count
        count += 1
        offset = 0
        text = node.text or ""
        if text:
            # leaf_text() inlined: XML whitespace trimmed, NFC for non-ASCII.
            text = text.strip(" \t\n\r")
            if text:
                if not text.isascii():
                    text = unicodedata.normalize("NFC", text)
                offset = len(text)
                count += offset
        if count > max_nodes:
            raise LimitExceeded(
                f"the equation graph has more than {max_nodes} nodes", "too-many-nodes"
            )
        if offset:
            j = 0
            for ch in text:
                rec += (text_tag, -1, char_get(ch, unknown_char), j, index)
                if j < MAX_POSITION:
                    j += 1
        children = node.children
        if children:
            j = offset + len(children)
            for child in reversed(children):
                j -= 1
                push((child, index, j if j < MAX_POSITION else MAX_POSITION))
    block = np.array(rec, dtype=np.int32).reshape(count, 5).T.copy()
    return _from_block(block, vocab.content_hash, vocab.sizes)  # type: ignore[arg-type]
