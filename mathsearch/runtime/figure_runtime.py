"""The figure family's runtime: :class:`FigureEmbedder` (ONNX Runtime + numpy, no torch).

Items are figure dicts: ``caption`` (str), ``mentions`` (list of str or str), ``image`` (a path
or None) - :meth:`mathsearch.indexer.figures.FigureRecord.to_item`. The vocabulary
``MODEL.vocab.json``
beside the model featurises them (:mod:`mathsearch.indexer.figure_features`); a vocabulary whose
hash is
not the card's is refused with :class:`~mathsearch.runtime.errors.ModelMismatchError`. A figure with
neither text tokens nor a readable image gets ``EmbedRefusal("empty-figure")``.

Example::

    embedder = load_embedder("figure")
    vectors = embedder.embed([{"caption": "CCD layout", "mentions": [], "image": None}])
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mathsearch.indexer.figure_features import (
    FigureFeatureError,
    FigureVocabulary,
    featurise_figures,
    figure_text,
    load_image,
)
from mathsearch.runtime.embedder_base import EmbedRefusal, OnnxEmbedder
from mathsearch.runtime.errors import ModelCardError, ModelMismatchError
from mathsearch.runtime.model_card import beside

logger = logging.getLogger(__name__)

__all__ = ["FigureEmbedder"]

_INPUTS = ("tokens", "lengths", "images", "has_image")


class FigureEmbedder(OnnxEmbedder):
    """The figure encoder behind the :class:`~mathsearch.runtime.embedders.Embedder` interface.

    Raises (constructor):
        ModelCardError: no model, card or vocabulary; ModelMismatchError: the vocabulary's hash
        or the model's inputs differ from the card's.
    """

    FAMILY = "figure"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str | None = None,
        threads: int | None = None,
        settings: Any = None,
    ) -> None:
        self._load_card(path)
        vocab_file = beside(self.path, ".vocab.json")
        try:
            self.vocabulary = FigureVocabulary.load(vocab_file)
        except FigureFeatureError as exc:
            raise ModelCardError(str(exc)) from exc
        if self.vocabulary.content_hash != self.card.vocab_hash:
            raise ModelMismatchError(
                f"{vocab_file.name} (hash {self.vocabulary.content_hash[:12]}) is not the "
                f"vocabulary of {self.path.name} ({self.card.vocab_hash[:12]})"
            )
        self._open_session(device, threads)
        names = tuple(i.name for i in self.session.get_inputs())
        if names != _INPUTS:
            raise ModelMismatchError(f"model inputs {names} are not the figure encoder's {_INPUTS}")
        self.settings = settings

    def _prepare(
        self, item: Mapping[str, Any]
    ) -> tuple[dict[str, Any], np.ndarray | None] | EmbedRefusal:
        if not isinstance(item, Mapping):
            return EmbedRefusal("invalid-figure", f"not a mapping: {type(item).__name__}")
        try:
            text = figure_text(item)
            image = load_image(
                item.get("image"), self.vocabulary.image_size, self.vocabulary.channels
            )
        except (TypeError, ValueError, OSError) as exc:
            return EmbedRefusal("invalid-figure", f"{type(exc).__name__}: {exc}")
        if len(self.vocabulary.encode(text)) == 0 and image is None:
            return EmbedRefusal(
                "empty-figure", "neither caption/mention words nor a readable image"
            )
        return {"caption": text, "mentions": []}, image

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        """One float32 ``(dim,)`` vector or :class:`EmbedRefusal` per item, in order."""
        out: list[np.ndarray | EmbedRefusal] = [EmbedRefusal("empty-figure")] * len(items)
        ready: list[tuple[int, dict[str, Any], np.ndarray | None]] = []
        for n, item in enumerate(items):
            prepared = self._prepare(item)
            if isinstance(prepared, EmbedRefusal):
                out[n] = prepared
            else:
                ready.append((n, *prepared))
        if not ready:
            return out
        try:
            vectors = self._run([r[1] for r in ready], [r[2] for r in ready])
            for (n, _, _), vector in zip(ready, vectors, strict=True):
                out[n] = vector
            return out
        except Exception:  # one bad figure must not sink the batch: find it
            logger.warning("batch of %d figures failed; embedding one by one", len(ready))
        for n, item, image in ready:
            try:
                out[n] = self._run([item], [image])[0]
            except Exception as exc:
                out[n] = EmbedRefusal("encoder-error", f"{type(exc).__name__}: {exc}")
        return out

    def _run(
        self, items: list[dict[str, Any]], images: list[np.ndarray | None]
    ) -> list[np.ndarray]:
        features = featurise_figures(items, self.vocabulary, images).trimmed()
        (vectors,) = self.session.run(None, features.feeds())
        return [np.asarray(v, dtype=np.float32) for v in vectors]
