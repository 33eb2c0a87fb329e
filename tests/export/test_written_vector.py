"""The written form of a vector (:func:`mathsearch.runtime.embedder_base.written_vector`): what
every job writes to OpenSearch and every kNN query sends."""

from __future__ import annotations

import json

import numpy as np

from mathsearch.runtime.embedder_base import WRITTEN_DECIMALS, written_vector


def _unit_vectors(n: int, dim: int) -> np.ndarray:
    vectors = np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_six_decimals_as_short_json_text() -> None:
    vectors = _unit_vectors(50, 128)
    for vector in vectors:
        written = written_vector(vector)
        assert np.allclose(written, vector, rtol=0, atol=0.5 * 10**-WRITTEN_DECIMALS + 1e-9)
        for value in written:  # each float's JSON text is the 6-decimal number, no float32 tail
            text = json.dumps(value)
            digits = text.split(".")[1] if "." in text and "e" not in text else ""
            assert len(digits) <= WRITTEN_DECIMALS, text
    # The JSON of a 128-d unit vector: about half what float32 values widened to doubles take.
    widened = json.dumps(vectors[0].round(WRITTEN_DECIMALS).tolist())
    assert len(json.dumps(written_vector(vectors[0]))) < 0.6 * len(widened)


def test_float32_reads_back_the_same_vector_and_the_form_is_stable() -> None:
    vector = _unit_vectors(1, 64)[0]
    written = written_vector(vector)
    again = written_vector(np.asarray(written, dtype=np.float32))  # as OpenSearch stores it
    assert again == written  # re-writing a document stays a no-op
    assert written_vector([0.25, -1.0]) == [0.25, -1.0]
