"""The one interface every encoder family's runtime has (:class:`Embedder`), the refusal an
item gets instead of a vector (:class:`EmbedRefusal`), and what the ONNX runtimes share
(:class:`OnnxEmbedder`). The registry of families and :func:`load_embedder` are in
:mod:`mathsearch.runtime.embedders`; the runtimes import only this module, so the registry can
name them without a circle. Nothing here imports torch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from mathsearch.runtime.errors import ModelCardError
from mathsearch.runtime.model_card import ModelCard, load_card

_log = logging.getLogger(__name__)

__all__ = ["EmbedRefusal", "Embedder", "OnnxEmbedder", "embed_safely", "written_vector"]

#: Decimals a vector keeps in the JSON written to OpenSearch and sent in kNN queries.
WRITTEN_DECIMALS = 6


@dataclass(frozen=True)
class EmbedRefusal:
    """Why one item got no vector from one encoder (``reason`` is a short slug)."""

    reason: str
    detail: str = ""


@runtime_checkable
class Embedder(Protocol):
    """An exported model of one family behind ONNX Runtime.

    Attributes:
        path: the ``.onnx`` file; ``card`` its :class:`ModelCard`.
    """

    path: Path
    card: ModelCard

    @property
    def family(self) -> str: ...

    @property
    def vector_field(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def providers(self) -> list[str]: ...

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        """One result per item, in order: a float32 ``(dim,)`` vector or an
        :class:`EmbedRefusal`. Never raises for one bad item."""
        ...


class OnnxEmbedder:
    """What every family's runtime shares: the model file and its card (of family
    :attr:`FAMILY`), the ONNX Runtime session, and the card's properties.

    A runtime calls :meth:`_load_card` first, checks its own inputs (vocabulary, settings), then
    :meth:`_open_session`.
    """

    FAMILY: ClassVar[str] = ""
    path: Path
    card: ModelCard
    session: Any

    def _load_card(self, path: str | os.PathLike[str]) -> None:
        """Read ``path``'s card.

        Raises:
            ModelCardError: no model file, no card, or a card of another family.
        """
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelCardError(f"model {self.path} does not exist")
        self.card = load_card(self.path)
        if self.FAMILY and self.card.family != self.FAMILY:
            raise ModelCardError(
                f"{self.path.name} is a {self.card.family!r} model, not {self.FAMILY}"
            )

    def _open_session(self, device: str | None, threads: int | None) -> None:
        from mathsearch.runtime.gcn_session import open_session

        self.session = open_session(self.path, device=device or "auto", threads=threads or 0)

    @property
    def family(self) -> str:
        return self.card.family

    @property
    def vector_field(self) -> str:
        return self.card.vector_field

    @property
    def dim(self) -> int:
        return int(self.card.embedding_dim)

    @property
    def providers(self) -> list[str]:
        return list(self.session.get_providers())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.path.name}, dim={self.dim}, providers={self.providers})"
        )


def embed_safely(
    embedder: Embedder, items: Sequence[Mapping[str, Any]]
) -> list[np.ndarray | EmbedRefusal]:
    """``embedder.embed(items)``, with a model fault kept as data: an embedder that raises, or
    returns another number of results, refuses every item (``encoder-error``, with the
    exception). The one place the workers and the query encoder run an encoder.

    >>> class Broken:
    ...     vector_field = "vec_x_v1"
    ...     def embed(self, items):
    ...         raise RuntimeError("no session")
    >>> embed_safely(Broken(), [{}, {}])[1]
    EmbedRefusal(reason='encoder-error', detail='RuntimeError: no session')
    """
    try:
        results = list(embedder.embed(items))
    except Exception as exc:  # the model's fault, not one item's: every item refused
        _log.exception("%s failed on a batch of %d", embedder.vector_field, len(items))
        return [EmbedRefusal("encoder-error", f"{type(exc).__name__}: {exc}")] * len(items)
    if len(results) != len(items):
        detail = f"{len(results)} results for {len(items)} items"
        return [EmbedRefusal("encoder-error", detail)] * len(items)
    return results


def written_vector(vector: Sequence[float] | np.ndarray) -> list[float]:
    """A vector in the form written to OpenSearch and sent in kNN queries: rounded to
    :data:`WRITTEN_DECIMALS` decimals, as Python floats whose JSON text is that short.

    The rounding is done in float64 on purpose. Rounded in float32 and then widened,
    ``0.011659`` becomes the double ``0.011658999882638454``, whose JSON text is 20 characters
    instead of 8: a 128-d vector took ~2,770 characters of ``_source`` instead of ~1,400, for no
    precision the float32 field keeps (OpenSearch parses either text to the same float32 to
    within one unit in the last place).

    >>> written_vector(np.array([0.011659, -0.5], dtype=np.float32))
    [0.011659, -0.5]
    """
    return np.asarray(vector, dtype=np.float64).round(WRITTEN_DECIMALS).tolist()
