"""One way to turn a torch module into a checked ``.onnx`` file, for every encoder family.

:func:`write_onnx` runs the TorchScript exporter at :data:`OPSET` with dynamic axes, pins the IR
version to :data:`IR_VERSION` (what the ONNX Runtime builds we support read), stores string
metadata, runs the ONNX checker and writes the file atomically (``.tmp`` + rename). The family
exporters (:mod:`mathsearch.export.gcn_onnx`, :mod:`mathsearch.export.bitmap_onnx`,
:mod:`mathsearch.export.seq2seq_onnx`,
:mod:`mathsearch.export.figure_onnx`) only build the module, its example inputs and its names.
"""

from __future__ import annotations

import io
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from mathsearch.export.errors import ExportError

logger = logging.getLogger(__name__)

__all__ = ["IR_VERSION", "OPSET", "software_versions", "write_onnx"]

#: ONNX opset of the default domain of every exported model.
OPSET = 17
#: IR version written into every exported model (onnxruntime 1.31 accepts up to 11).
IR_VERSION = 8


def write_onnx(
    module: Any,
    example: tuple[Any, ...],
    path: str | os.PathLike[str],
    *,
    input_names: Sequence[str],
    output_name: str,
    dynamic_axes: Mapping[str, Mapping[int, str]],
    what: str,
    metadata: Mapping[str, object] | None = None,
) -> Path:
    """Export ``module`` (already a CPU eval-mode copy) called on ``example`` to ``path``.

    Raises:
        ExportError: the exporter or the ONNX checker failed (``what`` names the model).
    """
    import onnx
    import torch

    path = Path(path)
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
            torch.onnx.export(
                module,
                example,
                buffer,  # type: ignore[arg-type]  # the TorchScript exporter writes file-likes too
                dynamo=False,
                opset_version=OPSET,
                input_names=list(input_names),
                output_names=[output_name],
                dynamic_axes={k: dict(v) for k, v in dynamic_axes.items()},
                do_constant_folding=True,
            )
        proto = onnx.load_from_string(buffer.getvalue())
        proto.ir_version = IR_VERSION
        for key, value in (metadata or {}).items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, str(value)
        onnx.checker.check_model(proto)
    except Exception as exc:  # the exporter raises many kinds
        raise ExportError(f"ONNX export of the {what} failed: {exc}") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(proto.SerializeToString())
    tmp.replace(path)
    logger.info("exported the %s to %s (%d bytes)", what, path, path.stat().st_size)
    return path


def software_versions() -> dict[str, str]:
    """The installed versions of what an export depends on (a model card's ``software``)."""
    versions = {}
    for name in ("torch", "onnx", "onnxruntime-gpu", "onnxruntime", "mathsearch"):
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions
