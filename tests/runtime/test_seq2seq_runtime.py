"""The shipped seq2seq model behind the Embedder interface: prefix / LaTeX in, refusals as data."""

from __future__ import annotations

import numpy as np
import pytest

from mathsearch.runtime.embedders import Embedder, EmbedRefusal, load_embedder
from mathsearch.runtime.seq2seq_runtime import Seq2SeqEmbedder


@pytest.fixture(scope="module")
def embedder() -> Seq2SeqEmbedder:
    loaded = load_embedder("seq2seq", device="cpu", threads=1)
    assert isinstance(loaded, Seq2SeqEmbedder)
    return loaded


def test_shipped_model_loads_by_family(embedder: Seq2SeqEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert (embedder.family, embedder.vector_field) == ("seq2seq", "vec_seq2seq_v2")
    assert embedder.card.similarity == "cosine" and embedder.dim == embedder.card.embedding_dim
    assert "CPUExecutionProvider" in embedder.providers
    assert embedder.card.metrics, "the card carries a real evaluation"


def test_prefix_and_latex_give_the_same_vector(embedder: Seq2SeqEmbedder) -> None:
    out = embedder.embed(
        [{"prefix": "pow sin x 2"}, {"latex": r"\sin^{2}(x)"}, {"prefix": ["cos", "x"]}]
    )
    assert all(isinstance(v, np.ndarray) and v.shape == (embedder.dim,) for v in out)
    assert np.allclose(out[0], out[1], atol=1e-5)
    assert not np.allclose(out[0], out[2])


def test_bad_items_are_refused_one_by_one(embedder: Seq2SeqEmbedder) -> None:
    out = embedder.embed(
        [
            {"latex": r"\frobnicate{x}"},
            {},
            {"prefix": ["zeta9", "omega7", "kappa3", "x"]},
            {"prefix": ["x"] * (embedder.max_len + 1)},
            {"prefix": "+ x 1"},
        ]
    )
    assert [r.reason for r in out[:4] if isinstance(r, EmbedRefusal)] == [
        "sympy-unparsable", "no-prefix", "out-of-vocabulary", "too-long",
    ]  # fmt: skip
    assert isinstance(out[4], np.ndarray)
