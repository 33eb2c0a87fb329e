"""The embed stage shared by the jobs: featurised equations in, their model vectors out.

Vectors are rounded to 6 decimals (float32 carries about 7 significant digits; the JSON bodies
stay short), the form every job writes to OpenSearch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence

from export.runtime import Encoder
from indexer.mathml_graph import EquationGraph
from indexer.parse import Featuriser, ParsedEquation
from indexer.records import EquationRecord, Failure

logger = logging.getLogger(__name__)

_ENCODER: list[Encoder] = []


def process_encoder() -> Encoder:
    """This process's encoder: the ONNX session is loaded once per (worker) process.

    The model is ``MATHSEARCH_MODEL`` (else the shipped default) on ``MATHSEARCH_EMBED_DEVICE``.
    """
    if not _ENCODER:
        _ENCODER.append(Encoder())
        logger.info("ONNX session ready: %s on %s", _ENCODER[0].path.name, _ENCODER[0].providers)
    return _ENCODER[0]


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
