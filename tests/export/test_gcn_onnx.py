"""mathsearch.export.gcn_onnx + mathsearch.export.parity: the graph CNN in ONNX, exact against
PyTorch on real data."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

from mathsearch.encoders.gcn import GCNConfig, GraphCNN, sum_aggregate
from mathsearch.encoders.graph_data import collate
from mathsearch.export.errors import ParityError
from mathsearch.export.gcn_onnx import (
    IR_VERSION,
    OPSET,
    SLOTS,
    GCNOnnxModule,
    aggregation_plan,
    export_gcn,
    planned_aggregate,
    segment_sum,
)
from mathsearch.export.parity import check_parity
from mathsearch.runtime.graph_batch import pack_graphs
from tests.export.conftest import real_graphs


def test_segment_sum_by_hand() -> None:
    h = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    rows = torch.tensor([3, 0, 1, 1, 2])
    index = torch.tensor([2, 0, 2, 0, 2])  # segment 1 gets nothing
    counts = torch.tensor([2, 0, 3])
    out = segment_sum(h, rows, index, counts)
    assert out.dtype == torch.float32
    assert out.tolist() == [[3.0, 30.0], [0.0, 0.0], [9.0, 90.0]]  # [0+1, -, 3+1+2] rows


def test_segment_sum_is_exact_where_float32_accumulation_is_not() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(20_000, 4)).astype(np.float32) * 1000
    index = np.sort(rng.integers(0, 50, size=20_000))
    counts = np.bincount(index, minlength=50)
    out = segment_sum(
        torch.from_numpy(values),
        torch.arange(20_000),
        torch.from_numpy(index),
        torch.from_numpy(counts),
    ).numpy()
    expected = np.zeros((50, 4))
    np.add.at(expected, index, values.astype(np.float64))
    assert np.abs(out - expected).max() <= np.abs(expected).max() * 1e-7


def test_aggregation_plan_by_hand() -> None:
    # node 0 <- 1, 2, 3 (one past the slots), node 1 <- 0, node 2 <- nothing, node 3 <- 0
    edges = torch.tensor([[1, 0, 2, 3, 0], [0, 1, 0, 0, 3]])
    plan = aggregation_plan(edges, 4)
    assert SLOTS == 2
    assert plan.slots.shape == (SLOTS * 4,)
    assert sorted(plan.slots[[0, 4]].tolist()) in ([1, 2], [1, 3], [2, 3])  # node 0's two
    assert plan.slots[[1, 5]].tolist() == [0, 4] and plan.slots[[2, 6]].tolist() == [4, 4]
    assert plan.overflow_rows.numel() == 1 and plan.overflow_counts.tolist() == [1]
    assert plan.overflow_of.tolist() == [1, 0, 0, 0]
    h = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    assert planned_aggregate(h, plan).tolist() == [[1111.0], [11.0], [100.0], [1001.0]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planned_aggregate_is_the_sum_over_every_in_edge(seed: int) -> None:
    # random graphs with hubs (in-degree up to ~60), repeated edges and isolated nodes, and a
    # path, where no node has more in-edges than the slots
    gen = torch.Generator().manual_seed(seed)
    nodes = 300
    hubs = torch.randint(0, 5, (400,), generator=gen)
    target = torch.cat((hubs, torch.randint(0, nodes - 20, (500,), generator=gen)))
    source = torch.randint(0, nodes, (target.numel(),), generator=gen)
    path = torch.arange(nodes - 1)
    for edges in (torch.stack((source, target)), torch.stack((path, path + 1))):
        h = torch.randn(nodes, 7, generator=gen)
        plan = aggregation_plan(edges, nodes)
        assert torch.allclose(planned_aggregate(h, plan), sum_aggregate(h, edges), atol=1e-5)
    assert plan.overflow_rows.numel() == 0  # the path's in-degree is 1


def _trained_like_model(seed: int = 0) -> GraphCNN:
    """The seed's full-size model with non-trivial batch-norm and soft-norm running statistics
    (train-mode passes over real batches) and alpha moved away from 1."""
    torch.manual_seed(seed)
    model = GraphCNN(GCNConfig())
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm1d)]
    with torch.no_grad():
        model.alpha.fill_(0.7)
        model.train()
        for norm in norms:
            norm.momentum = None  # cumulative averages over the passes below
        model.soft_norm.momentum = 0.5
        graphs = real_graphs()
        for start in range(0, 512, 64):
            model(collate(list(graphs[start : start + 64])))
        for norm in norms:
            norm.momentum = 0.1
        model.soft_norm.momentum = 0.1
    return model.eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphCNN, Path]:
    model = _trained_like_model()
    path = export_gcn(model, tmp_path_factory.mktemp("onnx") / "gcn.onnx", metadata={"k": "v"})
    return model, path


def test_file_is_what_onnxruntime_accepts(exported: tuple[GraphCNN, Path]) -> None:
    model, path = exported
    assert not model.training  # the export leaves the caller's model as it was
    proto = onnx.load(path)
    assert proto.ir_version == IR_VERSION == 8
    assert [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")] == [OPSET]
    assert {p.key: p.value for p in proto.metadata_props} == {"k": "v"}
    ops = {node.op_type for node in proto.graph.node}
    # ScatterND with reduction loses updates under intra-op threads (see mathsearch.export.gcn_onnx)
    assert "ScatterND" not in ops
    assert {"CumSum", "TopK", "MatMul"} <= ops
    names = [i.name for i in proto.graph.input]
    assert names == ["tag", "attr", "char", "pos", "edge_index", "batch_index", "ptr"]
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_parity_on_1000_real_equations(exported: tuple[GraphCNN, Path]) -> None:
    model, path = exported
    assert float(model.soft_norm.running_mean) != 1.0  # real running statistics
    graphs = list(real_graphs())
    assert len(graphs) >= 1000
    # The seed-size model (3 x 512, batch norms, outputs up to ~1): fp32 round-off of PyTorch's
    # reference alone moves with its thread count - max |diff| 5.9e-5 at 2 threads, 1.28e-4 at 1
    # and 1.32e-4 at 4, measured on these 1,171 equations. 2e-4 leaves room for any machine;
    # the shipped models (L2 outputs) stay under 1e-5 at the export default of 1e-4.
    report = check_parity(model, path, graphs, tolerance=2e-4, batch_size=200)
    assert report.passed
    assert report.equations == len(graphs)
    assert report.batches == -(-len(graphs) // 200)
    assert report.max_abs_diff <= 2e-4


def test_id_formulation_equals_the_model_in_torch(exported: tuple[GraphCNN, Path]) -> None:
    model, _ = exported
    graphs = list(real_graphs()[:40])
    feeds = [torch.from_numpy(a) for a in pack_graphs(graphs).feeds().values()]
    with torch.no_grad():
        expected = model(collate(graphs))
        got = GCNOnnxModule(model)(*feeds)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0)


def test_dynamic_shapes_and_batch_independence(exported: tuple[GraphCNN, Path]) -> None:
    _, path = exported
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    graphs = list(real_graphs()[100:137])
    together = session.run(None, pack_graphs(graphs).feeds())[0]
    assert together.shape == (37, 64)
    alone = np.concatenate([session.run(None, pack_graphs([g]).feeds())[0] for g in graphs])
    assert np.abs(together - alone).max() <= 1e-5
    pair = session.run(None, pack_graphs(graphs[5:7]).feeds())[0]
    assert np.abs(pair - together[5:7]).max() <= 1e-5


def test_parity_check_catches_a_model_that_differs(exported: tuple[GraphCNN, Path]) -> None:
    _, path = exported
    other = _trained_like_model(seed=1)
    with pytest.raises(ParityError, match="differs from PyTorch"):
        check_parity(other, path, list(real_graphs()[:64]))
    report = check_parity(other, path, list(real_graphs()[:64]), raise_on_failure=False)
    assert not report.passed and report.max_abs_diff > 1e-2


def test_l2_model_exports_unit_vectors_with_parity(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = GraphCNN(GCNConfig(hidden=64, layers=2, batch_norm_before=(0,), normalisation="l2"))
    path = export_gcn(model.eval(), tmp_path / "l2.onnx")
    graphs = list(real_graphs()[:300])
    report = check_parity(model, path, graphs, tolerance=1e-4, batch_size=100)
    assert report.passed
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = session.run(None, pack_graphs(graphs[:50]).feeds())[0]
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_gated_pooling_exports_with_parity(tmp_path: Path) -> None:
    torch.manual_seed(2)
    config = GCNConfig(
        hidden=64, layers=2, batch_norm_before=(0,), normalisation="l2", pooling="gated"
    )
    model = GraphCNN(config)
    assert model.gate is not None
    # a gate that is not constant (checked below); parity of gates that all fall near zero in
    # one graph is limited by the segment sums' absolute error (about 1e-6): export checks it
    nn.init.normal_(model.gate.weight, std=0.1)
    path = export_gcn(model.eval(), tmp_path / "gated.onnx")
    graphs = list(real_graphs()[:300])
    report = check_parity(model, path, graphs, tolerance=1e-4, batch_size=100)
    assert report.passed
    mean = GraphCNN(replace(config, pooling="mean"))
    mean.load_state_dict(model.state_dict(), strict=False)
    other = export_gcn(mean.eval(), tmp_path / "mean.onnx")
    feeds = pack_graphs(graphs[:50]).feeds()
    gated_out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    mean_out = ort.InferenceSession(str(other), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert np.abs(gated_out[0] - mean_out[0]).max() > 1e-3  # the gate changed the vectors


def test_the_card_description_says_what_the_training_used() -> None:
    from mathsearch.export.export_model import _description

    config = GCNConfig(
        hidden=128, layers=2, out_dim=128, batch_norm_before=(0,), normalisation="l2"
    )
    plain = {"config": {"loss": "infonce", "use_masking": False, "use_augmentation": False}}
    seed = {"config": {"loss": "histogram", "use_masking": True, "use_augmentation": True}}
    assert _description(config, plain).endswith(
        "2 x 128 sum graph convolutions, mean pooling, 128-d, L2 normalisation (cosine); "
        "infonce loss, no identifier permutation."
    )
    assert _description(config, seed).endswith(
        "histogram loss + masking task, identifier permutation."
    )
    gated = replace(config, pooling="gated")
    assert "sum graph convolutions, gated mean pooling, 128-d" in _description(gated, plain)
    shared = {**plain, "sources": {"hepth2003": ["a"], "documents": ["b"]}}
    assert _description(config, shared).endswith(
        "no identifier permutation; trained on documents + hepth2003."
    )
    tuned = {**shared, "config": {**plain["config"], "init_from": "/runs/gcn-v3/checkpoint.pt"}}
    assert _description(config, tuned).endswith(
        "trained on documents + hepth2003; started from the weights of gcn-v3."
    )
    cropped = {**shared, "config": {**plain["config"], "crop_rate": 0.25}}
    assert _description(config, cropped).endswith(
        "no identifier permutation, sub-formula crops as anchors for 0.25 of the pairs; "
        "trained on documents + hepth2003."
    )
    soup = {**shared, "config": {**plain["config"], "soup": ["a.pt", "b.pt", "c.pt"]}}
    assert _description(config, soup).endswith(
        "trained on documents + hepth2003; uniform soup (mean weights) of 3 runs."
    )
