"""mathsearch.encoders.packed_corpus: batches sliced from flat arrays equal collate's, on real
equations."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mathsearch.encoders.corpus import CorpusError, EquationCorpus
from mathsearch.encoders.gcn import GCNConfig, GraphCNN, tree_adjacency
from mathsearch.encoders.graph_data import collate
from mathsearch.encoders.packed_corpus import PackedCorpus
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth


@lru_cache(maxsize=1)
def _corpus() -> EquationCorpus:
    return EquationCorpus.from_records(iter_hepth(bundled_sample_lines()))


def _edges(batch: object) -> list[tuple[int, int, int]]:
    ei, et = batch.edge_index, batch.edge_type  # type: ignore[attr-defined]
    return sorted(zip(ei[0].tolist(), ei[1].tolist(), et.tolist(), strict=True))


def test_a_packed_batch_equals_the_collated_one() -> None:
    corpus = _corpus()
    packed = PackedCorpus.from_corpus(corpus)
    assert len(packed) == len(corpus)
    indices = np.array([5, 0, 17, 17, len(corpus) - 1, 42])
    got = packed.batch(indices)
    want = collate([corpus.graphs[i] for i in indices])
    for name in ("x_tag", "x_attr", "x_char", "pos", "batch", "ptr"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    assert _edges(got) == _edges(want)
    assert got.num_graphs == len(indices)


def test_save_and_memory_mapped_load(tmp_path: Path) -> None:
    corpus = _corpus()
    packed = PackedCorpus.from_corpus(corpus)
    folder = packed.save(tmp_path / "packed")
    loaded = PackedCorpus.load(folder, vocab_hash=corpus.vocab_hash)
    assert isinstance(loaded.tag, np.memmap)
    indices = np.arange(0, len(corpus), 7)
    assert torch.equal(loaded.batch(indices).x_char, packed.batch(indices).x_char)
    with pytest.raises(CorpusError, match="another vocabulary"):
        PackedCorpus.load(folder, vocab_hash="0" * 64)
    with pytest.raises(CorpusError, match="cannot read"):
        PackedCorpus.load(tmp_path / "nothing")
    with pytest.raises(CorpusError, match="at least one"):
        packed.batch(np.array([], dtype=np.int64))


@pytest.mark.parametrize(
    ("normalisation", "pooling"), [("soft", "mean"), ("l2", "mean"), ("l2", "gated")]
)
def test_the_id_path_equals_the_one_hot_path(normalisation: str, pooling: str) -> None:
    corpus = _corpus()
    torch.manual_seed(0)
    model = GraphCNN(GCNConfig(hidden=32, normalisation=normalisation, pooling=pooling))
    if model.gate is not None:
        nn.init.normal_(model.gate.weight)  # a gate that weighs nodes differently
    model.eval()
    batch = PackedCorpus.from_corpus(corpus).batch(np.arange(40))
    n = batch.x_tag.numel()
    ids = (batch.x_tag, batch.x_attr, batch.x_char, batch.pos, batch.edge_index)
    with torch.no_grad():
        want, want_states = model.forward_with_states(collate(corpus.graphs[:40]))
        for adjacency in (None, tree_adjacency(batch.edge_index, n).coalesce()):
            got, states = model.forward_ids(*ids, batch.batch, batch.ptr, adjacency)
            assert torch.allclose(got, want, atol=1e-5)
            assert torch.allclose(states, want_states, atol=1e-4)
    if normalisation == "l2":
        assert torch.allclose(want.norm(dim=1), torch.ones(40), atol=1e-5)


def test_bf16_autocast_on_the_cpu_stays_close_to_float32() -> None:
    """``--amp`` on a CPU: bf16 products and node states, float32 pooling and embeddings."""
    corpus = _corpus()
    torch.manual_seed(0)
    model = GraphCNN(GCNConfig(hidden=64, layers=2, batch_norm_before=(0,), normalisation="l2"))
    model.eval()
    batch = PackedCorpus.from_corpus(corpus).batch(np.arange(40))
    adjacency = tree_adjacency(batch.edge_index, batch.x_tag.numel()).coalesce()
    ids = (batch.x_tag, batch.x_attr, batch.x_char, batch.pos, batch.edge_index)
    with torch.no_grad():
        want, _ = model.forward_ids(*ids, batch.batch, batch.ptr, adjacency)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got, states = model.forward_ids(*ids, batch.batch, batch.ptr, adjacency)
    assert states.dtype == torch.bfloat16  # the states stayed bf16 between the layers
    assert got.dtype == torch.float32
    cosine = torch.nn.functional.cosine_similarity(got, want, dim=1)
    assert cosine.min() > 0.99
