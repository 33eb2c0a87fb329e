"""Real second encoders for the several-encoder tests (the other families may not be shipped).

* :func:`gcn_int8` - the shipped default graph CNN quantised to int8
  (:func:`mathsearch.export.quantize.quantize_int8` with every product of its 128-wide towers
  rewritten, where ``mathsearch export --int8`` takes the 512-wide ones only): a real model
  with its own card, field ``<default field>_int8`` (``vec_gcn_v2_int8`` for ``gcn-v2``) and
  vectors that differ from the default's;
* :func:`gcn_copy` - the shipped default and its card copied under another name and version
  (by default the default's version + 1, e.g. ``gcn-v6``, field ``vec_gcn_v6``);
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

from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.runtime.embedders import FAMILIES, Embedder, EmbedRefusal, default_model_path
from mathsearch.runtime.model_card import card_path


def gcn_int8(folder: Path, graphs: Sequence[EquationGraph]) -> Path:
    """The int8 variant of the shipped default graph CNN in ``folder`` (its card beside it):
    ``<default>.int8.onnx``, e.g. ``gcn-v2.int8.onnx`` with field ``vec_gcn_v2_int8``."""
    from mathsearch.export.quantize import int8_path, quantize_int8

    source = default_model_path("gcn")
    out = folder / int8_path(source).name
    if not out.is_file():
        quantize_int8(source, list(graphs), out, min_inner=128)  # every product of gcn-v7
    return out


def gcn_copy(folder: Path, version: int | None = None) -> Path:
    """The shipped default graph CNN and its card as ``gcn-v<version>`` in ``folder`` (field
    ``vec_gcn_v<version>``; default: the default's version + 1), which must not be the default's
    own version: the copy's field would be the default's."""
    source = default_model_path("gcn")
    card = json.loads(card_path(source).read_text())
    version = card["version"] + 1 if version is None else version
    if version == card["version"]:
        raise ValueError(f"gcn_copy: version {version} is the default model's own")
    out = folder / f"gcn-v{version}.onnx"
    shutil.copyfile(source, out)
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
