"""mathsearch.runtime.model_card: round trip, required fields, digest check, OpenSearch names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mathsearch.runtime.errors import ModelCardError
from mathsearch.runtime.model_card import ModelCard, card_path, file_sha256, load_card
from mathsearch.runtime.settings import DEFAULT_MODEL_PATH


def _card(**changes: object) -> ModelCard:
    fields: dict[str, object] = {
        "name": "gcn-v3",
        "family": "gcn",
        "version": 3,
        "embedding_dim": 64,
        "similarity": "dot",
        "vocab_hash": "ab" * 32,
        "vocab_sizes": [32, 32, 192],
        "opset": 17,
        "ir_version": 8,
        "inputs": [{"name": "tag", "dtype": "int64", "shape": ["N"]}],
        "outputs": [{"name": "embedding", "dtype": "float32", "shape": ["B", 64]}],
    }
    fields.update(changes)
    return ModelCard(**fields)  # type: ignore[arg-type]


def test_card_path_sits_beside_the_model() -> None:
    assert card_path("models/gcn-v2.onnx") == Path("models/gcn-v2.card.json")
    assert card_path(DEFAULT_MODEL_PATH).is_file()  # the shipped default has its card
    assert card_path("/x/model") == Path("/x/model.card.json")


def test_round_trip_and_names(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not really onnx")
    card = _card(sha256=file_sha256(model), metrics={"holdout_ranking": 0.61})
    path = card.write(model)
    data = json.loads(path.read_text())
    assert data["vector_field"] == "vec_gcn_v3"
    assert data["space_type"] == "innerproduct"
    assert _card(similarity="cosine").space_type == "cosinesimil"
    loaded = load_card(model)
    assert loaded == card


def test_refusals(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"v1")
    with pytest.raises(ModelCardError, match="no model card"):
        load_card(model)
    _card(sha256=file_sha256(model)).write(model)
    model.write_bytes(b"v2")  # the model changed after the card was written
    with pytest.raises(ModelCardError, match="sha256"):
        load_card(model)
    card_path(model).write_text(json.dumps({"name": "x", "family": "gcn"}))
    with pytest.raises(ModelCardError, match="lacks"):
        load_card(model)
    card_path(model).write_text("{broken")
    with pytest.raises(ModelCardError, match="unreadable"):
        load_card(model)
    with pytest.raises(ModelCardError, match="similarity"):
        _card(similarity="l2")
    with pytest.raises(ModelCardError, match="SHA-256"):
        _card(vocab_hash="short")
