"""Model cards: the JSON file ``MODEL.card.json`` beside every exported ``MODEL.onnx``.

A card says what the model is and how to use it, so the runtime, the index mappings and a person
can trust it without opening the network:

===================  ===========================================================================
field                meaning
===================  ===========================================================================
``name``             e.g. ``gcn-v1``
``family``           encoder family (``gcn``; later ``bitmap``, ``seq2seq``, ``figure``)
``version``          integer model version; the vector field is ``vec_<family>_v<version>``
``precision``        ``float32``, or ``int8`` for a quantised variant (field ``..._int8``)
``embedding_dim``    output size ``d``
``similarity``       ``dot`` (inner product, the KDD 2020 seed's score) or ``cosine``
``vocab_hash``       SHA-256 of the vocabulary the inputs must be featurised with
``vocab_sizes``      tag, attribute and character slots (32, 32, 192)
``opset``            ONNX opset of the default domain; ``ir_version`` the file's IR version
``inputs``           ``[{name, dtype, shape}]`` with symbolic dims (``N`` nodes, ``E``, ``B+1``)
``outputs``          ``[{name, dtype, shape}]``
``sha256``           SHA-256 of the ONNX file
``training``         data, split, steps, configuration of the run that made the checkpoint
``metrics``          hold-out ranking score of the model, an untrained model and BoW, ...
``parity``           equations checked, max abs difference to PyTorch, tolerance
``created``          UTC time of the export (ISO 8601)
``software``         torch / onnx / onnxruntime versions used for the export
===================  ===========================================================================

The runtime refuses a model whose ``vocab_hash`` differs from the featuriser's
(:class:`~mathsearch.runtime.errors.ModelMismatchError`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mathsearch.runtime.errors import ModelCardError

logger = logging.getLogger(__name__)

__all__ = [
    "SIMILARITIES",
    "FieldModel",
    "ModelCard",
    "beside",
    "card_path",
    "file_sha256",
    "load_card",
    "model_name_of_field",
    "model_of_field",
]

SIMILARITIES = ("dot", "cosine")
#: OpenSearch k-NN space type for each similarity.
_SPACE_TYPES = {"dot": "innerproduct", "cosine": "cosinesimil"}
#: ``vec_<family>_v<version>[_<precision>]`` (:attr:`ModelCard.vector_field`).
_FIELD = re.compile(r"vec_([a-z0-9]+)_v(\d+)(?:_([a-z0-9]+))?")


class FieldModel(NamedTuple):
    """The model a vector field comes from (``vec_<family>_v<version>[_<precision>]``)."""

    family: str
    version: int
    precision: str | None = None

    @property
    def name(self) -> str:
        """``gcn-v7``, ``gcn-v7-int8``."""
        return f"{self.family}-v{self.version}" + (f"-{self.precision}" if self.precision else "")


def model_of_field(field: str) -> FieldModel | None:
    """The family, version and precision of the model whose vectors ``field`` holds (the
    inverse of :attr:`ModelCard.vector_field`); None for another name.

    >>> model_of_field("vec_gcn_v7_int8")
    FieldModel(family='gcn', version=7, precision='int8')
    """
    match = _FIELD.fullmatch(field)
    if match is None:
        return None
    family, version, precision = match.groups()
    return FieldModel(family, int(version), precision)


def model_name_of_field(field: str) -> str | None:
    """The model a vector field comes from, the inverse of :attr:`ModelCard.vector_field`:
    ``vec_gcn_v7`` -> ``gcn-v7``, ``vec_gcn_v7_int8`` -> ``gcn-v7-int8``; None for another name.

    >>> model_name_of_field("vec_gcn_v7"), model_name_of_field("vec_gcn_v7_int8")
    ('gcn-v7', 'gcn-v7-int8')
    >>> model_name_of_field("math.vector") is None
    True
    """
    model = model_of_field(field)
    return model.name if model is not None else None


def beside(model_path: str | os.PathLike[str], suffix: str) -> Path:
    """``MODEL.onnx`` -> ``MODEL<suffix>`` in the same folder (``.onnx`` dropped if present)."""
    path = Path(model_path)
    stem = path.name[: -len(".onnx")] if path.name.endswith(".onnx") else path.name
    return path.with_name(stem + suffix)


def card_path(model_path: str | os.PathLike[str]) -> Path:
    """``MODEL.onnx`` -> ``MODEL.card.json`` (same folder)."""
    return beside(model_path, ".card.json")


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class ModelCard:
    """The card of one exported model (see the module docstring for every field)."""

    name: str
    family: str
    version: int
    embedding_dim: int
    similarity: str
    vocab_hash: str
    vocab_sizes: list[int]
    opset: int
    ir_version: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    sha256: str = ""
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    parity: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    software: dict[str, str] = field(default_factory=dict)
    description: str = ""
    precision: str = "float32"

    def __post_init__(self) -> None:
        if self.similarity not in SIMILARITIES:
            raise ModelCardError(f"similarity must be one of {SIMILARITIES}, not {self.similarity}")
        if int(self.embedding_dim) < 1 or int(self.version) < 1:
            raise ModelCardError("embedding_dim and version must be positive")
        if len(self.vocab_hash) != 64:
            raise ModelCardError(f"vocab_hash {self.vocab_hash!r} is not a SHA-256 hex digest")

    @property
    def vector_field(self) -> str:
        """The OpenSearch ``knn_vector`` field of this model, e.g. ``vec_gcn_v1``."""
        suffix = "" if self.precision == "float32" else f"_{self.precision}"
        return f"vec_{self.family}_v{self.version}{suffix}"

    @property
    def space_type(self) -> str:
        """The OpenSearch k-NN ``space_type`` that scores like ``similarity``."""
        return _SPACE_TYPES[self.similarity]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["vector_field"] = self.vector_field
        data["space_type"] = self.space_type
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCard:
        known = set(cls.__dataclass_fields__)
        missing = [
            name
            for name, spec in cls.__dataclass_fields__.items()
            if name not in data and spec.default is MISSING and spec.default_factory is MISSING
        ]
        if missing:
            raise ModelCardError(f"model card lacks {', '.join(sorted(missing))}")
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except (TypeError, ValueError) as exc:
            raise ModelCardError(f"bad model card: {exc}") from exc

    def write(self, model_path: str | os.PathLike[str]) -> Path:
        """Write the card beside ``model_path`` (atomically); returns its path."""
        path = card_path(model_path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def load_card(model_path: str | os.PathLike[str], verify_sha256: bool = True) -> ModelCard:
    """The card beside ``model_path``.

    Raises:
        ModelCardError: no card, unreadable JSON, a missing field, or (with ``verify_sha256``)
            a model file whose digest is not the card's.
    """
    path = card_path(model_path)
    if not path.is_file():
        raise ModelCardError(f"no model card {path} beside {model_path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelCardError(f"model card {path} is unreadable: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelCardError(f"model card {path} is not a JSON object")
    card = ModelCard.from_dict(data)
    if verify_sha256 and card.sha256 and file_sha256(model_path) != card.sha256:
        raise ModelCardError(
            f"{model_path} does not match its card (sha256 differs): the card belongs to "
            "another export"
        )
    return card
