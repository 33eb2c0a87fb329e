"""Typed errors of the runtime (model cards, model/featuriser fit, runtime input)."""

from __future__ import annotations

__all__ = [
    "EmbedError",
    "ModelCardError",
    "ModelMismatchError",
    "RuntimeInputError",
]


class ModelCardError(ValueError):
    """A model card is missing, unreadable or lacks a required field."""


class ModelMismatchError(ValueError):
    """The model does not fit the featuriser (another vocabulary or input sizes)."""


class RuntimeInputError(ValueError):
    """The runtime got input it cannot encode (empty graph, ids outside the vocabulary)."""


class EmbedError(ValueError):
    """An encoder refused an equation where every one must have a vector (benchmark corpora,
    fixtures); the index jobs record refusals as failures instead."""
