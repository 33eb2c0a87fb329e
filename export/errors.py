"""Typed errors of the export package. The runtime's own errors (model cards, model fit, input)
live in :mod:`mathsearch.runtime.errors` and are re-exported here."""

from __future__ import annotations

from mathsearch.runtime.errors import (
    EmbedError,
    ModelCardError,
    ModelMismatchError,
    RuntimeInputError,
)

__all__ = [
    "EmbedError",
    "ExportError",
    "ModelCardError",
    "ModelMismatchError",
    "ParityError",
    "RuntimeInputError",
]


class ExportError(RuntimeError):
    """A checkpoint cannot be exported (unknown family, unreadable, bad options)."""


class ParityError(ExportError):
    """ONNX Runtime's output differs from PyTorch's by more than the tolerance."""
