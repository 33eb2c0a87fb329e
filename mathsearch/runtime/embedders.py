"""One interface over every encoder family's ONNX runtime: :class:`Embedder`.

Each family (``gcn`` graph CNN, ``bitmap`` CNN over rendered equations, ``seq2seq`` ExpEmb
encoder, ``figure`` caption + image encoder) exports an ONNX model with a card
(:mod:`mathsearch.runtime.model_card`) whose ``family`` names it. :func:`load_embedder` reads the
card and
builds that family's runtime, so workers, query featurisation and benchmarks handle every family
the same way::

    embedder = load_embedder("export/models/bitmap-v1.onnx")   # or default_model_path("bitmap")
    out = embedder.embed([parsed.to_dict() for parsed in batch])
    # out[i] is a float32 (dim,) vector, or an EmbedRefusal(reason, detail) for that item

Items are the JSON form of a featurised equation
(:meth:`mathsearch.indexer.parse.ParsedEquation.to_dict`: ``latex``, ``graph``, ``math_tokens``,
optionally ``prefix``), or of a figure for the ``figure`` family. A family takes what it needs (the
graph, the LaTeX to render, the SymPy prefix tokens) and refuses, item by item, what it cannot embed
(docs/architecture.md, rule 3: errors are data) - an equation SymPy cannot read has no ``seq2seq``
vector but keeps its others.

Nothing here imports torch. Runtimes are imported lazily, as
:data:`~mathsearch.runtime.families.FAMILY_REGISTRY` names them.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mathsearch.core.paths import ARCHIVED_MODELS
from mathsearch.runtime.embedder_base import Embedder, EmbedRefusal, OnnxEmbedder
from mathsearch.runtime.errors import ModelCardError
from mathsearch.runtime.families import FAMILY_REGISTRY
from mathsearch.runtime.gcn_runtime import GcnEmbedder
from mathsearch.runtime.model_card import ModelCard, load_card
from mathsearch.runtime.settings import MODELS_DIR

logger = logging.getLogger(__name__)

__all__ = [
    "ARCHIVE_DIR",
    "FAMILIES",
    "MODELS_DIR",
    "EmbedRefusal",
    "Embedder",
    "GcnEmbedder",
    "OnnxEmbedder",
    "as_embedder",
    "default_model_path",
    "encoder_card",
    "load_embedder",
    "one_field_each",
    "parse_encoders",
    "shipped_or_path",
]

#: Where a checkout keeps the superseded models, out of the wheel (models/README.md).
ARCHIVE_DIR = ARCHIVED_MODELS

#: The families' names, from :data:`~mathsearch.runtime.families.FAMILY_REGISTRY`.
FAMILIES = tuple(FAMILY_REGISTRY)


def default_model_path(family: str) -> Path:
    """The model a family uses when none is named: ``MATHSEARCH_MODEL_<FAMILY>`` if set
    (``MATHSEARCH_MODEL`` for ``gcn``, as before), else the shipped default,
    ``<family>-v<N>.onnx`` with the registry's ``default_version`` (``gcn-v7.onnx``,
    ``seq2seq-v2.onnx``, ``bitmap-v2.onnx``, ``figure-v2.onnx``). The superseded models (gcn-v1 to
    gcn-v6, gcn-v11, seq2seq-v1, bitmap-v1, figure-v1) are not
    in the wheel: a checkout keeps them in ``models/`` (:data:`ARCHIVE_DIR`, models/README.md),
    loadable by path or by file name (:func:`shipped_or_path`).

    Raises:
        ModelCardError: an unknown family.
    """
    if family not in FAMILY_REGISTRY:
        raise ModelCardError(f"unknown encoder family {family!r}; known: {', '.join(FAMILIES)}")
    variable = "MATHSEARCH_MODEL" if family == "gcn" else f"MATHSEARCH_MODEL_{family.upper()}"
    configured = os.environ.get(variable, "").strip()
    if configured:
        return Path(configured)
    return MODELS_DIR / FAMILY_REGISTRY[family].default_model


def shipped_or_path(name: str) -> str:
    """A family as it is; an ``.onnx`` path as given when it exists, else the shipped model of
    that file name (``gcn-v8.onnx`` in ``mathsearch/export/models``), else, in a checkout, the
    superseded model of that name in :data:`ARCHIVE_DIR` (``gcn-v11.onnx`` in ``models/``), so
    that a profile, a setting or a flag can name models whatever the working directory.

    >>> shipped_or_path("gcn"), Path(shipped_or_path("gcn-v8.onnx")).parent == MODELS_DIR
    ('gcn', True)
    >>> Path(shipped_or_path("gcn-v11.onnx")).parent == ARCHIVE_DIR  # in a checkout
    True
    """
    if not name.endswith(".onnx") or Path(name).is_file():
        return name
    for folder in (MODELS_DIR, ARCHIVE_DIR):
        found = folder / Path(name).name
        if found.is_file():
            return str(found)
    return name


def parse_encoders(spec: str | Sequence[str]) -> list[str]:
    """``"gcn,bitmap"`` (or a list) -> ``["gcn", "bitmap"]``: families or ``.onnx`` paths, in
    order, without repeats.

    Raises:
        ModelCardError: an empty list or a name that is neither a family nor an ``.onnx`` path.
    """
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name not in FAMILY_REGISTRY and not name.endswith(".onnx"):
            raise ModelCardError(
                f"unknown encoder {name!r}: use a family ({', '.join(FAMILIES)}) or a .onnx path"
            )
        if name not in out:
            out.append(name)
    if not out:
        raise ModelCardError("no encoder named")
    return out


def encoder_card(name: str | os.PathLike[str], *, verify_sha256: bool = True) -> ModelCard:
    """The card of encoder ``name`` (a family: its default model, or an ``.onnx`` path) without
    loading a session - what a job's client side and query planning need.

    Raises:
        ModelCardError: an unknown name, no such model, or no readable card.
    """
    name = os.fspath(name)
    if name not in FAMILY_REGISTRY and not name.endswith(".onnx"):
        raise ModelCardError(
            f"unknown encoder {name!r}: use a family ({', '.join(FAMILIES)}) or a .onnx path"
        )
    path = default_model_path(name) if name in FAMILY_REGISTRY else Path(shipped_or_path(name))
    if not path.is_file():
        raise ModelCardError(f"encoder {name!r}: model {path} does not exist")
    return load_card(path, verify_sha256=verify_sha256)


def one_field_each(cards: Sequence[tuple[str, ModelCard]]) -> dict[str, str]:
    """``{vector_field: name}`` of named encoders' cards, in order, one name per field.

    A model named twice (a family and its default model's path: the same SHA-256) is one field,
    under the first name. Two *different* models whose cards name the same field (the same
    family and version) would write and search one field with two models' vectors, so they are
    refused.

    Example::

        one_field_each([("gcn", card_v7), ("gcn-v8.onnx", card_v8)])
        # {"vec_gcn_v7": "gcn", "vec_gcn_v8": "gcn-v8.onnx"}

    Raises:
        ModelCardError: two different models that write the same field.
    """
    firsts: dict[str, tuple[str, ModelCard]] = {}
    for name, card in cards:
        first_name, first = firsts.setdefault(card.vector_field, (name, card))
        if first.sha256 != card.sha256:
            raise ModelCardError(
                f"encoders {first_name!r} and {name!r} are different models that write the same "
                f"field {card.vector_field} (both cards say family {card.family!r}, version "
                f"{card.version}); give one of them another version in its card"
            )
    return {field: name for field, (name, _) in firsts.items()}


def load_embedder(
    model: str | os.PathLike[str],
    *,
    device: str | None = None,
    threads: int | None = None,
    settings: Any = None,
) -> Embedder:
    """The runtime for ``model``: a family name (its default model) or an ``.onnx`` path whose
    card names the family.

    Raises:
        ModelCardError: no such model, no card, or a family without a runtime.
        ModelMismatchError: the model does not fit this featurisation (see the family).
    """
    name = os.fspath(model)
    path = default_model_path(name) if name in FAMILY_REGISTRY else Path(shipped_or_path(name))
    if not path.is_file():
        raise ModelCardError(f"model {path} does not exist")
    family = load_card(path).family
    target = FAMILY_REGISTRY[family].runtime_target if family in FAMILY_REGISTRY else None
    if target is None:
        raise ModelCardError(f"{path.name}: family {family!r} has no runtime")
    module_name, class_name = target.split(":")
    runtime = getattr(importlib.import_module(module_name), class_name)
    return runtime(path, device=device, threads=threads, settings=settings)


def as_embedder(model: Any = None, *, family: str = "gcn", threads: int | None = None) -> Embedder:
    """Whatever a caller holds, as an :class:`Embedder` - the one way to embed on either side:

    * ``None``: ``family``'s default model (:func:`default_model_path`);
    * a family name or an ``.onnx`` path: :func:`load_embedder` (with ``threads`` intra-op
      threads; None: the settings' ``threads``);
    * a loaded :class:`~mathsearch.runtime.gcn_session.GcnSession` (the graph CNN's session):
    wrapped,
      its session shared;
    * an :class:`Embedder`: itself.

    Raises:
        ModelCardError / ModelMismatchError: see :func:`load_embedder`.
    """
    if model is None:
        return load_embedder(family, threads=threads)
    if isinstance(model, (str, os.PathLike)):
        return load_embedder(model, threads=threads)
    from mathsearch.runtime.gcn_session import GcnSession

    if isinstance(model, GcnSession):
        return GcnEmbedder(encoder=model)
    if isinstance(model, Embedder):
        return model
    raise ModelCardError(
        f"cannot embed with {type(model).__name__}: give a family, a path or an Embedder"
    )
