"""The torch-free runtime: every encoder family's ONNX session behind one interface.

:class:`Embedder` is the interface (``embed(items) -> vectors or refusals``); :func:`load_embedder`
builds a family's runtime from a model card; :class:`GcnSession` is the graph CNN's raw ONNX call
beneath its :class:`GcnEmbedder`. Model cards, graph batching, providers and the runtime
settings live here too. Nothing in this room imports torch: it sits below the training and export
rooms (docs/architecture.md), so the import contract forbids it.
"""

from __future__ import annotations

from mathsearch.core.lazy import lazy_exports
from mathsearch.runtime.batch_norm_folding import fold_batch_norm
from mathsearch.runtime.embedders import (
    FAMILIES,
    Embedder,
    EmbedRefusal,
    GcnEmbedder,
    as_embedder,
    default_model_path,
    load_embedder,
    one_field_each,
    parse_encoders,
    shipped_or_path,
)
from mathsearch.runtime.errors import (
    EmbedError,
    ModelCardError,
    ModelMismatchError,
    RuntimeInputError,
)
from mathsearch.runtime.families import FAMILY_REGISTRY, EncoderFamily
from mathsearch.runtime.gcn_session import GcnSession, session_source
from mathsearch.runtime.graph_batch import INPUT_NAMES, PackedGraphs, pack_graphs
from mathsearch.runtime.model_card import ModelCard, card_path, load_card
from mathsearch.runtime.providers import cuda_usable, select_providers
from mathsearch.runtime.settings import DEFAULT_MODEL_PATH, MODELS_DIR, RuntimeSettings

_LAZY = {
    "Seq2SeqEmbedder": "mathsearch.runtime.seq2seq_runtime",
    "FigureEmbedder": "mathsearch.runtime.figure_runtime",
    "BitmapEmbedder": "mathsearch.runtime.bitmap_runtime",
}

__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [  # noqa: PLE0604
    "DEFAULT_MODEL_PATH",
    "FAMILIES",
    "FAMILY_REGISTRY",
    "INPUT_NAMES",
    "MODELS_DIR",
    "EmbedError",
    "EmbedRefusal",
    "Embedder",
    "EncoderFamily",
    "GcnEmbedder",
    "GcnSession",
    "ModelCard",
    "ModelCardError",
    "ModelMismatchError",
    "PackedGraphs",
    "RuntimeInputError",
    "RuntimeSettings",
    "as_embedder",
    "card_path",
    "cuda_usable",
    "default_model_path",
    "fold_batch_norm",
    "load_card",
    "load_embedder",
    "one_field_each",
    "pack_graphs",
    "parse_encoders",
    "select_providers",
    "session_source",
    "shipped_or_path",
    *sorted(_LAZY),
]
