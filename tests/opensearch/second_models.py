"""Real second encoders for the several-encoder tests (the other families may not be shipped).

* :func:`gcn_int8` - the shipped graph CNN quantised to int8 (:func:`export.quantize.quantize_int8`,
  as ``mathsearch export --int8`` does): a real model with its own card, field
  ``vec_gcn_v1_int8`` and vectors that differ from ``vec_gcn_v1``'s;
* :func:`gcn_copy` - the shipped model and its card copied under another name and version
  (``gcn-v2``, field ``vec_gcn_v2``);
* :class:`RefusingEmbedder` - a real embedder that refuses the equations a predicate picks,
  as a seq2seq encoder refuses what SymPy cannot read.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from export.embedders import FAMILIES, Embedder, EmbedRefusal, default_model_path
from export.model_card import card_path
from indexer.mathml_graph import EquationGraph


def gcn_int8(folder: Path, graphs: Sequence[EquationGraph]) -> Path:
    """The int8 variant of the shipped gcn-v1 in ``folder`` (its card beside it)."""
    from export.quantize import quantize_int8

    out = folder / "gcn-v1.int8.onnx"
    if not out.is_file():
        quantize_int8(default_model_path("gcn"), list(graphs), out)
    return out


def gcn_copy(folder: Path, version: int = 2) -> Path:
    """The shipped gcn-v1 and its card as ``gcn-v<version>`` in ``folder``."""
    source = default_model_path("gcn")
    out = folder / f"gcn-v{version}.onnx"
    shutil.copyfile(source, out)
    card = json.loads(card_path(source).read_text())
    card.update(name=f"gcn-v{version}", version=version)
    card.pop("vector_field", None)
    card.pop("space_type", None)
    card_path(out).write_text(json.dumps(card, indent=2))
    return out


def shipped_families() -> dict[str, Path | None]:
    """Every family's default model, ``None`` where it is not shipped (yet)."""
    return {
        family: path if (path := default_model_path(family)).is_file() else None
        for family in FAMILIES
    }


class RefusingEmbedder:
    """``inner`` that refuses (``reason``) the items ``refuse`` picks; the rest are ``inner``'s."""

    def __init__(
        self, inner: Embedder, refuse: Callable[[Mapping[str, Any]], bool], reason: str
    ) -> None:
        self.inner = inner
        self.refuse = refuse
        self.reason = reason
        self.path = inner.path
        self.card = inner.card

    @property
    def family(self) -> str:
        return self.inner.family

    @property
    def vector_field(self) -> str:
        return self.inner.vector_field

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def providers(self) -> list[str]:
        return self.inner.providers

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        out = self.inner.embed(items)
        return [
            EmbedRefusal(self.reason, "picked by the test") if self.refuse(item) else result
            for item, result in zip(items, out, strict=True)
        ]
