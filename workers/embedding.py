"""The embed stage shared by the jobs: featurised equations in, their model vectors out.

One way to embed, here as on the query side: an
:class:`~mathsearch.runtime.embedders.Embedder` of any family, run through
:func:`~mathsearch.runtime.embedder_base.embed_safely` (a model fault is a refusal, never a
crash) over :meth:`~mathsearch.indexer.parse.ParsedEquation.embed_item` items.

Vectors are rounded to 6 decimals (float32 carries about 7 significant digits; the JSON bodies
stay short: :func:`~mathsearch.runtime.embedder_base.written_vector`), the form every job writes
to OpenSearch and the query side sends.

A worker process serves one or several encoders (``MATHSEARCH_ENCODERS``, ``mathsearch worker
--encoders gcn,bitmap``): :func:`process_embedders` loads each one once per process through
:func:`mathsearch.runtime.embedders.load_embedder` and keeps it for every later batch;
:func:`mathsearch.runtime.embedders.encoder_card` reads an encoder's card without
loading its session (the client side of a job needs only the vector fields).

Example::

    embedders = process_embedders(["gcn", "bitmap"])     # loaded on first use, then cached
    [e.vector_field for e in embedders]                  # ['vec_gcn_v2', 'vec_bitmap_v1']
    results = embed_parsed(embedders[0], parsed)         # a vector or an EmbedRefusal each
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.runtime.embedder_base import embed_safely, written_vector
from mathsearch.runtime.embedders import Embedder, EmbedRefusal, load_embedder
from mathsearch.runtime.errors import EmbedError

logger = logging.getLogger(__name__)

_EMBEDDERS: dict[str, Embedder] = {}


def process_embedder(name: str = "gcn") -> Embedder:
    """This process's embedder of ``name`` (a family: ``MATHSEARCH_MODEL[_<FAMILY>]`` else the
    shipped default; or an ``.onnx`` path), loaded once per (worker) process."""
    return process_embedders([name])[0]


def process_embedders(names: Sequence[str] | None = None) -> list[Embedder]:
    """This process's embedders of ``names`` (default ``MATHSEARCH_ENCODERS`` and
    ``MATHSEARCH_RERANK_ENCODERS``: :attr:`WorkerSettings.served`), in order: each
    is loaded once per process (:func:`mathsearch.runtime.embedders.load_embedder`) and reused.

    Raises:
        ModelCardError / ModelMismatchError: a model that does not exist or does not fit.
    """
    if names is None:
        from mathsearch.workers.settings import WorkerSettings

        names = WorkerSettings.from_env().served
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


#: One embedder result in the written form.
Embedded = list[float] | EmbedRefusal


def rounded(result: np.ndarray | EmbedRefusal) -> Embedded:
    """One embedder result in the written form: a vector rounded to 6 decimals, or the refusal."""
    if isinstance(result, EmbedRefusal):
        return result
    return written_vector(result)


def embed_items(embedder: Embedder, items: Sequence[Mapping[str, Any]]) -> list[Embedded]:
    """One embedder over items, in the written form (rounded vectors or refusals); an embedder
    that raises refuses every item (:func:`~mathsearch.runtime.embedder_base.embed_safely`)."""
    return [rounded(result) for result in embed_safely(embedder, items)] if items else []


def embed_parsed(embedder: Embedder, parsed: Sequence[ParsedEquation]) -> list[Embedded]:
    """The embedder's result for each featurised equation: a rounded vector or its refusal."""
    return embed_items(embedder, [p.embed_item() for p in parsed])


def vectors_of(embedder: Embedder, parsed: Sequence[ParsedEquation]) -> list[list[float]]:
    """The vectors of equations that must all have one (benchmark corpora, fixtures).

    Raises:
        EmbedError: the embedder refused one (it says which and why).
    """
    out: list[list[float]] = []
    for item, result in zip(parsed, embed_parsed(embedder, parsed), strict=True):
        if isinstance(result, EmbedRefusal):
            raise EmbedError(
                f"{embedder.vector_field} refused {item.record.eq_id}: {result.reason} "
                f"{result.detail}".strip()
            )
        out.append(result)
    return out


def embedded(
    featuriser: Featuriser,
    embedder: Embedder,
    items: Iterable[EquationRecord | Failure],
    batch_size: int = 256,
) -> Iterator[tuple[ParsedEquation, list[float]] | Failure]:
    """Featurise and embed a stream in batches, in order; failures pass through as they are,
    and an equation the embedder refuses becomes an ``embed`` failure with its reason."""
    batch: list[ParsedEquation | Failure] = []

    def flush() -> Iterator[tuple[ParsedEquation, list[float]] | Failure]:
        kept = [item for item in batch if isinstance(item, ParsedEquation)]
        results = iter(embed_parsed(embedder, kept))
        for item in batch:
            if isinstance(item, Failure):
                yield item
                continue
            result = next(results)
            if isinstance(result, EmbedRefusal):
                record = item.record
                yield Failure(
                    eq_id=record.eq_id, doc_id=record.doc_id, stage="embed",
                    reason=result.reason, detail=result.detail, source=record.source,
                )  # fmt: skip
            else:
                yield item, result

    for item in featuriser.parse_stream(items, batch_size):
        batch.append(item)
        if len(batch) >= batch_size:
            yield from flush()
            batch = []
    yield from flush()
