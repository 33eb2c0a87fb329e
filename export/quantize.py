"""An int8 variant of an exported model: dynamic quantisation of its matrix products.

``onnxruntime.quantization.quantize_dynamic`` stores the weights of every ``MatMul`` as int8 and
quantises the activations per call (``DynamicQuantizeMatMul``); everything else (the lookups,
the segment sums, the normalisations) stays float32. The variant gets its own card
(``precision: int8``, vector field ``vec_<family>_v<version>_int8``, since its vectors are not
interchangeable with the float32 model's) with its distance to the float32 model on real
equations. Whether it is good enough is a retrieval question: compare both with
``mathsearch eval ranking --onnx MODEL.onnx --onnx MODEL.int8.onnx``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from mathsearch.export.errors import ExportError
from mathsearch.export.model_card import ModelCard, beside, file_sha256, load_card
from mathsearch.export.runtime import Encoder
from mathsearch.export.settings import ExportSettings
from mathsearch.indexer.mathml_graph import EquationGraph

logger = logging.getLogger(__name__)

__all__ = ["int8_path", "quantize_int8"]


def int8_path(model_path: str | os.PathLike[str]) -> Path:
    """``MODEL.onnx`` -> ``MODEL.int8.onnx``."""
    return beside(model_path, ".int8.onnx")


def quantize_int8(
    model_path: str | os.PathLike[str],
    graphs: Sequence[EquationGraph],
    out: str | os.PathLike[str] | None = None,
    metrics: dict | None = None,
) -> tuple[ModelCard, float]:
    """Write the int8 variant of ``model_path`` and its card; returns them with the largest
    absolute difference to the float32 model over ``graphs``. ``metrics`` (e.g. the report of
    ``eval ranking --onnx``, which scores both) goes into the variant's card.

    Raises:
        ExportError: the quantiser failed or the result does not load.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model_path = Path(model_path)
    out = Path(out) if out is not None else int8_path(model_path)
    card = load_card(model_path)
    try:
        quantize_dynamic(
            model_path, out, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"]
        )
    except Exception as exc:  # the quantiser raises many kinds
        raise ExportError(f"int8 quantisation of {model_path} failed: {exc}") from exc
    import onnx

    ir_version = onnx.load(out, load_external_data=False).ir_version
    variant = replace(
        card,
        name=f"{card.name}-int8",
        precision="int8",
        ir_version=ir_version,
        sha256=file_sha256(out),
        metrics=dict(metrics or {}),
        parity={},
    )
    variant.write(out)
    settings = ExportSettings(max_graphs=256)
    reference = Encoder(model_path, vocab_hash=card.vocab_hash, device="cpu", settings=settings)
    quantised = Encoder(out, vocab_hash=card.vocab_hash, device="cpu", settings=settings)
    diff = float(np.abs(reference.encode(graphs) - quantised.encode(graphs)).max())
    variant.parity = {
        "reference": model_path.name,
        "equations": len(graphs),
        "max_abs_diff": diff,
        "note": "int8 is judged by retrieval metrics (eval ranking), not by this distance",
    }
    variant.write(out)
    logger.info("int8 variant %s: max |int8 - float32| %.3g (%d eqs)", out, diff, len(graphs))
    return variant, diff
