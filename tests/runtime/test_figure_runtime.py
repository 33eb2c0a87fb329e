"""The shipped default figure model (export/models/figure-v2.onnx) behind load_embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mathsearch.indexer.figures import FigureRecord, extract_figures
from mathsearch.runtime.embedders import EmbedRefusal, load_embedder

FIGURES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "figures"


def test_default_figure_model_embeds_real_figures() -> None:
    embedder = load_embedder("figure", device="cpu")
    assert embedder.family == "figure" and embedder.vector_field == "vec_figure_v2"
    assert embedder.card.metrics, "the card carries the evaluation of the shipped model"
    records = [r for r in extract_figures([FIGURES]) if isinstance(r, FigureRecord)]
    items = [r.to_item() for r in records[:6]]
    items.append({"caption": "", "mentions": [], "image": None})
    items.append({"caption": "", "mentions": [], "image": str(FIGURES / "mnras" / "example.png")})
    out = embedder.embed(items)
    vectors = [v for v in out[:6] if isinstance(v, np.ndarray)]
    assert len(vectors) == 6 and all(v.shape == (embedder.dim,) for v in vectors)
    assert isinstance(out[6], EmbedRefusal)
    assert isinstance(out[7], np.ndarray)  # an image alone is enough
    again = embedder.embed(items[:2])
    assert np.allclose(again[0], out[0]) and np.allclose(again[1], out[1])
    assert len({v.round(5).tobytes() for v in vectors}) > 1  # different figures, different vectors
