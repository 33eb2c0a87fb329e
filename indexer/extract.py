"""Extraction: any supported source -> equation records (or failure records).

The formats (``tex``, ``hepth``, ``jsonl``, ``jats``, ``opensearch``), the suffixes the format
guess reads and each format's reader are the registry :data:`~mathsearch.indexer.formats.
FORMAT_REGISTRY`; :func:`extract` dispatches through it and refuses a name it does not hold.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mathsearch.indexer.errors import IndexerError, UnknownFormat
from mathsearch.indexer.formats import (
    FORMATS,
    ExtractRun,
    SourceFormat,
    guess_format,
    source_format,
)
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

# FORMATS, guess_format and UnknownFormat are imported from here by the command line and tests.
__all__ = [
    "FORMATS",
    "SourceError",
    "UnknownFormat",
    "check_sources",
    "extract",
    "guess_format",
]


class SourceError(IndexerError):
    """A source that does not exist or cannot be read (found before anything is extracted)."""

    reason = "missing-source"


def check_sources(sources: Sequence[str], fmt: str | None = None) -> dict[str, str]:
    """Each source's format, every source checked before anything is read or written: a job
    over a mistyped path stops here with one error instead of indexing nothing.

    Index names (``fmt="opensearch"``, a format whose sources are indexes) are not checked
    here (the cluster says).

    Raises:
        SourceError: a source that does not exist or cannot be read.
        UnknownFormat: ``fmt`` is not one of :data:`FORMATS`, or a source's format cannot be
            told from its name (see :func:`guess_format`).
    """
    forced = source_format(fmt) if fmt is not None else None
    formats: dict[str, str] = {}
    for source in sources:
        if forced is not None and forced.sources == "index":
            formats[source] = forced.name
            continue
        path = Path(source)
        if not path.exists():
            raise SourceError(f"{source}: no such file or folder")
        try:
            if path.is_dir():
                next(path.iterdir(), None)
            else:
                with path.open("rb") as handle:
                    handle.read(1)
        except OSError as exc:
            raise SourceError(
                f"{source}: cannot be read ({exc.strerror or exc})", "unreadable-source"
            ) from exc
        formats[source] = forced.name if forced is not None else guess_format(source)
    return formats


def extract(
    sources: Sequence[str],
    fmt: str | None = None,
    settings: IndexerSettings | None = None,
    *,
    field: str = "latex",
    mode: str = "latex",
    id_field: str | None = None,
    section_field: str | None = None,
    client: Any = None,
) -> Iterator[EquationRecord | Failure]:
    """Equation records of every source, in order; unreadable parts become failure records.
    Each source is read by its format's reader (``fmt``, else :func:`guess_format`'s).

    For ``opensearch`` each source is an index name; ``field`` holds LaTeX (``mode="latex"``)
    or full text with display math (``mode="text"``), read through ``client`` (an
    ``opensearchpy.OpenSearch``, e.g. ``mathsearch.opensearch.connect(settings)``; the
    command line connects to MATHSEARCH_OPENSEARCH_URL).

    Raises:
        UnknownFormat: ``fmt`` is not one of :data:`FORMATS`, or a source's format cannot be
            told from its name.
        ValueError: the ``opensearch`` format without a ``client``.
    """
    run = ExtractRun(
        settings=settings or IndexerSettings.from_env(),
        client=client,
        field=field,
        mode=mode,
        id_field=id_field,
        section_field=section_field,
    )
    forced = source_format(fmt) if fmt is not None else None
    if forced is not None:
        _check_client(forced, client)
    for source in sources:
        spec = forced or source_format(guess_format(source))
        if spec.sources == "index":
            _check_client(spec, client)
        elif not Path(source).exists():
            yield Failure(
                eq_id=source,
                doc_id="",
                stage="extract",
                reason="missing-source",
                detail=f"{source}: no such file or folder",
                source=source,
            )
            continue
        yield from spec.reader(source, run)


def _check_client(spec: SourceFormat, client: Any) -> None:
    """Raises ValueError: a format whose sources are indexes, without a client."""
    if spec.sources == "index" and client is None:
        raise ValueError(
            f"the {spec.name} format reads an index through a client: "
            f"extract(indexes, {spec.name!r}, client=mathsearch.opensearch.connect(settings))"
        )
