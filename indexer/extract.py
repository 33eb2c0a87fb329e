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


def guess_format(source: str) -> str:
    """The format of a path from its name: .tex/.tar.gz -> tex, .jsonl -> jsonl, ..."""
    name = source.lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        return "jsonl"
    if name.endswith((".xml", ".xml.gz", ".nxml")):
        return "jats"
    if name.endswith((".txt", ".txt.xz")):
        return "hepth"
    if name.endswith((".tex", ".tar.gz", ".tgz", ".gz")) or Path(source).is_dir():
        return "tex"
    raise UnknownFormat(f"cannot tell the format of {source!r}: pass --format")


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
