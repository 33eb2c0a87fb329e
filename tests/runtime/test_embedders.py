"""The family-neutral embedder interface over the shipped graph CNN, and the CLI plug-in hooks."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.runtime.embedders import (
    FAMILIES,
    Embedder,
    EmbedRefusal,
    GcnEmbedder,
    as_embedder,
    default_model_path,
    load_embedder,
    one_field_each,
    parse_encoders,
)
from mathsearch.runtime.errors import ModelCardError
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.runtime.model_card import card_path, load_card
from mathsearch.runtime.settings import DEFAULT_MODEL_PATH
from tests.conftest import DEFAULT_CARD, DEFAULT_DIM, DEFAULT_FIELD

LATEX = [r"\frac{a}{b}+c", r"E = m c^2", r"\int_0^1 x^2 \, dx"]


@pytest.fixture(scope="module")
def gcn() -> GcnEmbedder:
    embedder = load_embedder("gcn", device="cpu")
    assert isinstance(embedder, GcnEmbedder)
    return embedder


def _items() -> list[dict]:
    featuriser = Featuriser()
    parsed = [featuriser.parse_latex(latex) for latex in LATEX]
    assert all(isinstance(p, ParsedEquation) for p in parsed)
    return [p.to_dict() for p in parsed]


def test_gcn_embedder_matches_the_encoder_and_keeps_the_interface(gcn: GcnEmbedder) -> None:
    items = _items()
    out = gcn.embed(items)
    direct = GcnSession(default_model_path("gcn"), device="cpu").encode(
        [Featuriser().parse_latex(latex).graph for latex in LATEX]
    )
    assert isinstance(gcn, Embedder)
    assert (gcn.family, gcn.vector_field, gcn.dim) == ("gcn", DEFAULT_FIELD, DEFAULT_DIM)
    assert np.allclose(np.stack(out), direct, atol=1e-6)


def test_a_bad_item_is_refused_alone(gcn: GcnEmbedder) -> None:
    items = _items()
    broken = {**items[1], "graph": {"nodes": "not a graph"}}
    out = gcn.embed([items[0], {"latex": "x"}, broken, items[2]])
    assert isinstance(out[0], np.ndarray) and isinstance(out[3], np.ndarray)
    assert isinstance(out[1], EmbedRefusal) and out[1].reason == "invalid-graph"
    assert "graph" in out[1].detail
    assert isinstance(out[2], EmbedRefusal)
    assert np.allclose(out[3], gcn.embed([items[2]])[0], atol=1e-6)


def test_the_in_process_item_embeds_as_its_json_form(gcn: GcnEmbedder) -> None:
    featuriser = Featuriser()
    parsed = [featuriser.parse_latex(latex) for latex in LATEX]
    objects = gcn.embed([p.embed_item() for p in parsed])  # EquationGraph objects, no JSON trip
    dicts = gcn.embed([p.to_dict() for p in parsed])
    assert all(isinstance(v, np.ndarray) for v in objects)
    assert np.array_equal(np.stack(objects), np.stack(dicts))


def test_as_embedder_takes_whatever_a_caller_holds(gcn: GcnEmbedder) -> None:
    assert as_embedder(gcn) is gcn
    encoder = GcnSession(default_model_path("gcn"), device="cpu")
    wrapped = as_embedder(encoder)
    assert isinstance(wrapped, GcnEmbedder) and wrapped.session is encoder.session
    by_name = as_embedder(None)
    by_path = as_embedder(str(default_model_path("gcn")))
    assert by_name.vector_field == by_path.vector_field == wrapped.vector_field == DEFAULT_FIELD
    items = _items()
    assert np.allclose(np.stack(wrapped.embed(items)), np.stack(gcn.embed(items)), atol=1e-6)
    with pytest.raises(ModelCardError, match="cannot embed with int"):
        as_embedder(3)


def test_parse_encoders_keeps_order_and_refuses_unknown_names() -> None:
    assert parse_encoders("gcn, bitmap,gcn") == ["gcn", "bitmap"]
    assert parse_encoders(["m/x.onnx", "seq2seq"]) == ["m/x.onnx", "seq2seq"]
    with pytest.raises(ModelCardError, match="unknown encoder 'resnet'"):
        parse_encoders("gcn,resnet")
    with pytest.raises(ModelCardError, match="no encoder"):
        parse_encoders(" , ")


def test_one_field_each_keeps_one_name_per_field_and_refuses_two_models_on_one() -> None:
    v8 = load_card(default_model_path("gcn").with_name("gcn-v8.onnx"))
    named = [("gcn", DEFAULT_CARD), ("v8.onnx", v8), ("default.onnx", DEFAULT_CARD)]
    # the same model under a second name is the same field, kept under its first name
    assert one_field_each(named) == {DEFAULT_FIELD: "gcn", v8.vector_field: "v8.onnx"}
    other = dataclasses.replace(DEFAULT_CARD, sha256="0" * 64)  # same family and version
    assert other.vector_field == DEFAULT_FIELD
    with pytest.raises(ModelCardError, match=f"'gcn' and 'other.onnx' .* field {DEFAULT_FIELD}"):
        one_field_each([*named, ("other.onnx", other)])


def test_default_model_paths_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(FAMILIES) == {"gcn", "bitmap", "seq2seq", "figure"}
    assert default_model_path("bitmap").name == "bitmap-v2.onnx"
    monkeypatch.delenv("MATHSEARCH_MODEL_SEQ2SEQ", raising=False)
    assert default_model_path("seq2seq").name == "seq2seq-v2.onnx"  # v1 stays loadable by path
    assert default_model_path("seq2seq").is_file()
    # unset, the family default and the runtime's default are the same shipped file
    monkeypatch.delenv("MATHSEARCH_MODEL", raising=False)
    assert default_model_path("gcn") == DEFAULT_MODEL_PATH and DEFAULT_MODEL_PATH.is_file()
    monkeypatch.setenv("MATHSEARCH_MODEL_SEQ2SEQ", "/models/s.onnx")
    monkeypatch.setenv("MATHSEARCH_MODEL", "/models/g.onnx")
    assert default_model_path("seq2seq") == Path("/models/s.onnx")
    assert default_model_path("gcn") == Path("/models/g.onnx")
    with pytest.raises(ModelCardError, match="unknown encoder family"):
        default_model_path("resnet")


def test_load_embedder_refuses_missing_models_and_unknown_families(tmp_path: Path) -> None:
    with pytest.raises(ModelCardError, match="does not exist"):
        load_embedder(tmp_path / "none.onnx")
    model = tmp_path / "odd-v1.onnx"
    shutil.copy(default_model_path("gcn"), model)
    card = load_card(default_model_path("gcn"))
    card.family = "resnet"
    card_path(model).write_text(json.dumps(card.to_dict()), encoding="utf-8")
    with pytest.raises(ModelCardError, match="family 'resnet' has no runtime"):
        load_embedder(model)


def test_checkpoint_family_reads_the_family_entry(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from mathsearch.cli.families import checkpoint_family

    torch.save({"family": "bitmap", "model": {}}, tmp_path / "b.pt")
    torch.save({"model": {}}, tmp_path / "g.pt")
    assert checkpoint_family(tmp_path / "b.pt") == "bitmap"
    assert checkpoint_family(tmp_path / "g.pt") == "gcn"


class _Fake:
    vector_field = "vec_fake_v1"

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    def embed(self, items: list) -> list:
        if self.behaviour == "raise":
            raise RuntimeError("session lost")
        if self.behaviour == "short":
            return [np.zeros(2, dtype=np.float32)]
        return [np.full(2, i, dtype=np.float32) for i, _ in enumerate(items)]


def test_embed_safely_keeps_a_model_fault_as_refusals() -> None:
    from mathsearch.runtime.embedder_base import EmbedRefusal, embed_safely

    items = [{"latex": "x"}, {"latex": "y"}, {"latex": "z"}]
    good = embed_safely(_Fake("ok"), items)
    assert [float(v[0]) for v in good] == [0.0, 1.0, 2.0]
    raised = embed_safely(_Fake("raise"), items)
    assert raised == [EmbedRefusal("encoder-error", "RuntimeError: session lost")] * 3
    short = embed_safely(_Fake("short"), items)
    assert short == [EmbedRefusal("encoder-error", "1 results for 3 items")] * 3


def test_every_family_of_the_registry_has_its_modules_and_plug_ins() -> None:
    """Every module the registry names exists and has what its callers use (no family list
    elsewhere to keep in step: the registry is read, not compared with a copy)."""
    import importlib
    import importlib.util

    from mathsearch.runtime.embedders import FAMILIES, default_model_path
    from mathsearch.runtime.families import FAMILY_REGISTRY, family_of_field, needs_prefix

    assert tuple(FAMILY_REGISTRY) == FAMILIES and "gcn" in FAMILY_REGISTRY
    for name, family in FAMILY_REGISTRY.items():
        module, cls = family.runtime_target.split(":")
        assert getattr(importlib.import_module(module), cls).__name__ == cls
        for role in ("exporter", "trainer", "evaluator", "cli_train", "cli_export"):
            assert importlib.util.find_spec(family.module(role)) is not None, (name, role)
        train = importlib.import_module(family.module("cli_train"))
        assert callable(train.register) and callable(train.run), name
        assert callable(importlib.import_module(family.module("cli_export")).run_export), name
        if family.cli_eval is not None:
            plugin = importlib.import_module(family.module("cli_eval"))
            assert callable(plugin.register) and callable(plugin.run), name
        assert default_model_path(name).name == f"{name}-v{family.default_version}.onnx"
        assert default_model_path(name).is_file(), name  # the shipped default exists
        assert family_of_field(f"vec_{name}_v3") is family
    with pytest.raises(ValueError, match="no cli_eval"):
        FAMILY_REGISTRY["gcn"].module("cli_eval")
    assert needs_prefix(["vec_gcn_v2", "vec_seq2seq_v2"]) and not needs_prefix(["gcn", "bitmap"])


def test_the_former_export_names_still_load_the_runtime() -> None:
    """The runtime moved from mathsearch.export to mathsearch.runtime; the old names stay for a
    release (docs/export.md)."""
    import mathsearch.export as old
    import mathsearch.runtime as new

    assert old.load_embedder is new.load_embedder
    assert old.Encoder is new.GcnSession and old.ExportSettings is new.RuntimeSettings
    assert old.BitmapEmbedder is new.BitmapEmbedder
    embedder = old.load_embedder("gcn")
    assert embedder.vector_field == "vec_gcn_v7"
