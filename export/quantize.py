"""An int8 variant of an exported model: row-scaled dynamic quantisation of its matrix products.

Every ``MatMul`` ``Y = X W`` whose weight ``W`` (K x M) is a constant with ``K >= min_inner``
becomes (:func:`row_scaled_int8`)::

    r_i   = max(max_k |X_ik|, 1e-30)                   (each row's largest magnitude)
    s_j   = max(max_k |W_kj|, 1e-30) / 63               (each output column's weight scale)
    W_q   = round(W / s)            int8 in [-63, 63] (7 bits), per column
    X_q   = QuantizeLinear(X / r, 2 / 255, 128)         uint8, the same grid for every row
    Y    ~= r * (2 / 255) * s * MatMulInteger(X_q - 128, W_q)

``MatMulInteger`` multiplies in integers (AVX-512 VNNI / AMX where the CPU has them), exactly.
Dividing each row by its largest magnitude first puts every row in [-1, 1], so one fixed uint8
grid fits every row: a row is quantised in steps of ``2 r_i / 255`` of its own size rather than
of the batch's largest row, and - the grid being fixed, not taken from each call's range as
ONNX Runtime's ``DynamicQuantizeMatMul`` (what ``quantize_dynamic`` writes) takes it - a row's
result does not depend on the other rows of its call. The graph CNN needs the row scaling: its
sum aggregation gives a node with 60 in-edges states
tens of times larger than a leaf's, and ``quantize_dynamic`` alone (one scale for the whole
batch) kept a mean cosine of only 0.54 to the float32 vectors of gcn-v9 (docs/export.md, "int8").
The row scaling is exact (``(X / r) W * r = X W``); only the integer product rounds.

The weights use 7 of the 8 bits (``WEIGHT_LEVELS = 63``, what ``quantize_dynamic(...,
reduce_range=True)`` does) because the file must give the same vectors on every x86 CPU. On a CPU
without VNNI (AVX2 only) ONNX Runtime's uint8 x int8 kernel adds each pair of products into a
saturating int16 (``vpmaddubsw``): with full-range weights a pair reaches ``2 * 255 * 127 =
64,770`` and is cut to 32,767. On an AMD EPYC with AVX2 alone, 127-level weights left gcn-v7's
test variant a smallest cosine of 0.59 to float32 (docs/export.md, "int8"); with 63 levels a pair
is at most ``2 * 255 * 63 = 32,130`` and nothing saturates. VNNI and AMX kernels add in int32
and run the same instructions on 7-bit weights; on a Zen 4 EPYC with AVX-512 VNNI the 7-bit files
gave the AVX2 machine's vectors (the same cosines to float32 to five decimals) and embedded
1.26-1.80x as fast as float32 at 32 equations a call (docs/export.md, "int8").

Everything else (the lookups, the segment sums, the normalisations) stays float32. The variant
gets its own card (``precision: int8``, vector field ``vec_<family>_v<version>_int8``, since
its vectors are not interchangeable with the float32 model's) with its distance to the float32
model on real equations. Whether it is good enough is a retrieval question: compare both with
``mathsearch eval ranking --onnx MODEL.onnx --onnx MODEL.int8.onnx``.

Example::

    card, diff = quantize_int8("gcn-v9.onnx", graphs)       # writes gcn-v9.int8.onnx + card
    model, count = row_scaled_int8(onnx.load("gcn-v9.onnx"))  # the graph transform alone
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mathsearch.core.machine import INT8_DOT_FLAGS, cpu_flags
from mathsearch.export.errors import ExportError
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.runtime.gcn_session import GcnSession
from mathsearch.runtime.model_card import ModelCard, beside, file_sha256, load_card
from mathsearch.runtime.settings import RuntimeSettings

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

__all__ = [
    "MIN_INNER",
    "WEIGHT_LEVELS",
    "int8_dot_instructions",
    "int8_path",
    "quantize_int8",
    "quantize_weight",
    "row_scaled_int8",
    "variant_metrics",
]

#: Products whose weight has fewer rows than this stay float32 (see :func:`row_scaled_int8`).
MIN_INNER = 256

#: Largest magnitude of a quantised weight: 7 bits, so that a pair of uint8 x int8 products,
#: ``2 * 255 * WEIGHT_LEVELS``, fits the int16 that AVX2 kernels add it into (module docstring).
WEIGHT_LEVELS = 63

#: The fixed quantisation of a row-scaled input (every value in [-1, 1]): uint8 steps of 2 / 255
#: around the zero point 128. Fixed rather than dynamic (one range per call, as ONNX Runtime's
#: ``DynamicQuantizeMatMul`` takes it) so that a row's product never depends on the other rows
#: of its call: an equation gets the same vector alone, at query time, as in a worker's batch.
ROW_SCALE = np.float32(2.0 / 255.0)
ROW_ZERO = 128

_TINY = np.float32(1e-30)


def int8_path(model_path: str | os.PathLike[str]) -> Path:
    """``MODEL.onnx`` -> ``MODEL.int8.onnx``."""
    return beside(model_path, ".int8.onnx")


def int8_dot_instructions(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU has int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI or AMX), read
    from the ``flags`` of ``cpuinfo``; ``None`` where that file cannot be read (not Linux).

    Without them ONNX Runtime's integer product is about as fast as float32, so an int8 variant
    buys little on that CPU (1.04-1.09x on an AVX2 EPYC, docs/export.md, "int8").
    """
    flags = cpu_flags(cpuinfo)
    return None if flags is None else bool(flags & INT8_DOT_FLAGS)


def quantize_weight(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(W_q, s)`` of a (K, M) float weight: int8 ``round(W / s)`` in ``[-63, 63]`` and the
    float32 column scales ``s_j = max_k |W_kj| / 63`` (:data:`WEIGHT_LEVELS`, module
    docstring), so that ``W ~= W_q * s``.

    Example::

        >>> q, s = quantize_weight(np.array([[1.0, -0.5], [0.6, 0.2]]))
        >>> q.tolist(), [round(float(x), 5) for x in s]
        ([[63, -63], [38, 25]], [0.01587, 0.00794])
    """
    w = np.asarray(weight, dtype=np.float32)
    levels = np.float32(WEIGHT_LEVELS)
    scale = (np.maximum(np.abs(w).max(axis=0), _TINY) / levels).astype(np.float32)
    return np.clip(np.round(w / scale), -levels, levels).astype(np.int8), scale


def row_scaled_int8(
    model: onnx.ModelProto, *, min_inner: int = MIN_INNER
) -> tuple[onnx.ModelProto, int]:
    """A copy of ``model`` with every ``MatMul`` by a constant (K x M) weight, ``K >=
    min_inner``, replaced by its row-scaled int8 form (module docstring), and how many were.

    The weight may be an initializer or reached through ``Identity`` nodes (the exporter merges
    equal tensors that way). Products of two computed tensors, ``Gemm`` nodes and narrow products
    stay float32: below ``K = 256`` the two extra passes over the rows cost more than the integer
    product saves (gcn-v7's 128-wide towers embedded at 0.92-0.93x of float32 with every product
    quantised; gcn-v9's 512-wide ones at 1.12-1.34x,
    docs/research/2026-12-06-embedding-runtime-record.md).

    Raises:
        ExportError: nothing in the graph can be quantised.
    """
    import onnx
    from onnx import helper, numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    weights = {init.name: init for init in graph.initializer}
    aliases = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Identity"}
    eps, axes = "rowq/eps", "rowq/axes"
    x_scale, x_zero = "rowq/x_scale", "rowq/x_zero"
    added = [
        numpy_helper.from_array(np.array(_TINY, dtype=np.float32), eps),
        numpy_helper.from_array(np.array(ROW_SCALE, dtype=np.float32), x_scale),
        numpy_helper.from_array(np.array(ROW_ZERO, dtype=np.uint8), x_zero),
    ]
    opset = next((op.version for op in out.opset_import if op.domain in ("", "ai.onnx")), 17)
    if opset >= 18:  # ReduceMax's axes became an input in opset 18
        added.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), axes))
    nodes: list[onnx.NodeProto] = []
    count = 0
    for node in graph.node:
        name = node.input[1] if node.op_type == "MatMul" else ""
        while name in aliases:
            name = aliases[name]
        init = weights.get(name)
        if init is None or len(init.dims) != 2 or init.dims[0] < min_inner:
            nodes.append(node)
            continue
        q, scale = quantize_weight(numpy_helper.to_array(init))
        p = f"rowq{count}/"
        added += [
            numpy_helper.from_array(q, p + "w_q"),
            numpy_helper.from_array((scale * ROW_SCALE).astype(np.float32), p + "s"),
        ]
        x, y = node.input[0], node.output[0]
        nodes += [
            helper.make_node("Abs", [x], [p + "abs"]),
            _row_max(p + "abs", p + "max", opset, axes),
            helper.make_node("Max", [p + "max", eps], [p + "r"]),
            helper.make_node("Div", [x, p + "r"], [p + "x_r"]),
            helper.make_node("QuantizeLinear", [p + "x_r", x_scale, x_zero], [p + "x_q"]),
            helper.make_node("MatMulInteger", [p + "x_q", p + "w_q", x_zero], [p + "y_q"]),
            helper.make_node("Cast", [p + "y_q"], [p + "y_i"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [p + "y_i", p + "s"], [p + "y_r"]),
            helper.make_node("Mul", [p + "y_r", p + "r"], [y]),
        ]
        count += 1
    if count == 0:
        raise ExportError(
            f"nothing to quantise: no MatMul by a constant weight of >= {min_inner} rows (an int8 "
            "variant pays off for 512-wide towers, not for narrow ones)"
        )
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    _drop_unused(out)  # the float weights only the replaced products read
    return out, count


def _row_max(x: str, y: str, opset: int, axes: str) -> onnx.NodeProto:
    """``y = max over the last axis of x``, keeping it, in the model's opset."""
    from onnx import helper

    if opset >= 18:
        return helper.make_node("ReduceMax", [x, axes], [y], keepdims=1)
    return helper.make_node("ReduceMax", [x], [y], axes=[-1], keepdims=1)


def _drop_unused(model: onnx.ModelProto) -> None:
    """Remove initializers and ``Identity`` nodes that nothing reads any more."""
    graph = model.graph
    while True:
        read = {name for node in graph.node for name in node.input}
        read |= {o.name for o in graph.output}
        dead = [n for n in graph.node if n.op_type == "Identity" and n.output[0] not in read]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    read = {name for node in graph.node for name in node.input}
    keep = [init for init in graph.initializer if init.name in read]
    del graph.initializer[:]
    graph.initializer.extend(keep)


def variant_metrics(metrics: dict | None, variant: str) -> dict:
    """The int8 variant's card metrics: ``metrics`` (an ``eval ranking --onnx`` report under
    ``eval``), with ``holdout_ranking`` and its width taken from the report's score of the
    variant file itself (``onnx:<variant>``), never from the float model's.

    >>> report = {"eval": {"triplets": 10, "scores": {"onnx:m.int8.onnx": {"ranking_score": 0.8,
    ...           "bound_95": 0.3}, "onnx:m.onnx": {"ranking_score": 0.81}}}}
    >>> variant_metrics(report, "m.int8.onnx")["holdout_ranking"]
    0.8
    >>> variant_metrics(None, "m.int8.onnx")
    {}
    """
    out = dict(metrics or {})
    evaluation = out.get("eval") or {}
    own = (evaluation.get("scores") or {}).get(f"onnx:{variant}") or {}
    if own.get("ranking_score") is not None:
        out["holdout_ranking"] = own["ranking_score"]
        out["holdout_bound_95"] = own.get("bound_95")
        out["holdout_ranking_triplets"] = evaluation.get("triplets")
    return out


def quantize_int8(
    model_path: str | os.PathLike[str],
    graphs: Sequence[EquationGraph],
    out: str | os.PathLike[str] | None = None,
    metrics: dict | None = None,
    *,
    min_inner: int = MIN_INNER,
) -> tuple[ModelCard, float]:
    """Write the int8 variant of ``model_path`` and its card; returns them with the largest
    absolute difference to the float32 model over ``graphs``. ``metrics`` (e.g. the report of
    ``eval ranking --onnx``, which scores both) goes into the variant's card; the card's parity
    also records the mean and smallest cosine between the two models' vectors.

    Raises:
        ExportError: nothing to quantise, or the result does not load.
    """
    import onnx

    model_path = Path(model_path)
    out = Path(out) if out is not None else int8_path(model_path)
    card = load_card(model_path)
    quantised_model, count = row_scaled_int8(onnx.load(model_path), min_inner=min_inner)
    try:
        onnx.checker.check_model(quantised_model)
    except onnx.checker.ValidationError as exc:
        raise ExportError(f"the int8 graph of {model_path} is not valid ONNX: {exc}") from exc
    onnx.save(quantised_model, out)
    variant = replace(
        card,
        name=f"{card.name}-int8",
        precision="int8",
        ir_version=quantised_model.ir_version,
        sha256=file_sha256(out),
        metrics=variant_metrics(metrics, out.name),
        parity={},
    )
    variant.write(out)
    settings = RuntimeSettings(max_graphs=256)
    reference = GcnSession(model_path, vocab_hash=card.vocab_hash, device="cpu", settings=settings)
    try:
        quantised = GcnSession(out, vocab_hash=card.vocab_hash, device="cpu", settings=settings)
        vectors = quantised.encode(graphs)
    except Exception as exc:  # ONNX Runtime raises its own kinds
        raise ExportError(f"the int8 variant {out} does not run: {exc}") from exc
    expected = reference.encode(graphs)
    diff = float(np.abs(expected - vectors).max())
    norms = np.linalg.norm(expected, axis=1) * np.linalg.norm(vectors, axis=1)
    cosines = (expected * vectors).sum(axis=1) / np.maximum(norms, 1e-12)
    variant.parity = {
        "reference": model_path.name,
        "scheme": "row-scaled dynamic int8, 7-bit weights",
        "products": count,
        "equations": len(graphs),
        "max_abs_diff": diff,
        "mean_cosine": float(cosines.mean()),
        "min_cosine": float(cosines.min()),
        "note": "int8 is judged by retrieval metrics (eval ranking), not by this distance",
    }
    variant.write(out)
    logger.info(
        "int8 variant %s: %d products, max |int8 - float32| %.3g, mean cosine %.5f (%d eqs)",
        out, count, diff, cosines.mean(), len(graphs),
    )  # fmt: skip
    return variant, diff
