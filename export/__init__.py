"""torch -> ONNX export with parity checks: every family's exporter, the checkpoint dispatch and
the quantiser. It writes the shipped models (``export/models``) that :mod:`mathsearch.runtime`
serves.

The export side (:func:`export_gcn`, :func:`check_parity`, :func:`export_checkpoint`) needs the
``train`` extra and is loaded on first use. The runtime's names (:func:`load_embedder`,
:class:`GcnSession` - formerly ``Encoder`` -, :class:`ModelCard`, ...) moved to
:mod:`mathsearch.runtime`; they stay importable from here for one release.
"""

from __future__ import annotations

from typing import Any

from mathsearch.core.lazy import lazy_exports
from mathsearch.export.errors import ExportError, ParityError

_LAZY = {
    "GCNOnnxModule": "mathsearch.export.gcn_onnx",
    "GCNEnsembleOnnxModule": "mathsearch.export.gcn_onnx",
    "export_gcn": "mathsearch.export.gcn_onnx",
    "check_parity": "mathsearch.export.parity",
    "ParityReport": "mathsearch.export.parity",
    "export_checkpoint": "mathsearch.export.export_model",
    "export_seq2seq": "mathsearch.export.seq2seq_onnx",
    "export_figure_checkpoint": "mathsearch.export.figure_onnx",
    "export_bitmap_checkpoint": "mathsearch.export.bitmap_onnx",
}
#: Former names of the runtime's classes here (``mathsearch.export.Encoder`` ...).
_RENAMED = {"Encoder": "GcnSession", "ExportSettings": "RuntimeSettings"}
_exporters = lazy_exports(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """The exporters, loaded on first use; and, for one release, the runtime's names that moved
    to :mod:`mathsearch.runtime` (``load_embedder``, ``GcnSession`` as ``Encoder``, ...)."""
    if name in _LAZY:
        return _exporters(name)
    from mathsearch import runtime

    moved = _RENAMED.get(name, name)
    if moved in runtime.__all__:
        return getattr(runtime, moved)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ExportError", "ParityError", *sorted(_LAZY)]  # noqa: PLE0604
