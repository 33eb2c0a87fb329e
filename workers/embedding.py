"""The embed stage shared by the jobs: featurised equations in, their model vectors out.

Vectors are rounded to 6 decimals (float32 carries about 7 significant digits; the JSON bodies
stay short), the form every job writes to OpenSearch.

A worker process serves one or several encoders (``MATHSEARCH_ENCODERS``, ``mathsearch worker
--encoders gcn,bitmap``): :func:`process_embedders` loads each one once per process through
:func:`mathsearch.export.embedders.load_embedder` and keeps it for every later batch;
:func:`mathsearch.export.embedders.encoder_card` reads an encoder's card without
loading its session (the client side of a job needs only the vector fields).

Example::

    embedders = process_embedders(["gcn", "bitmap"])     # loaded on first use, then cached
    [e.vector_field for e in embedders]                  # ['vec_gcn_v1', 'vec_bitmap_v1']
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from mathsearch.export.embedders import Embedder, EmbedRefusal, load_embedder
from mathsearch.export.runtime import Encoder
from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure

logger = logging.getLogger(__name__)

_ENCODER: list[Encoder] = []
_EMBEDDERS: dict[str, Embedder] = {}


def process_encoder() -> Encoder:
    """This process's encoder: the ONNX session is loaded once per (worker) process.

    The model is ``MATHSEARCH_MODEL`` (else the shipped default) on ``MATHSEARCH_EMBED_DEVICE``.
    """
    if not _ENCODER:
        _ENCODER.append(Encoder())
        logger.info("ONNX session ready: %s on %s", _ENCODER[0].path.name, _ENCODER[0].providers)
    return _ENCODER[0]


def process_embedders(names: Sequence[str] | None = None) -> list[Embedder]:
    """This process's embedders of ``names`` (default ``MATHSEARCH_ENCODERS``), in order: each
    is loaded once per process (:func:`mathsearch.export.embedders.load_embedder`) and reused.

    Raises:
        ModelCardError / ModelMismatchError: a model that does not exist or does not fit.
    """
    if names is None:
        from mathsearch.workers.settings import WorkerSettings

        names = WorkerSettings.from_env().encoders
    out: list[Embedder] = []
    for name in names:
        if name not in _EMBEDDERS:
            embedder = load_embedder(name)
            _EMBEDDERS[name] = embedder
            logger.info(
                "embedder ready: %s (%s, %s) on %s",
                embedder.path.name,
                embedder.family,
                embedder.vector_field,
                embedder.providers,
            )
        out.append(_EMBEDDERS[name])
    return out


def rounded(result: np.ndarray | EmbedRefusal) -> list[float] | EmbedRefusal:
    """One embedder result in the written form: a vector rounded to 6 decimals, or the refusal."""
    if isinstance(result, EmbedRefusal):
        return result
    return np.asarray(result, dtype=np.float32).round(6).tolist()


def vectors_of(encoder: Encoder, parsed: Sequence[ParsedEquation]) -> list[list[float]]:
    """The model's vectors of ``parsed``, as JSON-ready lists."""
    return graph_vectors(encoder, [p.graph for p in parsed])


def graph_vectors(encoder: Encoder, graphs: Sequence[EquationGraph]) -> list[list[float]]:
    """The model's vectors of ``graphs``, rounded to 6 decimals, as JSON-ready lists."""
    if not graphs:
        return []
    return encoder.encode(graphs).round(6).tolist()


def embedded(
    featuriser: Featuriser,
    encoder: Encoder,
    items: Iterable[EquationRecord | Failure],
    batch_size: int = 256,
) -> Iterator[tuple[ParsedEquation, list[float]] | Failure]:
    """Featurise and embed a stream in batches, in order; failures pass through as they are."""
    batch: list[ParsedEquation | Failure] = []

    def flush() -> Iterator[tuple[ParsedEquation, list[float]] | Failure]:
        kept = [item for item in batch if isinstance(item, ParsedEquation)]
        vectors = iter(vectors_of(encoder, kept))
        for item in batch:
            yield item if isinstance(item, Failure) else (item, next(vectors))

    for item in featuriser.parse_stream(items, batch_size):
        batch.append(item)
        if len(batch) >= batch_size:
            yield from flush()
            batch = []
    yield from flush()
