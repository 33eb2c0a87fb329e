"""The torch-free embedding runtime: :class:`GcnSession` over an ONNX Runtime session.

Loads ``MODEL.onnx`` and its card, refuses a model made for another vocabulary, packs many
equation graphs into one disjoint union (:func:`mathsearch.runtime.graph_batch.pack_graphs`) and
runs
them in
as few session calls as the limits allow. The CUDA execution provider is used when it really
loads on this machine (:func:`mathsearch.runtime.providers.select_providers`), the CPU one
otherwise.
Nothing here imports torch: a worker needs onnxruntime and numpy only.

Example::

    encoder = GcnSession()                     # the shipped default model (MATHSEARCH_MODEL)
    parsed = featuriser.parse_latex(r"\\frac{a}{b}")
    vectors = encoder.encode([parsed.graph])   # float32 (1, encoder.dim)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.runtime.errors import ModelCardError, ModelMismatchError, RuntimeInputError
from mathsearch.runtime.graph_batch import INPUT_NAMES, PackedGraphs, pack_graphs
from mathsearch.runtime.model_card import ModelCard, load_card
from mathsearch.runtime.providers import CPU, CUDA, cuda_usable, select_providers
from mathsearch.runtime.settings import CPU_MAX_GRAPHS, CUDA_MAX_GRAPHS, RuntimeSettings

if TYPE_CHECKING:
    import onnxruntime as ort

logger = logging.getLogger(__name__)

__all__ = ["GcnSession", "open_session", "session_source"]


def open_session(
    path: str | os.PathLike[str], *, device: str = "auto", threads: int = 0
) -> ort.InferenceSession:
    """An ONNX Runtime session of ``path``: all graph optimisations, ``threads`` intra-op
    threads (0: ONNX Runtime's default), quiet logging; providers by ``device``: ``cpu``,
    ``cuda`` (refused where it does not load) or ``auto`` (CUDA only when it really loads).

    Raises:
        RuntimeInputError: ``device="cuda"`` where the CUDA provider does not load.
    """
    import onnxruntime as ort

    if device == "cuda" and not cuda_usable():
        raise RuntimeInputError("device cuda asked for, but the CUDA provider does not load")
    providers = [CPU] if device == "cpu" else select_providers(prefer_gpu=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(session_source(path, providers), options, providers=providers)


def session_source(path: str | os.PathLike[str], providers: Sequence[str]) -> str | bytes:
    """What ``InferenceSession`` loads for ``providers``: the file's path on the CPU; on CUDA the
    model with its BatchNormalization nodes rewritten as Mul + Add
    (:func:`~mathsearch.runtime.batch_norm_folding.fold_batch_norm`: cuDNN refuses the graph CNN's
    two-dimensional normalisation), as bytes, or the path when there is none to rewrite."""
    if not providers or providers[0] != CUDA:
        return str(path)
    import onnx

    from mathsearch.runtime.batch_norm_folding import fold_batch_norm

    folded, count = fold_batch_norm(onnx.load(str(path)))
    if not count:
        return str(path)
    logger.info(
        "%s: %d BatchNormalization node(s) run as Mul + Add on CUDA",
        Path(path).name,
        count,
    )
    return folded.SerializeToString()


class GcnSession:
    """Embeds featurised equations with an exported model.

    Args:
        model: path of ``MODEL.onnx`` (its card ``MODEL.card.json`` beside it); default
            ``settings.model`` (``MATHSEARCH_MODEL``, else the shipped default model).
        vocab_hash: the featuriser's vocabulary hash the model must have been trained with;
            default: the shipped vocabulary's.
        device: ``auto`` (CUDA when it really loads, else CPU), ``cpu`` or ``cuda``.
        threads: ONNX Runtime intra-op threads (0: ONNX Runtime's default).
        settings: limits per session call; default ``RuntimeSettings.from_env()``.

    Raises:
        ModelCardError: no card, or a model file that does not match it.
        ModelMismatchError: the card's vocabulary differs from ``vocab_hash``.
        RuntimeInputError: ``device="cuda"`` where CUDA does not load.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        vocab_hash: str | None = None,
        device: str | None = None,
        threads: int | None = None,
        settings: RuntimeSettings | None = None,
    ) -> None:
        self.settings = settings or RuntimeSettings.from_env()
        self.path = Path(model) if model is not None else self.settings.model
        if not self.path.is_file():
            raise ModelCardError(f"model {self.path} does not exist")
        self.card: ModelCard = load_card(self.path)
        if vocab_hash is None:
            from mathsearch.indexer.vocabulary import default_vocabulary

            vocab_hash = default_vocabulary().content_hash
        if self.card.vocab_hash != vocab_hash:
            raise ModelMismatchError(
                f"model {self.path.name} was trained on vocabulary {self.card.vocab_hash[:12]}, "
                f"the featuriser uses {vocab_hash[:12]}: re-export a model trained on this "
                "vocabulary, or featurise with the model's vocabulary"
            )
        self.session = open_session(
            self.path,
            device=device or self.settings.device,
            threads=self.settings.threads if threads is None else threads,
        )
        names = tuple(i.name for i in self.session.get_inputs())
        if names != INPUT_NAMES:
            raise ModelMismatchError(f"model inputs {names} are not the graph CNN's {INPUT_NAMES}")
        self.output_name = self.session.get_outputs()[0].name
        #: equations per session call (the settings' limit, else the provider's default)
        self.max_graphs = self.settings.max_graphs or (
            CUDA_MAX_GRAPHS if self.on_gpu else CPU_MAX_GRAPHS
        )
        if self.card.precision == "int8":
            # one equation a call: the integer products round on a fixed grid, so the last bits
            # of the float products before them, which move with the other rows of a call, would
            # move a vector by up to ~1e-3 with its batch mates. Alone, an equation gets the same
            # vector in a worker's batch, at query time and in a re-index (export/quantize.py);
            # a seed-size int8 tower embeds about as fast one at a time as 32 at a time.
            self.max_graphs = 1
        logger.info(
            "loaded %s (%s, %d-d, %s) on %s",
            self.path.name,
            self.card.family,
            self.card.embedding_dim,
            self.card.similarity,
            ", ".join(self.session.get_providers()),
        )

    @property
    def dim(self) -> int:
        return int(self.card.embedding_dim)

    @property
    def providers(self) -> list[str]:
        return list(self.session.get_providers())

    @property
    def on_gpu(self) -> bool:
        return self.providers[0] == CUDA

    def __repr__(self) -> str:
        return f"GcnSession({self.path.name}, dim={self.dim}, providers={self.providers})"

    def chunks(self, graphs: Sequence[EquationGraph]) -> Iterator[tuple[int, int]]:
        """``(start, stop)`` ranges of ``graphs`` within the per-call graph and node limits."""
        limit_graphs, limit_nodes = self.max_graphs, self.settings.max_nodes
        start, nodes = 0, 0
        for index, graph in enumerate(graphs):
            if index > start and (
                index - start >= limit_graphs or nodes + graph.num_nodes > limit_nodes
            ):
                yield start, index
                start, nodes = index, 0
            nodes += graph.num_nodes
        if start < len(graphs):
            yield start, len(graphs)

    def run_packed(self, packed: PackedGraphs) -> np.ndarray:
        """One session call: float32 ``(packed.num_graphs, dim)``."""
        (out,) = self.session.run([self.output_name], packed.feeds())
        return np.asarray(out, dtype=np.float32)

    def encode(self, graphs: Sequence[EquationGraph]) -> np.ndarray:
        """Embeddings of ``graphs``: float32 ``(len(graphs), dim)``, in input order.

        Raises:
            ModelMismatchError: a graph featurised with another vocabulary.
            RuntimeInputError: an empty graph or ids outside the model's slots.
        """
        if not graphs:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start, stop in self.chunks(graphs):
            packed = pack_graphs(graphs[start:stop], self.card.vocab_hash, self.card.vocab_sizes)
            parts.append(self.run_packed(packed))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]
