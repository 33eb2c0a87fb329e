"""The embed stage's one way to embed (:mod:`mathsearch.workers.embedding`): any Embedder over
``embed_item`` items, refusals kept as data. Pure logic over the shipped model and fakes; the
Celery path runs in test_pipeline.py / test_multi_encoder.py against the real services."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.runtime.embedders import EmbedRefusal, load_embedder
from mathsearch.runtime.errors import EmbedError
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.workers.embedding import embed_parsed, embedded, vectors_of

LATEX = [r"\frac{a}{b}+c", r"E = m c^2", r"\int_0^1 x^2 \, dx", r"\alpha_{i} \beta^{j}"]


class RefusesSecond:
    """An embedder that refuses its second item and returns ones for the rest."""

    vector_field = "vec_fake_v1"
    family = "fake"

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        return [
            EmbedRefusal("sympy-unreadable", "no prefix") if n == 1 else np.ones(3, np.float32)
            for n, _ in enumerate(items)
        ]


class Raises:
    vector_field = "vec_fake_v1"
    family = "fake"

    def embed(self, items: Sequence[Mapping[str, Any]]) -> list[np.ndarray | EmbedRefusal]:
        raise RuntimeError("session lost")


def _parsed() -> list[ParsedEquation]:
    featuriser = Featuriser()
    out = [featuriser.parse_latex(latex) for latex in LATEX]
    assert all(isinstance(p, ParsedEquation) for p in out)
    return out  # type: ignore[return-value]


def test_embed_parsed_is_the_encoders_vectors_rounded() -> None:
    parsed = _parsed()
    got = embed_parsed(load_embedder("gcn", device="cpu"), parsed)
    direct = GcnSession(device="cpu").encode([p.graph for p in parsed])
    assert np.allclose(np.asarray(got), direct, rtol=0, atol=5.01e-7)  # 6 decimals
    assert np.array_equal(np.asarray(got), np.asarray(direct, dtype=np.float64).round(6))


def test_a_refusal_is_data_in_the_stream_and_an_error_where_all_must_embed() -> None:
    parsed = _parsed()
    results = embed_parsed(RefusesSecond(), parsed)  # type: ignore[arg-type]
    assert isinstance(results[1], EmbedRefusal) and results[0] == [1.0, 1.0, 1.0]
    with pytest.raises(EmbedError, match=r"vec_fake_v1 refused .* sympy-unreadable"):
        vectors_of(RefusesSecond(), parsed)  # type: ignore[arg-type]
    raised = embed_parsed(Raises(), parsed)  # type: ignore[arg-type]
    assert raised == [EmbedRefusal("encoder-error", "RuntimeError: session lost")] * len(parsed)


def test_embedded_turns_a_refusal_into_an_embed_failure_in_order() -> None:
    records: list[EquationRecord | Failure] = [
        EquationRecord(eq_id=f"e{n}", doc_id="d", position=n, latex=latex, source="test")
        for n, latex in enumerate(LATEX)
    ]
    records.insert(2, Failure(eq_id="x", doc_id="d", stage="extract", reason="empty"))
    # batches of 2: [e0, e1] (e1 is the embedder's second item: refused), [x, e2], [e3]
    out = list(embedded(Featuriser(), RefusesSecond(), records, batch_size=2))  # type: ignore[arg-type]
    seen = [
        (item.eq_id, item.stage, item.reason) if isinstance(item, Failure) else item[0].record.eq_id
        for item in out
    ]
    assert seen == [
        "e0",
        ("e1", "embed", "sympy-unreadable"),
        ("x", "extract", "empty"),
        "e2",
        "e3",
    ]
    (refused,) = [item for item in out if isinstance(item, Failure) and item.stage == "embed"]
    assert (refused.doc_id, refused.detail, refused.source) == ("d", "no prefix", "test")
    assert out[0][1] == [1.0, 1.0, 1.0]  # type: ignore[index]
