"""ONNX export of the ExpEmb encoder: parity with PyTorch on real prefix sequences, the card."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mathsearch.encoders.seq2seq import ExpEmb, ExpEmbConfig
from mathsearch.encoders.seq2seq_data import TokenVocabulary, read_egen
from mathsearch.export.errors import ModelMismatchError
from mathsearch.export.seq2seq_onnx import check_seq2seq_parity, export_seq2seq, vocab_path
from mathsearch.indexer.semvec_prefix import read_semvec_prefix
from mathsearch.runtime.model_card import load_card
from mathsearch.runtime.seq2seq_runtime import Seq2SeqEmbedder

RESOURCES = Path(__file__).resolve().parents[1] / "resources"


def _real_sequences() -> list[tuple[str, ...]]:
    egen = [s for c in read_egen([RESOURCES / "encoders" / "egen-clusters.txt"]) for s in c]
    semvec = read_semvec_prefix(RESOURCES / "indexer" / "semvec" / "boolean5-validationset.json.gz")
    return egen + [m for c in semvec for m in c.members]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[ExpEmb, TokenVocabulary, Path]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    sequences = _real_sequences()
    vocab = TokenVocabulary.build(sequences, min_count=1)
    torch.manual_seed(0)
    model = ExpEmb(ExpEmbConfig(vocab_size=len(vocab), hidden=16, max_len=64)).eval()
    out = tmp_path_factory.mktemp("s2s") / "m.onnx"
    export_seq2seq(model, vocab, out, sequences, metrics={"score_5": {"poly8": 1.0}})
    torch.set_num_threads(threads)
    return model, vocab, out


def test_parity_on_real_sequences_and_card(exported: tuple[ExpEmb, TokenVocabulary, Path]) -> None:
    model, vocab, out = exported
    report = check_seq2seq_parity(model, vocab, out, _real_sequences(), batch_size=17)
    assert report.passed and report.sequences > 150 and report.batches > 10
    card = load_card(out)
    assert (card.family, card.vector_field, card.similarity) == (
        "seq2seq",
        "vec_seq2seq_v1",
        "cosine",
    )
    assert card.embedding_dim == 16 and card.vocab_hash == vocab.hash
    assert card.metrics == {"score_5": {"poly8": 1.0}} and card.parity["passed"]
    assert json.loads(vocab_path(out).read_text())["tokens"] == vocab.tokens


def test_runtime_matches_pytorch(exported: tuple[ExpEmb, TokenVocabulary, Path]) -> None:
    model, vocab, out = exported
    embedder = Seq2SeqEmbedder(out, device="cpu")
    sequences = _real_sequences()[:40]
    got = embedder.embed([{"prefix": list(s)} for s in sequences])
    from mathsearch.encoders.seq2seq_eval import checkpoint_embedder

    expected = checkpoint_embedder(model, vocab)(sequences)
    assert np.allclose(np.stack(got), expected, atol=1e-4)


def test_a_vocabulary_of_another_model_is_refused(
    exported: tuple[ExpEmb, TokenVocabulary, Path], tmp_path: Path
) -> None:
    _, vocab, out = exported
    copy = tmp_path / "m.onnx"
    copy.write_bytes(out.read_bytes())
    (tmp_path / "m.card.json").write_text(out.with_name("m.card.json").read_text())
    TokenVocabulary([*vocab.tokens, "extra"]).save(vocab_path(copy))
    with pytest.raises(ModelMismatchError):
        Seq2SeqEmbedder(copy)


def test_l2_export_gives_unit_vectors_in_the_same_directions(
    exported: tuple[ExpEmb, TokenVocabulary, Path], tmp_path: Path
) -> None:
    model, vocab, plain = exported
    sequences = _real_sequences()
    out = tmp_path / "unit.onnx"
    card, parity = export_seq2seq(model, vocab, out, sequences, version=2, l2=True)
    assert parity.passed and card.vector_field == "vec_seq2seq_v2"
    assert "L2 norm" in card.description
    items = [{"prefix": list(s)} for s in sequences[:50]]
    unit = np.stack(Seq2SeqEmbedder(out, device="cpu").embed(items))
    raw = np.stack(Seq2SeqEmbedder(plain, device="cpu").embed(items))
    assert np.allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    assert np.allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-5)
