"""Choose ONNX Runtime execution providers that really load on this machine.

``onnxruntime-gpu`` lists ``CUDAExecutionProvider`` as available even where no GPU or CUDA
runtime exists; asking for it there prints a page of errors and silently falls back. We only ask
for CUDA after the driver library loads and a one-node probe session really got CUDA, with ORT's
own logging silenced during the probe, so CPU machines see no error spam.
"""

from __future__ import annotations

import ctypes
import functools
import logging

logger = logging.getLogger(__name__)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


def _driver_loads() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def _probe_model() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@functools.cache
def cuda_usable() -> bool:
    """True only when a CUDA session really starts (cached per process)."""
    import onnxruntime as ort

    if CUDA not in ort.get_available_providers() or not _driver_loads():
        return False
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        if hasattr(ort, "preload_dlls"):
            ort.preload_dlls()
        session = ort.InferenceSession(_probe_model(), options, providers=[CUDA, CPU])
    except Exception as exc:
        logger.info("CUDA execution provider does not load (%s); using CPU", exc)
        return False
    return CUDA in session.get_providers()


def select_providers(prefer_gpu: bool = True) -> list[str]:
    """Providers to pass to ``InferenceSession``: CUDA first when it really works, then CPU."""
    if prefer_gpu and cuda_usable():
        return [CUDA, CPU]
    return [CPU]
