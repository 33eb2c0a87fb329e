"""A featurised corpus packed into flat arrays, and graph batches cut from it by slicing.

Training used to collate every step from Python objects (one ``Data`` per graph, then
``Batch.from_data_list``): per graph per step Python work, which cost the loop ~3.8x the network
alone. :class:`PackedCorpus` holds the node ids of *all* graphs concatenated, once:

==============  =================  ==========================================================
array           shape, dtype       meaning
==============  =================  ==========================================================
``tag``         (T,) int32         tag slot of every node of every graph, graph after graph
``attr``        (T,) int32         attribute slot, -1 = none
``char``        (T,) int32         character slot, -1 = none
``pos``         (T,) int32         position among the parent's children
``parent``      (T,) int32         parent's index *within its graph*, -1 for the root
``offsets``     (G + 1,) int64     graph ``g`` owns nodes ``offsets[g]:offsets[g + 1]``
==============  =================  ==========================================================

:meth:`PackedCorpus.batch` builds the batch of any list of graph indices with a handful of
vectorised numpy operations (gather index by ``repeat``, parent offsets by ``ptr``) and returns a
:class:`torch_geometric.data.Batch` with the same attributes
:func:`mathsearch.encoders.graph_data.collate`
gives (``x_tag``, ``x_attr``, ``x_char``, ``pos``, ``edge_index``, ``edge_type``, ``batch``,
``ptr``), so the masking task and the identifier augmentation work on it unchanged.

:meth:`PackedCorpus.save` writes one ``.npy`` per array into a folder, :meth:`PackedCorpus.load`
memory-maps them (``mmap_mode="r"``): a large corpus costs no parse and no copy at start-up.

Example::

    packed = PackedCorpus.from_corpus(corpus)          # once
    batch = packed.batch(np.array([4, 17, 17, 2]))     # Batch of 4 graphs, in that order
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Batch

from mathsearch.encoders.corpus import CorpusError, EquationCorpus

logger = logging.getLogger(__name__)

__all__ = ["PACKED_FORMAT", "PackedCorpus"]

#: Version of the folder layout written by :meth:`PackedCorpus.save`.
PACKED_FORMAT = 1
_ARRAYS = ("tag", "attr", "char", "pos", "parent", "offsets")
_COLUMNS = (
    ("tag", "tag_ids"),
    ("attr", "attr_ids"),
    ("char", "char_ids"),
    ("pos", "positions"),
    ("parent", "parents"),
)


class PackedCorpus:
    """Node ids of a whole corpus in flat arrays (see the module docstring)."""

    def __init__(  # noqa: PLR0917 - the five columns, in the module docstring's order
        self,
        tag: np.ndarray,
        attr: np.ndarray,
        char: np.ndarray,
        pos: np.ndarray,
        parent: np.ndarray,
        offsets: np.ndarray,
        vocab_hash: str,
    ) -> None:
        total = int(offsets[-1]) if len(offsets) else 0
        for name, array in (("tag", tag), ("attr", attr), ("char", char), ("pos", pos)):
            if array.shape != (total,):
                raise CorpusError(f"packed column {name} has shape {array.shape}, not ({total},)")
        if parent.shape != (total,):
            raise CorpusError(f"packed column parent has shape {parent.shape}, not ({total},)")
        self.tag, self.attr, self.char, self.pos, self.parent = tag, attr, char, pos, parent
        self.offsets = offsets
        self.vocab_hash = vocab_hash

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        return f"PackedCorpus({len(self)} graphs, {int(self.offsets[-1])} nodes)"

    @property
    def num_nodes(self) -> np.ndarray:
        """``(G,)`` node count of every graph."""
        return np.diff(self.offsets)

    # -- building --------------------------------------------------------------------------

    @classmethod
    def from_corpus(cls, corpus: EquationCorpus) -> PackedCorpus:
        """Concatenate the node ids of every graph of ``corpus`` (one pass, at start-up)."""
        graphs = corpus.graphs
        counts = np.fromiter((g.num_nodes for g in graphs), dtype=np.int64, count=len(graphs))
        offsets = np.zeros(len(graphs) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        columns = {}
        for name, attr in _COLUMNS:
            if graphs:
                columns[name] = np.concatenate([getattr(g, attr) for g in graphs]).astype(np.int32)
            else:
                columns[name] = np.zeros(0, dtype=np.int32)
        return cls(**columns, offsets=offsets, vocab_hash=corpus.vocab_hash)

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """One ``.npy`` per array plus ``packed.json`` (format, vocabulary) in ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in _ARRAYS:
            np.save(folder / f"{name}.npy", np.ascontiguousarray(getattr(self, name)))
        meta = {"format": PACKED_FORMAT, "vocab_hash": self.vocab_hash, "graphs": len(self)}
        (folder / "packed.json").write_text(json.dumps(meta), encoding="utf-8")
        return folder

    @classmethod
    def load(
        cls, folder: str | os.PathLike[str], vocab_hash: str | None = None, mmap: bool = True
    ) -> PackedCorpus:
        """Memory-map (or read) a folder written by :meth:`save`.

        Raises:
            CorpusError: missing files, another format or another vocabulary.
        """
        folder = Path(folder)
        try:
            meta = json.loads((folder / "packed.json").read_text(encoding="utf-8"))
            arrays = {
                name: np.load(folder / f"{name}.npy", mmap_mode="r" if mmap else None)
                for name in _ARRAYS
            }
        except (OSError, ValueError) as exc:
            raise CorpusError(f"cannot read the packed corpus {folder}: {exc}") from exc
        if meta.get("format") != PACKED_FORMAT:
            raise CorpusError(f"{folder}: not a packed corpus of format {PACKED_FORMAT}")
        if vocab_hash is not None and meta.get("vocab_hash") != vocab_hash:
            raise CorpusError(f"{folder} was packed with another vocabulary")
        return cls(**arrays, vocab_hash=str(meta["vocab_hash"]))

    # -- batches ---------------------------------------------------------------------------

    def batch(self, indices: np.ndarray) -> Batch:
        """The graphs ``indices`` (in that order, repeats allowed) as one disjoint union.

        Returns:
            a :class:`Batch` like :func:`mathsearch.encoders.graph_data.collate`'s: ``x_tag``,
            ``x_attr``,
            ``x_char``, ``pos`` (N,) long; ``edge_index`` (2, E) parent -> child then child ->
            parent; ``edge_type`` (E,) 1 / 0; ``batch`` (N,), ``ptr`` (B + 1,).

        Raises:
            CorpusError: for an empty ``indices``.
        """
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size == 0:
            raise CorpusError("a batch needs at least one graph")
        starts = self.offsets[indices]
        counts = self.offsets[indices + 1] - starts
        ptr = np.zeros(indices.size + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        batch_index = np.repeat(np.arange(indices.size, dtype=np.int64), counts)
        source = np.arange(int(ptr[-1]), dtype=np.int64) + (starts - ptr[:-1])[batch_index]
        parents = self.parent[source].astype(np.int64)
        child = np.flatnonzero(parents >= 0)
        down = np.stack((parents[child] + ptr[batch_index[child]], child))
        edge_index = np.concatenate((down, down[::-1]), axis=1)
        edge_type = np.concatenate(
            (np.ones(child.size, dtype=np.int64), np.zeros(child.size, dtype=np.int64))
        )

        def column(array: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(array[source].astype(np.int64))

        batch = Batch(
            x_tag=column(self.tag),
            x_attr=column(self.attr),
            x_char=column(self.char),
            pos=column(self.pos),
            edge_index=torch.from_numpy(edge_index),
            edge_type=torch.from_numpy(edge_type),
            batch=torch.from_numpy(batch_index),
            ptr=torch.from_numpy(ptr),
        )
        batch._num_graphs = int(indices.size)
        return batch
