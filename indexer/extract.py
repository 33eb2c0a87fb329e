"""Extraction: any supported source -> equation records (or failure records).

=============  ===========================================================================
format         sources
=============  ===========================================================================
``tex``        .tex files, folders of them, arXiv-style .tar.gz / .tgz / .gz
``hepth``      the ``LATEX->YEAR/PAPERID.tex`` record files (.txt, .txt.xz)
``jsonl``      one equation or one document per line (.jsonl, .jsonl.gz)
``jats``       JATS XML articles (``disp-formula`` with ``mml:math`` or ``tex-math``)
``opensearch`` documents of an existing index (point in time + search_after)
=============  ===========================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

FORMATS = ("tex", "hepth", "jsonl", "jats", "opensearch")


class UnknownFormat(IndexerError):  # noqa: N818 - reads better at the call site
    """The ``--format`` is not one of :data:`FORMATS`."""

    reason = "unknown-format"


class SourceError(IndexerError):
    """A source that does not exist or cannot be read (found before anything is extracted)."""

    reason = "missing-source"


def guess_format(source: str) -> str:
    """The format of a path from its name: .tex/.tar.gz -> tex, .jsonl -> jsonl, ...; a
    ``.txt`` is hep-th only when its start holds a ``->YEAR/PAPER.tex`` source marker (a
    missing or unreadable one is left to the reader, which records why).

    Raises:
        UnknownFormat: a name of no known format, or a ``.txt`` that is not a hep-th record file.
    """
    name = source.lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        return "jsonl"
    if name.endswith((".xml", ".xml.gz", ".nxml")):
        return "jats"
    if name.endswith((".txt", ".txt.xz")):
        from mathsearch.indexer.hepth import looks_like_hepth

        if looks_like_hepth(source) is False:
            raise UnknownFormat(
                f"{source} is not a hep-th record file (no ->YEAR/PAPER.tex source marker in "
                f"its first lines): pass --format (one of {', '.join(FORMATS)})"
            )
        return "hepth"
    if name.endswith((".tex", ".tar.gz", ".tgz", ".gz")) or Path(source).is_dir():
        return "tex"
    raise UnknownFormat(f"cannot tell the format of {source!r}: pass --format")


def check_sources(sources: Sequence[str], fmt: str | None = None) -> dict[str, str]:
    """Each source's format, every source checked before anything is read or written: a job
    over a mistyped path stops here with one error instead of indexing nothing.

    Index names (``fmt="opensearch"``) are not checked here (the cluster says).

    Raises:
        SourceError: a source that does not exist or cannot be read.
        UnknownFormat: ``fmt`` is not one of :data:`FORMATS`, or a source's format cannot be
            told from its name (see :func:`guess_format`).
    """
    if fmt is not None and fmt not in FORMATS:
        raise UnknownFormat(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    formats: dict[str, str] = {}
    for source in sources:
        if fmt == "opensearch":
            formats[source] = fmt
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
        formats[source] = fmt or guess_format(source)
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

    For ``opensearch`` each source is an index name; ``field`` holds LaTeX (``mode="latex"``)
    or full text with display math (``mode="text"``), read through ``client`` (an
    ``opensearchpy.OpenSearch``, e.g. ``mathsearch.opensearch.connect(settings)``; the
    command line connects to MATHSEARCH_OPENSEARCH_URL).

    Raises:
        UnknownFormat: ``fmt`` is not one of :data:`FORMATS`.
        ValueError: the ``opensearch`` format without a ``client``.
    """
    settings = settings or IndexerSettings.from_env()
    hepth_positions: dict[str, int] = {}  # one numbering per paper across all record files
    if fmt is not None and fmt not in FORMATS:
        raise UnknownFormat(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "opensearch" and client is None:
        raise ValueError(
            "the opensearch format reads an index through a client: "
            "extract(indexes, 'opensearch', client=mathsearch.opensearch.connect(settings))"
        )
    for source in sources:
        kind = fmt or guess_format(source)
        if kind == "opensearch":
            yield from _opensearch(
                client,
                source,
                settings,
                field=field,
                mode=mode,
                id_field=id_field,
                section_field=section_field,
            )
            continue
        if not Path(source).exists():
            yield Failure(
                eq_id=source,
                doc_id="",
                stage="extract",
                reason="missing-source",
                detail=f"{source}: no such file or folder",
                source=source,
            )
            continue
        if kind == "tex":
            from mathsearch.indexer.tex_source import iter_tex

            yield from iter_tex(source, settings)
        elif kind == "hepth":
            from mathsearch.indexer.hepth import iter_hepth

            yield from iter_hepth(source, settings, positions=hepth_positions)
        elif kind == "jsonl":
            from mathsearch.indexer.jsonl_source import iter_jsonl

            yield from iter_jsonl(source, settings)
        else:
            from mathsearch.indexer.jats_source import iter_jats

            yield from iter_jats(source, settings)


def _opensearch(
    client: Any,
    index: str,
    settings: IndexerSettings,
    *,
    field: str,
    mode: str,
    id_field: str | None,
    section_field: str | None,
) -> Iterator[EquationRecord | Failure]:
    from mathsearch.indexer.opensearch_source import iter_opensearch_index

    yield from iter_opensearch_index(
        client,
        index,
        field,
        mode=mode,
        id_field=id_field,
        section_field=section_field,
        settings=settings,
    )
