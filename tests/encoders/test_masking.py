"""mathsearch.encoders.masking: the masking task of KDD 2020 section 4.2."""

from __future__ import annotations

import math
from functools import lru_cache

import pytest
import torch

from mathsearch.encoders.graph_data import EncoderInputError, collate, one_hot, to_data
from mathsearch.encoders.masking import (
    MaskingHeads,
    MaskLogits,
    MaskTargets,
    mask_nodes,
    masking_loss,
)
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord


@lru_cache(maxsize=1)
def _sample_graphs() -> tuple[EquationGraph, ...]:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    parsed = Featuriser().parse_batch(records[:40])
    return tuple(p.graph for p in parsed if isinstance(p, ParsedEquation))


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_masks_about_15_percent_with_all_zero_rows() -> None:
    graphs = _sample_graphs()
    batch = collate(graphs)
    before = one_hot(batch)
    masked, mask, _ = mask_nodes(batch, rate=0.15, generator=_generator())
    assert mask.dtype == torch.bool and mask.shape == (batch.num_nodes,)
    assert 0.12 < float(mask.float().mean()) < 0.18
    after = one_hot(masked)
    assert (after[mask] == 0).all()
    assert torch.equal(after[~mask], before[~mask])
    assert torch.equal(masked.pos, batch.pos)  # the position is not a feature of X
    assert torch.equal(masked.edge_index, batch.edge_index)
    # per graph: floor or ceil of 15% of its nodes
    per_graph = torch.zeros(batch.num_graphs, dtype=torch.long).index_add_(
        0, batch.batch, mask.long()
    )
    for graph, count in zip(graphs, per_graph.tolist(), strict=True):
        assert math.floor(0.15 * graph.num_nodes) <= count <= math.ceil(0.15 * graph.num_nodes)


def test_targets_are_the_original_ids_and_the_input_is_untouched() -> None:
    batch = collate(_sample_graphs()[:10])
    tag, attr, char = batch.x_tag.clone(), batch.x_attr.clone(), batch.x_char.clone()
    masked, mask, targets = mask_nodes(batch, generator=_generator(3))
    assert torch.equal(batch.x_tag, tag) and torch.equal(batch.x_char, char)  # not modified
    assert torch.equal(targets.tag, tag[mask])
    assert torch.equal(targets.attr, torch.where(attr[mask] < 0, 32, attr[mask]))
    assert torch.equal(targets.char, torch.where(char[mask] < 0, 192, char[mask]))
    assert int(targets.char.max()) <= 192 and int(targets.attr.max()) <= 32
    assert (targets.char == 192).any() and (targets.char < 192).any()  # elements and leaves
    for name in ("x_tag", "x_attr", "x_char"):
        assert (getattr(masked, name)[mask] == -1).all()


def test_masking_is_reproducible_and_rate_bounds() -> None:
    data = to_data(_sample_graphs()[0])
    first = mask_nodes(data, generator=_generator(7))[1]
    again = mask_nodes(data, generator=_generator(7))[1]
    assert torch.equal(first, again)
    assert not mask_nodes(data, rate=0.0)[1].any()
    assert mask_nodes(data, rate=1.0)[1].all()
    with pytest.raises(EncoderInputError):
        mask_nodes(data, rate=1.5)
    masked = mask_nodes(data, rate=1.0)[0]
    with pytest.raises(EncoderInputError, match="masked already"):
        mask_nodes(masked, rate=1.0)


def test_heads_shapes_and_loss_by_hand() -> None:
    heads = MaskingHeads(hidden=8)
    states = torch.randn(5, 8)
    mask = torch.tensor([True, False, True, False, False])
    logits = heads(states, mask)
    assert logits.tag.shape == (2, 32)
    assert logits.attr.shape == (2, 33)
    assert logits.char.shape == (2, 193)
    # uniform logits: cross-entropy log(C) per head
    uniform = MaskLogits(torch.zeros(2, 32), torch.zeros(2, 33), torch.zeros(2, 193))
    targets = MaskTargets(torch.tensor([0, 5]), torch.tensor([32, 1]), torch.tensor([192, 7]))
    expected = (math.log(32) + math.log(33) + math.log(193)) / 3
    assert float(masking_loss(uniform, targets)) == pytest.approx(expected, rel=1e-6)


def test_loss_of_nothing_masked_is_a_connected_zero() -> None:
    heads = MaskingHeads(hidden=4)
    logits = heads(torch.randn(3, 4), torch.zeros(3, dtype=torch.bool))
    empty = torch.zeros(0, dtype=torch.long)
    loss = masking_loss(logits, MaskTargets(empty, empty, empty))
    assert float(loss.detach()) == 0.0
    loss.backward()
    assert heads.tag.weight.grad is not None
