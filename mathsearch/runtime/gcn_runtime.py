"""The graph CNN's runtime behind the :class:`~mathsearch.runtime.embedder_base.Embedder`
interface (:class:`GcnEmbedder`, over :class:`mathsearch.runtime.gcn_session.GcnSession`). No
torch."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mathsearch.runtime.embedder_base import EmbedRefusal, OnnxEmbedder

logger = logging.getLogger(__name__)

__all__ = ["GcnEmbedder"]


class GcnEmbedder(OnnxEmbedder):
    """The graph CNN (:class:`mathsearch.runtime.gcn_session.GcnSession`) behind the
    :class:`Embedder`
    interface: items carry ``graph``, an
    :class:`~mathsearch.indexer.mathml_graph.EquationGraph` or its JSON dict.

    Args:
        path: the ``.onnx`` file (its card beside it); or
        encoder: an :class:`~mathsearch.runtime.gcn_session.GcnSession` already loaded (its session
        is
            shared, not opened again).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        device: str | None = None,
        threads: int | None = None,
        settings: Any = None,
        encoder: Any = None,
    ) -> None:
        from mathsearch.runtime.gcn_session import GcnSession

        if encoder is None:
            encoder = GcnSession(path, device=device, threads=threads, settings=settings)
        self.encoder = encoder
        self.path = self.encoder.path
        self.card = self.encoder.card
        self.session = self.encoder.session

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        from mathsearch.indexer.mathml_graph import EquationGraph, MathMLError

        out: list[np.ndarray | EmbedRefusal] = [EmbedRefusal("no-graph")] * len(items)
        graphs: list[EquationGraph] = []
        where: list[int] = []
        for n, item in enumerate(items):
            try:
                graph = item["graph"]
                if not isinstance(graph, EquationGraph):
                    graph = EquationGraph.from_dict(graph)
                graphs.append(graph)
                where.append(n)
            except (MathMLError, KeyError, TypeError) as exc:
                out[n] = EmbedRefusal("invalid-graph", f"{type(exc).__name__}: {exc}")
        if not graphs:
            return out
        try:
            vectors = self.encoder.encode(graphs)
            for n, vector in zip(where, vectors, strict=True):
                out[n] = vector
            return out
        except Exception:  # one bad graph must not sink the batch: find it
            logger.warning("batch of %d failed to embed; embedding one by one", len(graphs))
        for n, graph in zip(where, graphs, strict=True):
            try:
                out[n] = self.encoder.encode([graph])[0]
            except Exception as exc:
                out[n] = EmbedRefusal("encoder-error", f"{type(exc).__name__}: {exc}")
        return out
