"""BatchNormalization as Mul + Add: same outputs on the CPU provider, for a hand-built graph and
for the shipped graph CNNs on real equations; what the CUDA provider is given to load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mathsearch.runtime.batch_norm_folding import affine_from_batch_norm, fold_batch_norm
from mathsearch.runtime.gcn_session import session_source
from mathsearch.runtime.graph_batch import pack_graphs
from mathsearch.runtime.providers import CPU, CUDA
from mathsearch.runtime.settings import DEFAULT_MODEL_PATH
from tests.export.conftest import real_graphs

MODELS = DEFAULT_MODEL_PATH.parent


def _run(model: onnx.ModelProto | bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    data = model if isinstance(model, bytes) else model.SerializeToString()
    session = ort.InferenceSession(data, providers=[CPU])
    return session.run(None, feeds)


def _stats(rng: np.random.Generator, channels: int, prefix: str) -> list[onnx.TensorProto]:
    values = {
        "gamma": rng.normal(1.0, 0.5, channels),
        "beta": rng.normal(0.0, 0.5, channels),
        "mean": rng.normal(0.0, 2.0, channels),
        "var": rng.uniform(0.01, 4.0, channels),
    }
    return [
        numpy_helper.from_array(v.astype(np.float32), f"{prefix}_{k}") for k, v in values.items()
    ]


def _bn(name: str, x: str, y: str, **attrs: float) -> onnx.NodeProto:
    inputs = [x] + [f"{name}_{k}" for k in ("gamma", "beta", "mean", "var")]
    return helper.make_node("BatchNormalization", inputs, [y], name=name, **attrs)


def _check_graph_cnn(path: Path, equations: int) -> None:
    """Every BatchNormalization of a graph CNN folded; the same vectors on real equations."""
    model = onnx.load(str(path))
    batch_norms = [n.op_type for n in model.graph.node].count("BatchNormalization")
    folded, count = fold_batch_norm(model)
    assert batch_norms > 0 and count == batch_norms
    feeds = pack_graphs(list(real_graphs()[:equations])).feeds()
    (before,) = _run(model, feeds)
    (after,) = _run(folded, feeds)
    assert before.shape == after.shape == (equations, before.shape[1])
    assert float(np.abs(after - before).max()) < 1e-5


def _graph_model() -> onnx.ModelProto:
    """A 2-D (nodes x channels) and a 4-D (NCHW) normalisation, each after a Relu."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Relu", ["x"], ["xr"]),
        _bn("bn2d", "xr", "y", epsilon=1e-5),
        helper.make_node("Relu", ["img"], ["imgr"]),
        _bn("bn4d", "imgr", "z", epsilon=1e-3),
    ]
    graph = helper.make_graph(
        nodes,
        "bn",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6]),
            helper.make_tensor_value_info("img", TensorProto.FLOAT, ["B", 3, 4, 5]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["B", 3, 4, 5]),
        ],
        initializer=_stats(rng, 6, "bn2d") + _stats(rng, 3, "bn4d"),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_affine_form_matches_the_formula() -> None:
    x = np.array([[0.5, -2.0], [3.0, 1.0]])
    gamma, beta = np.array([2.0, 0.5]), np.array([0.1, -1.0])
    mean, var, eps = np.array([1.0, -1.0]), np.array([4.0, 0.25]), 1e-5
    scale, shift = affine_from_batch_norm(gamma, beta, mean, var, eps)
    expected = (x - mean) / np.sqrt(var + eps) * gamma + beta
    np.testing.assert_allclose(x * scale + shift, expected, rtol=1e-12)


def test_folded_graph_has_no_batch_norm_and_the_same_outputs() -> None:
    model = _graph_model()
    folded, count = fold_batch_norm(model)
    assert count == 2
    assert [n.op_type for n in folded.graph.node].count("BatchNormalization") == 0
    assert [n.op_type for n in model.graph.node].count("BatchNormalization") == 2  # not in place
    onnx.checker.check_model(folded)
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.normal(0, 3, (50, 6)).astype(np.float32),
        "img": rng.normal(0, 3, (2, 3, 4, 5)).astype(np.float32),
    }
    for before, after in zip(_run(model, feeds), _run(folded, feeds), strict=True):
        assert before.shape == after.shape
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)


def test_nodes_that_cannot_be_folded_are_kept() -> None:
    model = _graph_model()
    # statistics fed at run time (not constants) and a training-mode node stay BatchNormalization
    stat = model.graph.initializer[0]
    model.graph.input.append(helper.make_tensor_value_info(stat.name, TensorProto.FLOAT, [6]))
    model.graph.initializer.remove(stat)
    model.graph.node[3].attribute.append(helper.make_attribute("training_mode", 1))
    folded, count = fold_batch_norm(model)
    assert count == 0
    assert [n.op_type for n in folded.graph.node].count("BatchNormalization") == 2


def test_statistics_from_constant_and_identity_nodes_are_folded() -> None:
    """The TorchScript exporter shares equal parameters (a fresh network's ones and zeros)
    through Identity nodes, and may emit Constant nodes: both count as constants."""
    model = _graph_model()
    graph = model.graph
    gamma = next(i for i in graph.initializer if i.name == "bn2d_gamma")
    mean = next(i for i in graph.initializer if i.name == "bn2d_mean")
    graph.initializer.remove(mean)
    constant = helper.make_node("Constant", [], ["bn2d_mean"], value=mean)
    identity = helper.make_node("Identity", [gamma.name], ["gamma_copy"])
    graph.node[1].input[1] = "gamma_copy"
    graph.node.insert(0, identity)
    graph.node.insert(0, constant)
    folded, count = fold_batch_norm(model)
    assert count == 2
    feeds = {
        "x": np.linspace(-3, 3, 60, dtype=np.float32).reshape(10, 6),
        "img": np.linspace(-2, 2, 120, dtype=np.float32).reshape(2, 3, 4, 5),
    }
    for before, after in zip(_run(model, feeds), _run(folded, feeds), strict=True):
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)


def test_a_freshly_exported_network_is_folded(tmp_path: Path) -> None:
    """What `bench embed` exports: an untrained 3 x 512 network, equal parameters shared."""
    torch = pytest.importorskip("torch")
    from mathsearch.encoders.gcn import GCNConfig, GraphCNN
    from mathsearch.export.gcn_onnx import export_gcn

    torch.manual_seed(0)
    _check_graph_cnn(export_gcn(GraphCNN(GCNConfig()).eval(), tmp_path / "fresh.onnx"), 100)


@pytest.mark.parametrize("name", ["gcn-v7", "gcn-v8", "gcn-v9"])
def test_shipped_models_embed_the_same_after_folding(name: str) -> None:
    _check_graph_cnn(MODELS / f"{name}.onnx", 300)


def test_cuda_sessions_load_the_folded_model(tmp_path: Path) -> None:
    path = tmp_path / "bn.onnx"
    onnx.save(_graph_model(), str(path))
    assert session_source(path, [CPU]) == str(path)
    source = session_source(path, [CUDA, CPU])
    assert isinstance(source, bytes)
    ops = [n.op_type for n in onnx.load_from_string(source).graph.node]
    assert "BatchNormalization" not in ops and ops.count("Mul") == 2
    plain = tmp_path / "plain.onnx"  # nothing to rewrite: the file itself
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(plain))
    assert session_source(plain, [CUDA, CPU]) == str(plain)
