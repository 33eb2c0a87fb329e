"""The query encoder's ONNX Runtime sessions (pure: no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.query_encoder import ModelQueryEncoder
from mathsearch.runtime.embedders import default_model_path
from tests.conftest import DEFAULT_FIELD


def _intra_op_threads(encoder: ModelQueryEncoder) -> int:
    embedder = encoder._embedder("gcn")
    return int(embedder.session.get_session_options().intra_op_num_threads)


def test_query_sessions_use_one_thread_unless_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATHSEARCH_EMBED_THREADS", "2")  # the indexing side's setting
    monkeypatch.delenv("MATHSEARCH_QUERY_THREADS", raising=False)
    encoder = ModelQueryEncoder()
    features = encoder.features(r"\frac{a}{b} + x^2")
    assert features.vector and features.tokens
    assert _intra_op_threads(encoder) == 1
    monkeypatch.setenv("MATHSEARCH_QUERY_THREADS", "2")
    assert _intra_op_threads(ModelQueryEncoder()) == 2


def test_tokens_alone_load_no_model_and_match_the_embedded_tokens() -> None:
    latex = r"\sum_k \phi_k(x) \exp(iky/R)"
    missing = ModelQueryEncoder(model="/nonexistent/gcn-v0.onnx")
    alone = missing.features(latex, embed=False)
    assert alone.tokens == ModelQueryEncoder().features(latex).tokens
    assert alone.vector is None and alone.by_field() == {} and not alone.refusals
    with pytest.raises(QueryError, match="gcn-v0"):  # embedding does need the model
        missing.features(latex)
    with pytest.raises(QueryError, match="unbalanced"):  # an unreadable query is still refused
        missing.features(r"\frac{", embed=False)


def test_two_models_on_one_field_are_refused_and_one_model_named_twice_embeds_once(
    field_twin: Path,
) -> None:
    latex = r"\frac{a}{b} + x^2"
    twice = ModelQueryEncoder(encoders=["gcn", str(default_model_path("gcn"))]).features(latex)
    assert list(twice.vectors) == [DEFAULT_FIELD] and twice.vector == twice.vectors[DEFAULT_FIELD]
    refused = f"different models that write the same field {DEFAULT_FIELD}"
    with pytest.raises(QueryError, match=refused):
        ModelQueryEncoder(encoders=["gcn", str(field_twin)]).features(latex)


def test_deferred_second_stage_encoders_embed_side_by_side_to_the_same_vectors() -> None:
    """``defer_extra``: each second-stage encoder is a future of its own (they run side by side
    while the first stage runs), and the resolved vectors are those of the same pass undeferred."""
    encoder = ModelQueryEncoder()
    latex = r"\int_0^\infty e^{-x^2} dx = \frac{\sqrt{\pi}}{2}"
    extra = ["gcn-v9.onnx", "gcn-v10.onnx"]
    now = encoder.features(latex, extra=extra)
    later = encoder.features(latex, extra=extra, defer_extra=True)
    assert len(later.pending) == 2 and set(later.by_field()) == {DEFAULT_FIELD}
    done = later.resolved()
    assert done.pending == () and done.vector == now.vector
    assert set(done.by_field()) == {DEFAULT_FIELD, "vec_gcn_v9", "vec_gcn_v10"}
    for field, vector in now.by_field().items():
        assert done.by_field()[field] == pytest.approx(vector, abs=1e-6)
