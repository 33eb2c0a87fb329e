"""torch -> ONNX export with parity checks, model cards, and the torch-free runtime.

The runtime names (:class:`Encoder`, :func:`pack_graphs`, :class:`ModelCard`, the providers and
settings) import no torch. The export side (:func:`export_gcn`, :func:`check_parity`,
:func:`export_checkpoint`) needs the ``train`` extra and is loaded on first use.
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports
from mathsearch.export.batch_norm_folding import fold_batch_norm
from mathsearch.export.embedders import (
    FAMILIES,
    Embedder,
    EmbedRefusal,
    GcnEmbedder,
    as_embedder,
    default_model_path,
    load_embedder,
    one_field_each,
    parse_encoders,
)
from mathsearch.export.errors import (
    ExportError,
    ModelCardError,
    ModelMismatchError,
    ParityError,
    RuntimeInputError,
)
from mathsearch.export.graph_batch import INPUT_NAMES, PackedGraphs, pack_graphs
from mathsearch.export.model_card import ModelCard, card_path, load_card
from mathsearch.export.providers import cuda_usable, select_providers
from mathsearch.export.runtime import Encoder, session_source
from mathsearch.export.settings import DEFAULT_MODEL_PATH, ExportSettings

_LAZY = {
    "GCNOnnxModule": "mathsearch.export.gcn_onnx",
    "GCNEnsembleOnnxModule": "mathsearch.export.gcn_onnx",
    "export_gcn": "mathsearch.export.gcn_onnx",
    "check_parity": "mathsearch.export.parity",
    "ParityReport": "mathsearch.export.parity",
    "export_checkpoint": "mathsearch.export.export_model",
    "Seq2SeqEmbedder": "mathsearch.export.seq2seq_runtime",
    "export_seq2seq": "mathsearch.export.seq2seq_onnx",
    "FigureEmbedder": "mathsearch.export.figure_runtime",
    "export_figure_checkpoint": "mathsearch.export.figure_onnx",
    "BitmapEmbedder": "mathsearch.export.bitmap_runtime",
    "export_bitmap_checkpoint": "mathsearch.export.bitmap_onnx",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [  # noqa: PLE0604
    "DEFAULT_MODEL_PATH",
    "FAMILIES",
    "EmbedRefusal",
    "Embedder",
    "GcnEmbedder",
    "as_embedder",
    "default_model_path",
    "load_embedder",
    "one_field_each",
    "parse_encoders",
    "INPUT_NAMES",
    "Encoder",
    "ExportError",
    "ExportSettings",
    "ModelCard",
    "ModelCardError",
    "ModelMismatchError",
    "PackedGraphs",
    "ParityError",
    "RuntimeInputError",
    "card_path",
    "cuda_usable",
    "fold_batch_norm",
    "load_card",
    "pack_graphs",
    "select_providers",
    "session_source",
    *sorted(_LAZY),
]
