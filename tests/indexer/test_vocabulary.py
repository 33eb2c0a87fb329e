"""Vocabulary: fitting order, lookups with unknown slots, attribute symbols, files and hashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mathsearch.indexer import vocabulary as vocabulary_module
from mathsearch.indexer.errors import VocabularyError
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.vocabulary import (
    DEFAULT_SIZES,
    TEXT_TAG,
    Vocabulary,
    attribute_symbols,
    default_vocabulary,
    fit_default,
    leaf_text,
)


def _trees() -> list[MathNode]:
    # x^2 + y  and  x y  (KaTeX-like, hand-written)
    first = MathNode(
        "math",
        children=[
            MathNode(
                "mrow",
                children=[
                    MathNode("msup", children=[MathNode("mi", text="x"), MathNode("mn", text="2")]),
                    MathNode("mo", text="+"),
                    MathNode("mi", {"mathvariant": "bold"}, text="y"),
                ],
            )
        ],
    )
    second = MathNode(
        "math",
        children=[
            MathNode("mi", text="x"),
            MathNode("mspace", {"width": "0.2778em"}),
            MathNode("mi", {"mathvariant": "bold", "class": "c"}, text="y"),
        ],
    )
    return [first, second]


def test_fit_orders_by_frequency_then_symbol() -> None:
    vocab = Vocabulary.fit(_trees())
    # counts: #text 6, mi 4, math 2, mn 1, mo 1, mrow 1, mspace 1, msup 1
    assert vocab.tags == [TEXT_TAG, "mi", "math", "mn", "mo", "mrow", "mspace", "msup"]
    assert vocab.attributes == ["mathvariant=bold", "width=0.3em"]
    # x 2, y 2, then + and 2 once each ("+" < "2")
    assert vocab.characters == ["x", "y", "+", "2"]
    assert vocab.sizes == DEFAULT_SIZES
    assert vocab.dim == 256


def test_fit_prunes_to_sizes_minus_the_unknown_slot() -> None:
    vocab = Vocabulary.fit(_trees(), sizes=(3, 2, 3))
    assert vocab.tags == [TEXT_TAG, "mi"]
    assert vocab.attributes == ["mathvariant=bold"]
    assert vocab.characters == ["x", "y"]
    assert vocab.tag_id("math") == 2 == vocab.unknown_tag
    assert vocab.char_id("+") == 2 == vocab.unknown_char


def test_lookups_and_unknown_slots() -> None:
    vocab = Vocabulary(["mi", "mo"], ["mathvariant=bold", "width=0.3em"], ["x", "+"])
    assert vocab.tag_id("mi") == 0
    assert vocab.tag_id("mo") == 1
    assert vocab.tag_id("mfrac") == 31
    assert vocab.char_id("x") == 0
    assert vocab.char_id("∑") == 191
    assert vocab.attribute_id(None) == -1
    assert vocab.attribute_id({}) == -1
    assert vocab.attribute_id({"class": "mord", "style": "x", "id": "a"}) == -1
    assert vocab.attribute_id({"mathvariant": "bold"}) == 0
    # several attributes: the best-ranked symbol wins, whatever the attribute order
    assert vocab.attribute_id({"width": "0.2778em", "mathvariant": "bold"}) == 0
    assert vocab.attribute_id({"stretchy": "false", "width": "0.28em"}) == 1
    assert vocab.attribute_id({"stretchy": "false"}) == 31
    assert vocab.attribute_id({"stretchy": "false"}) == 31  # cached path
    assert (vocab.tag_symbol(1), vocab.tag_symbol(31)) == ("mo", None)
    assert vocab.attribute_symbol(1) == "width=0.3em"
    assert vocab.char_symbol(1) == "+"


def test_attribute_symbols_round_em_and_skip_noise() -> None:
    attrs = {
        "xmlns": "http://www.w3.org/1998/Math/MathML",
        "xmlns:m": "x",
        "class": "mord",
        "style": "color:red",
        "id": "e1",
        "width": "0.2778em",
        "lspace": "-0.1667em",
        "height": "1em",
        "depth": "-0.04em",
        "mathvariant": "normal",
        "size": "largeem",
    }
    assert attribute_symbols(attrs) == [
        "width=0.3em",
        "lspace=-0.2em",
        "height=1.0em",
        "depth=0.0em",
        "mathvariant=normal",
        "size=largeem",
    ]
    assert attribute_symbols(None) == []


def test_leaf_text() -> None:
    assert leaf_text(" x\n") == "x"
    assert leaf_text(" \t") is None
    assert leaf_text(None) is None
    assert leaf_text("\u00a0") == "\u00a0"  # not XML whitespace
    assert leaf_text("e\u0301") == "\u00e9"


def test_fit_counts_normalised_leaf_text() -> None:
    vocab = Vocabulary.fit([MathNode("mi", text=" e\u0301 "), MathNode("mtext", text="  ")])
    assert vocab.characters == ["\u00e9"]
    assert vocab.tags == [TEXT_TAG, "mi", "mtext"]


def test_save_load_round_trip(tmp_path: Path) -> None:
    vocab = Vocabulary.fit(_trees())
    path = vocab.save(tmp_path / "sub" / "vocab.json")
    loaded = Vocabulary.load(path)
    assert loaded == vocab
    assert loaded.content_hash == vocab.content_hash
    assert (loaded.tags, loaded.attributes, loaded.characters) == (
        vocab.tags,
        vocab.attributes,
        vocab.characters,
    )
    assert json.loads(path.read_text(encoding="utf-8"))["content_hash"] == vocab.content_hash


def test_hash_changes_with_content_and_sizes() -> None:
    base = Vocabulary(["mi"], ["a=b"], ["x"])
    assert len(base.content_hash) == 64
    assert Vocabulary(["mi"], ["a=b"], ["x"]).content_hash == base.content_hash
    others = [
        Vocabulary(["mo"], ["a=b"], ["x"]),
        Vocabulary(["mi"], ["a=c"], ["x"]),
        Vocabulary(["mi"], ["a=b"], ["y"]),
        Vocabulary(["mi"], ["a=b"], ["x", "y"]),
        Vocabulary(["mi"], ["a=b"], ["x"], sizes=(32, 32, 193)),
    ]
    assert len({base.content_hash, *(v.content_hash for v in others)}) == 6


def test_tampered_or_broken_files_are_refused(tmp_path: Path) -> None:
    path = Vocabulary.fit(_trees()).save(tmp_path / "vocab.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["characters"][0], data["characters"][1] = data["characters"][1], data["characters"][0]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(VocabularyError, match="hash mismatch"):
        Vocabulary.load(path)

    for content in ["{not json", json.dumps({"tags": []}), json.dumps([1, 2])]:
        path.write_text(content, encoding="utf-8")
        with pytest.raises(VocabularyError):
            Vocabulary.load(path)
    broken = {**Vocabulary([], [], []).to_dict(), "tags": 5}
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(VocabularyError):
        Vocabulary.load(path)
    with pytest.raises(VocabularyError, match="does not exist"):
        Vocabulary.load(tmp_path / "missing.json")


def test_invalid_vocabularies() -> None:
    with pytest.raises(VocabularyError):
        Vocabulary([f"t{i}" for i in range(32)], [], [])  # 32 tags leave no unknown slot
    with pytest.raises(VocabularyError):
        Vocabulary(["mi", "mi"], [], [])
    with pytest.raises(VocabularyError):
        Vocabulary([], [], ["xy"])
    with pytest.raises(VocabularyError):
        Vocabulary([], [], [], sizes=(0, 32, 192))
    with pytest.raises(VocabularyError):
        Vocabulary([""], [], [])


def test_default_vocabulary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "vocabulary-v1.json"
    monkeypatch.setattr(vocabulary_module, "DEFAULT_VOCABULARY_PATH", missing)
    default_vocabulary.cache_clear()
    try:
        with pytest.raises(VocabularyError, match="missing"):
            default_vocabulary()
        fitted = fit_default(_trees())
        assert fitted.sizes == DEFAULT_SIZES
        fitted.save(missing)
        assert default_vocabulary() == fitted
    finally:
        default_vocabulary.cache_clear()
