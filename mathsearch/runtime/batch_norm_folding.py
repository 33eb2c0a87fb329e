"""Rewrite inference-mode ``BatchNormalization`` nodes of an ONNX graph as ``Mul`` and ``Add``.

ONNX Runtime's CUDA provider runs ``BatchNormalization`` through cuDNN. On an NVIDIA H200 with
onnxruntime-gpu 1.31.1 (CUDA 13, cuDNN 9) cuDNN refused the graph CNN's normalisation of its
(nodes x channels) states: ``CUDNN failure 3000: CUDNN_STATUS_NOT_SUPPORTED`` on the first
batch, for gcn-v7 and gcn-v8 alike, so a GPU worker could not embed a single equation. In
inference mode (``training_mode`` 0) the operator is a fixed affine map per channel ``c``::

    y = (x - mean_c) / sqrt(var_c + eps) * gamma_c + beta_c  =  x * s_c + t_c
    s_c = gamma_c / sqrt(var_c + eps),    t_c = beta_c - mean_c * s_c

so one ``Mul`` and one ``Add`` with ``s`` and ``t`` precomputed (in float64, stored in the
initializers' type) give the same values on every provider, without cuDNN. The channel axis is
axis 1, so for inputs of rank ``r > 2`` the constants are shaped ``(C, 1, ..., 1)`` to broadcast
over the trailing axes. A node whose input rank is unknown, whose statistics are not constants
(initializers, ``Constant`` outputs or ``Identity`` copies of them) or that runs in training
mode is left as it is.

Example::

    model = onnx.load("export/models/gcn-v7.onnx")
    folded, count = fold_batch_norm(model)      # count == 3, no BatchNormalization left
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

__all__ = ["affine_from_batch_norm", "fold_batch_norm"]


def affine_from_batch_norm(
    gamma: np.ndarray,
    beta: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    epsilon: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The per-channel scale ``s`` and shift ``t`` with ``BatchNorm(x) = x * s + t``.

    Args:
        gamma, beta, mean, var: the operator's (C,) scale, bias, running mean and variance.
        epsilon: its ``epsilon`` attribute.

    Returns:
        ``(s, t)``, each (C,), in ``gamma``'s dtype (computed in float64).
    """
    g, b, m, v = (np.asarray(a, dtype=np.float64) for a in (gamma, beta, mean, var))
    scale = g / np.sqrt(v + float(epsilon))
    shift = b - m * scale
    dtype = np.asarray(gamma).dtype
    return scale.astype(dtype), shift.astype(dtype)


def _input_ranks(model: onnx.ModelProto) -> dict[str, int]:
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:  # inference is best effort: a node of unknown rank is kept
        logger.info("shape inference failed (%s): BatchNormalization nodes are kept", exc)
        return {}
    graph = inferred.graph
    ranks: dict[str, int] = {}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        tensor = info.type.tensor_type
        if tensor.HasField("shape"):
            ranks[info.name] = len(tensor.shape.dim)
    return ranks


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Values known before the run: initializers, ``Constant`` outputs and ``Identity`` copies of
    either (the TorchScript exporter shares equal parameters through ``Identity`` nodes)."""
    from onnx import helper, numpy_helper

    values = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:  # topological order: an Identity's input is known before it
        if node.op_type == "Constant" and len(node.output) == 1:
            attrs = {a.name: a for a in node.attribute}
            if "value" in attrs:
                values[node.output[0]] = numpy_helper.to_array(
                    helper.get_attribute_value(attrs["value"])
                )
        elif node.op_type == "Identity" and node.input and node.input[0] in values:
            values[node.output[0]] = values[node.input[0]]
    return values


def fold_batch_norm(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """A copy of ``model`` whose inference-mode ``BatchNormalization`` nodes of the main graph
    are ``Mul`` + ``Add`` (see the module docstring); ``model`` itself is not changed.

    Returns:
        ``(new model, number of nodes replaced)``; ``(model, 0)``, no copy, for a graph without
        BatchNormalization.
    """
    import onnx
    from onnx import helper, numpy_helper

    if not any(node.op_type == "BatchNormalization" for node in model.graph.node):
        return model, 0
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    graph = folded.graph
    constants = _constants(graph)
    ranks = _input_ranks(folded)
    nodes: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = []
    count = 0
    for node in graph.node:
        if node.op_type != "BatchNormalization":
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        rank = ranks.get(node.input[0]) if node.input else None
        foldable = (
            node.domain in ("", "ai.onnx")
            and len(node.input) == 5
            and len(node.output) == 1
            and not attrs.get("training_mode", 0)
            and all(name in constants for name in node.input[1:])
            and rank is not None
            and rank >= 2
        )
        if not foldable or rank is None:  # (foldable implies a known rank)
            nodes.append(node)
            continue
        gamma, beta, mean, var = (constants[name] for name in node.input[1:])
        scale, shift = affine_from_batch_norm(gamma, beta, mean, var, attrs.get("epsilon", 1e-5))
        shape = (scale.shape[0],) + (1,) * (rank - 2)
        base = f"{node.name or node.output[0]}/folded"
        added.append(numpy_helper.from_array(scale.reshape(shape), f"{base}_scale"))
        added.append(numpy_helper.from_array(shift.reshape(shape), f"{base}_shift"))
        scaled = f"{base}_scaled"
        nodes.append(
            helper.make_node("Mul", [node.input[0], f"{base}_scale"], [scaled], name=f"{base}_mul")
        )
        nodes.append(
            helper.make_node("Add", [scaled, f"{base}_shift"], [node.output[0]], name=f"{base}_add")
        )
        count += 1
    if count:
        del graph.node[:]
        graph.node.extend(nodes)
        graph.initializer.extend(added)  # the statistics stay; ONNX Runtime drops unused ones
    return folded, count
