"""mathsearch.encoders.gcn: the graph CNN of KDD 2020 section 4.1, its pure parts by hand, real
batches."""

from __future__ import annotations

from functools import lru_cache

import pytest
import torch
from torch import nn

from mathsearch.encoders.gcn import (
    GCNConfig,
    GCNConfigError,
    GraphCNN,
    SoftNormalisation,
    SumGraphConv,
    gated_mean_pool,
    mean_pool,
    norm_stats,
    sinusoid_table,
    soft_normalise,
    sum_aggregate,
)
from mathsearch.encoders.graph_data import collate, to_data
from mathsearch.encoders.masking import MaskingHeads, mask_nodes, masking_loss
from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord

# root 0 with children 1 and 2; both directions, top-down first (as EquationGraph.edge_index)
EDGES = torch.tensor([[0, 0, 1, 2], [1, 2, 0, 0]])


@lru_cache(maxsize=1)
def _sample_graphs() -> tuple[EquationGraph, ...]:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    parsed = Featuriser().parse_batch(records[:24])
    return tuple(p.graph for p in parsed if isinstance(p, ParsedEquation))


def _model(seed: int = 0, **overrides: object) -> GraphCNN:
    torch.manual_seed(seed)
    return GraphCNN(GCNConfig(**overrides))  # type: ignore[arg-type]


def test_sinusoid_table_by_hand() -> None:
    table = sinusoid_table(4, 6)
    assert table.shape == (4, 6)
    assert table.dtype == torch.float32
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    # E(1) = [sin 1, cos 1, sin(10000^(-1/3)), cos(..), sin(10000^(-2/3)), cos(..)]
    expected = [0.84147098, 0.54030231, 0.04639922, 0.99892298, 0.00215443, 0.99999768]
    assert table[1].tolist() == pytest.approx(expected, abs=1e-6)
    assert float(table[3, 2]) == pytest.approx(0.13879810, abs=1e-6)  # sin(3 * 10000^(-1/3))
    # odd width: the last column is sin(1 * 10000^(-4/5))
    assert float(sinusoid_table(2, 5)[1, 4]) == pytest.approx(0.00063096, abs=1e-6)


def test_sum_aggregation_includes_the_node_itself() -> None:
    x = torch.eye(3)
    assert sum_aggregate(x, EDGES).tolist() == [[1, 1, 1], [1, 1, 0], [1, 0, 1]]
    conv = SumGraphConv(3, 3)
    with torch.no_grad():
        conv.linear.weight.copy_(torch.eye(3))
        conv.bias.copy_(torch.tensor([0.0, -1.5, 0.5]))  # added once, after the sum
    assert conv(x, EDGES).tolist() == [[1.0, 0.0, 1.5], [1.0, 0.0, 0.5], [1.0, 0.0, 1.5]]


def test_first_layer_adds_alpha_times_position_embedding_per_neighbour() -> None:
    # 4-d one-hot input (sizes 2+1+1), hidden 4, identity weights, zero bias
    model = _model(sizes=(2, 1, 1), hidden=4, max_position=3)
    with torch.no_grad():
        model.input_layer.linear.weight.copy_(torch.eye(4))
        model.input_layer.bias.zero_()
        model.alpha.fill_(0.5)
    x = torch.tensor([[1.0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 0, 1]])
    pos = torch.tensor([0, 0, 1])
    e = sinusoid_table(3, 4)
    h = x + 0.5 * e[pos]
    expected = torch.relu(torch.stack([h[0] + h[1] + h[2], h[1] + h[0], h[2] + h[0]]))
    first = model.input_layer(x, EDGES, model.alpha * model.position_table[pos])
    assert torch.allclose(first, expected)


def test_alpha_is_a_learnable_parameter_initialised_to_one() -> None:
    model = _model()
    params = dict(model.named_parameters())
    assert params["alpha"] is model.alpha
    assert model.alpha.requires_grad
    assert float(model.alpha.detach()) == 1.0
    assert "position_table" not in model.state_dict()  # fixed, rebuilt from the config


def test_layer_structure_matches_section_4_1() -> None:
    model = _model()
    assert model.input_layer.linear.weight.shape == (512, 256)
    assert [type(n) for n in model.norms] == [nn.BatchNorm1d, nn.Identity, nn.BatchNorm1d]
    assert [c.linear.weight.shape for c in model.convs] == [(512, 512)] * 3
    assert model.project.weight.shape == (64, 512)


def test_norm_stats_and_soft_normalise_by_hand() -> None:
    emb = torch.tensor([[3.0, 4.0], [0.0, 1.0]])  # norms 5 and 1: mu 3, sigma 2
    mean, std = norm_stats(emb)
    assert (float(mean), float(std)) == (3.0, 2.0)
    out = soft_normalise(emb, mean, std)
    assert out.flatten().tolist() == pytest.approx([0.6, 0.8, 0.0, 0.2])


def test_soft_normalisation_batch_stats_in_train_running_stats_in_eval() -> None:
    norm = SoftNormalisation(momentum=0.1)
    emb = torch.tensor([[3.0, 4.0], [0.0, 1.0]])
    assert norm(emb).flatten().tolist() == pytest.approx([0.6, 0.8, 0.0, 0.2])
    # running: 0.9 * 1 + 0.1 * 3 = 1.2 and 0.9 * 0 + 0.1 * 2 = 0.2
    assert float(norm.running_mean) == pytest.approx(1.2)
    assert float(norm.running_std) == pytest.approx(0.2)
    norm.eval()
    out = norm(emb)
    assert out.flatten().tolist() == pytest.approx([3 / 1.4, 4 / 1.4, 0.0, 1 / 1.4])
    assert float(norm.running_mean) == pytest.approx(1.2)  # eval does not update
    assert int(norm.num_batches_tracked) == 1


def test_mean_pool_by_hand() -> None:
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0], [10.0, 0.0]])
    pooled = mean_pool(h, torch.tensor([0, 0, 1]), torch.tensor([0, 2, 3]))
    assert pooled.tolist() == [[2.0, 3.0], [10.0, 0.0]]


def test_gated_mean_pool_by_hand_and_a_constant_gate_is_the_mean() -> None:
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0], [10.0, 0.0]])
    index, ptr = torch.tensor([0, 0, 1]), torch.tensor([0, 2, 3])
    gate = torch.tensor([[1.0], [3.0], [0.5]])
    pooled = gated_mean_pool(h, gate, index, ptr)
    assert torch.allclose(pooled, torch.tensor([[2.5, 3.5], [10.0, 0.0]]))
    constant = gated_mean_pool(h, torch.full((3, 1), 0.3), index, ptr)
    assert torch.allclose(constant, mean_pool(h, index, ptr))


def test_a_gated_model_starts_as_the_mean_and_its_gate_learns() -> None:
    mean = _model(hidden=16, layers=2, batch_norm_before=(0,), normalisation="l2")
    gated = _model(hidden=16, layers=2, batch_norm_before=(0,), normalisation="l2", pooling="gated")
    gated.load_state_dict(mean.state_dict(), strict=False)  # the same graph layers
    batch = collate(_sample_graphs()[:12])
    mean.eval(), gated.eval()
    with torch.no_grad():  # zero gate weights: every node weighs the same
        assert torch.allclose(gated(batch), mean(batch), atol=1e-6)
    gated.train()
    gated(batch).pow(3).sum().backward()
    assert gated.gate is not None and gated.gate.weight.grad is not None
    assert gated.gate.weight.grad.abs().sum() > 0
    with pytest.raises(GCNConfigError, match="pooling"):
        GCNConfig(pooling="max")


def test_shapes_on_a_real_batch() -> None:
    graphs = _sample_graphs()[:8]
    batch = collate(graphs)
    model = _model()
    emb, states = model.forward_with_states(batch)
    n = sum(g.num_nodes for g in graphs)
    assert emb.shape == (8, 64)
    assert states.shape == (n, 512)
    assert model.node_states(batch).shape == (n, 512)
    assert model(batch).shape == (8, 64)
    assert torch.isfinite(emb).all()
    assert (states >= 0).all()  # ReLU output


def test_eval_embedding_does_not_depend_on_the_batch() -> None:
    graphs = _sample_graphs()[:6]
    model = _model()
    model.train()
    model(collate(graphs))  # move the running statistics away from their start
    model.eval()
    with torch.no_grad():
        together = model(collate(graphs))
        alone = model(to_data(graphs[3]))
    assert alone.shape == (1, 64)
    assert torch.allclose(together[3], alone[0], atol=1e-5)


def test_gradients_reach_every_parameter() -> None:
    batch = collate(_sample_graphs()[:8])
    model = _model()
    heads = MaskingHeads(512)
    masked, mask, targets = mask_nodes(batch, generator=torch.Generator().manual_seed(1))
    emb, states = model.forward_with_states(masked)
    loss = (emb * torch.randn(emb.shape)).sum() + masking_loss(heads(states, mask), targets)
    loss.backward()
    for name, param in [*model.named_parameters(), *heads.named_parameters()]:
        assert param.grad is not None, name
        assert float(param.grad.abs().sum()) > 0.0, name


def test_config_validation_and_round_trip() -> None:
    config = GCNConfig(hidden=64, batch_norm_before=[0])  # type: ignore[arg-type]
    assert GCNConfig.from_dict(config.to_dict()) == config
    with pytest.raises(GCNConfigError):
        GCNConfig(batch_norm_before=(3,))
    with pytest.raises(GCNConfigError):
        GCNConfig(sizes=(32, 32))  # type: ignore[arg-type]
    with pytest.raises(GCNConfigError):
        GCNConfig.from_dict({"width": 3})
