"""ONNX runtime of the bitmap CNN (ECML 2019 seed): LaTeX -> rendered crop -> 64-d unit vector.

:class:`BitmapEmbedder` has the :class:`~mathsearch.runtime.embedders.Embedder` interface. For every
item it renders ``item["latex"]`` with :func:`mathsearch.indexer.bitmap.render_bitmap` (the one
featurisation, docs/architecture.md, rule 2), cuts the seed's 333x32 centre
(:func:`mathsearch.indexer.bitmap.centre_crop`), runs the exported network on batches of crops and
returns L2-normalised float32 ``(64,)`` vectors (the seed compares embeddings by dot product, so the
card's ``similarity`` is ``dot``). An equation that cannot be drawn gets an
:class:`~mathsearch.runtime.embedders.EmbedRefusal` whose ``reason`` is the
:class:`~mathsearch.indexer.bitmap.RenderError`'s (``unknown-macro``, ``syntax``, ``blank``, ...);
nothing raises for one bad item.

The model input is the grey crop as float32 ``(B, 1, 32, 333)`` (255 = paper, 0 = ink); the
network turns it into ink coverage itself, so the runtime only casts. The card's ``vocab_hash``
is :func:`settings_hash` of the :class:`~mathsearch.indexer.bitmap.BitmapSettings` that shape the
input
(canvas, crop, font size, dpi, font set, line gap, ink threshold, unknown-command policy); a model
made with other settings is refused (:class:`~mathsearch.runtime.errors.ModelMismatchError`).

No torch here: onnxruntime + numpy (+ the renderer).

Example::

    embedder = BitmapEmbedder("export/models/bitmap-v2.onnx")
    vectors = embedder.embed([{"latex": r"E = mc^2"}, {"latex": r"\\foo"}])
    # [array([...], dtype=float32), EmbedRefusal(reason='unknown-macro', detail=...)]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mathsearch.indexer.bitmap import (
    BitmapSettings,
    RenderError,
    centre_crop,
    render_bitmap,
    settings_hash,
)
from mathsearch.runtime.embedder_base import EmbedRefusal, OnnxEmbedder
from mathsearch.runtime.errors import ModelMismatchError

logger = logging.getLogger(__name__)

__all__ = ["INPUT_NAME", "OUTPUT_NAME", "BitmapEmbedder", "crops_to_input", "settings_hash"]

INPUT_NAME = "bitmap"
OUTPUT_NAME = "embedding"
#: Crops per ONNX Runtime call.
DEFAULT_BATCH = 256


def crops_to_input(crops: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    """``(B, 32, 333)`` uint8 crops -> the model input float32 ``(B, 1, 32, 333)`` (grey)."""
    array = np.asarray(crops)
    if array.ndim == 2:
        array = array[None]
    return np.ascontiguousarray(array[:, None].astype(np.float32))


class BitmapEmbedder(OnnxEmbedder):
    """The exported bitmap CNN behind the Embedder interface (module docstring).

    Args:
        path: ``MODEL.onnx`` with ``MODEL.card.json`` beside it (family ``bitmap``).
        device: ``auto`` (default), ``cpu`` or ``cuda``.
        threads: ONNX Runtime intra-op threads (default 0: its own choice).
        settings: :class:`BitmapSettings` to render with (default: the seed's); anything else
            (e.g. an ``RuntimeSettings``) is ignored.

    Raises:
        ModelCardError: no card, another family, or a model file that does not match its card.
        ModelMismatchError: the model was made for other render settings or input shape.
    """

    FAMILY = "bitmap"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str | None = None,
        threads: int | None = None,
        settings: Any = None,
    ) -> None:
        self._load_card(path)
        self.render_settings = (
            settings if isinstance(settings, BitmapSettings) else BitmapSettings()
        )
        expected = settings_hash(self.render_settings)
        if self.card.vocab_hash != expected:
            raise ModelMismatchError(
                f"model {self.path.name} was trained on bitmaps rendered with settings "
                f"{self.card.vocab_hash[:12]}, the renderer uses {expected[:12]}"
            )
        self._open_session(device, threads)
        inputs = self.session.get_inputs()
        shape = list(inputs[0].shape)[1:] if inputs else []
        size = [1, self.render_settings.crop_height, self.render_settings.crop_width]
        if len(inputs) != 1 or inputs[0].name != INPUT_NAME or shape != size:
            raise ModelMismatchError(
                f"model input {[(i.name, i.shape) for i in inputs]} is not {INPUT_NAME} [B, {size}]"
            )
        self.output_name = self.session.get_outputs()[0].name
        self.batch_size = DEFAULT_BATCH

    def crop(self, latex: Any) -> np.ndarray | EmbedRefusal:
        """The ``(32, 333)`` uint8 crop of one equation, or the refusal of the renderer."""
        if not isinstance(latex, str) or not latex.strip():
            return EmbedRefusal("no-latex", "the item has no LaTeX to render")
        try:
            return centre_crop(render_bitmap(latex, self.render_settings), self.render_settings)
        except RenderError as exc:
            return EmbedRefusal(exc.reason, str(exc)[:300])
        except Exception as exc:  # errors are data: the renderer must not sink the batch
            return EmbedRefusal("render-error", f"{type(exc).__name__}: {exc}"[:300])

    def encode_crops(self, crops: np.ndarray) -> np.ndarray:
        """Unit vectors float32 ``(B, dim)`` of ``(B, 32, 333)`` uint8 crops."""
        parts = []
        for start in range(0, len(crops), self.batch_size):
            feed = {INPUT_NAME: crops_to_input(crops[start : start + self.batch_size])}
            (out,) = self.session.run([self.output_name], feed)
            parts.append(np.asarray(out, dtype=np.float32))
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.concatenate(parts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        """One float32 ``(dim,)`` unit vector or :class:`EmbedRefusal` per item, in order."""
        out: list[np.ndarray | EmbedRefusal] = []
        crops: list[np.ndarray] = []
        where: list[int] = []
        for n, item in enumerate(items):
            latex = item.get("latex") if isinstance(item, Mapping) else None
            result = self.crop(latex)
            out.append(result if isinstance(result, EmbedRefusal) else EmbedRefusal("pending"))
            if not isinstance(result, EmbedRefusal):
                crops.append(result)
                where.append(n)
        if not crops:
            return out
        try:
            vectors = self.encode_crops(np.stack(crops))
        except Exception as exc:  # a session failure refuses the items, never raises
            logger.warning("bitmap batch of %d failed: %r", len(crops), exc)
            for n in where:
                out[n] = EmbedRefusal("encoder-error", f"{type(exc).__name__}: {exc}"[:300])
            return out
        for n, vector in zip(where, vectors, strict=True):
            out[n] = vector
        return out
