"""The source formats, in one registry: for each, the names it claims and its reader.

==============  ======================================  ======================================
format          what the format guess reads             reader
==============  ======================================  ======================================
``tex``         .tex, .tar.gz, .tgz, .gz; a folder      ``tex_source.iter_tex``
``hepth``       .txt, .txt.xz with a source marker      ``hepth.iter_hepth`` (one numbering
                (``->YEAR/PAPER.tex``) in its start     per paper across the call's files)
``jsonl``       .jsonl, .jsonl.gz, .ndjson              ``jsonl_source.iter_jsonl``
``jats``        .xml, .xml.gz, .nxml                    ``jats_source.iter_jats``
``opensearch``  never guessed: a source is an index     ``opensearch_source.iter_opensearch_
                name, read through a client             index``
==============  ======================================  ======================================

:data:`FORMATS` (the ``--format`` choices of the command line), :func:`guess_format` and the
dispatch of :func:`~mathsearch.indexer.extract.extract` all read :data:`FORMAT_REGISTRY`; a name
that is not in it is refused with :class:`~mathsearch.indexer.errors.UnknownFormat`. A new
format is its reader module and one :func:`register_format` call below (docs/architecture.md,
"Where a new thing goes").

Example::

    source_format("jsonl").suffixes     # ('.jsonl', '.jsonl.gz', '.ndjson')
    guess_format("paper.tar.gz")        # 'tex'
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, KeysView
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mathsearch.indexer.errors import UnknownFormat
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

__all__ = [
    "FORMATS",
    "FORMAT_REGISTRY",
    "ExtractRun",
    "SourceFormat",
    "guess_format",
    "register_format",
    "source_format",
]


@dataclass
class ExtractRun:
    """What one :func:`~mathsearch.indexer.extract.extract` call hands every reader.

    Attributes:
        settings: the indexer's limits.
        client: an ``opensearchpy.OpenSearch`` for the formats whose sources are index names.
        field, mode, id_field, section_field: which fields of an index's documents hold the
            LaTeX (``mode="latex"``) or full text (``mode="text"``), ids and sections.
        state: what readers keep across the sources of the call, by format name (hep-th's
            equation numbering per paper).
    """

    settings: IndexerSettings
    client: Any = None
    field: str = "latex"
    mode: str = "latex"
    id_field: str | None = None
    section_field: str | None = None
    state: dict[str, Any] = dataclasses.field(default_factory=dict)


#: A format's reader: one source (a path, or an index name) -> records and failure records.
Reader = Callable[[str, ExtractRun], Iterator[EquationRecord | Failure]]


@dataclass(frozen=True)
class SourceFormat:
    """One source format.

    Attributes:
        name: the ``--format`` value.
        reader: reads one source of the format (failures as records, never exceptions for one
            bad equation).
        suffixes: the lower-case file name endings the format guess gives this format (the
            longest ending that matches wins: ``.jsonl.gz`` is ``jsonl`` although ``.gz`` is
            ``tex``); none: never guessed from a name.
        folders: a folder whose name no suffix claims is of this format.
        sniff: for a file its suffixes claim, why it is not of this format after all (its start
            lacks the format's marks), or None when it is or cannot be looked at (the reader
            then records why).
        sources: ``"path"``: files or folders, checked to exist before anything is read;
            ``"index"``: index names, read through :attr:`ExtractRun.client`.
    """

    name: str
    reader: Reader
    suffixes: tuple[str, ...] = ()
    folders: bool = False
    sniff: Callable[[str], str | None] | None = None
    sources: Literal["path", "index"] = "path"


#: Every format, by name, in registration order.
FORMAT_REGISTRY: dict[str, SourceFormat] = {}
#: The format names (a live view of :data:`FORMAT_REGISTRY`: ``--format`` choices).
FORMATS: KeysView[str] = FORMAT_REGISTRY.keys()


def register_format(fmt: SourceFormat) -> SourceFormat:
    """Add ``fmt`` to :data:`FORMAT_REGISTRY`.

    Raises:
        ValueError: its name is taken, a suffix is not a lower-case ``.ending`` or is claimed
            by another format, or a second format claims folders.
    """
    if fmt.name in FORMAT_REGISTRY:
        raise ValueError(f"the format {fmt.name!r} is already registered")
    for suffix in fmt.suffixes:
        if not suffix.startswith(".") or suffix != suffix.lower():
            raise ValueError(f"{fmt.name}: a suffix is a lower-case '.ending', not {suffix!r}")
        owner = next((f.name for f in FORMAT_REGISTRY.values() if suffix in f.suffixes), None)
        if owner is not None:
            raise ValueError(f"{fmt.name}: the suffix {suffix!r} is {owner}'s")
    if fmt.folders and any(f.folders for f in FORMAT_REGISTRY.values()):
        raise ValueError(f"{fmt.name}: folders are already another format's")
    FORMAT_REGISTRY[fmt.name] = fmt
    return fmt


def source_format(name: str) -> SourceFormat:
    """The registered format ``name``.

    Raises:
        UnknownFormat: ``name`` is not one of :data:`FORMATS`.
    """
    try:
        return FORMAT_REGISTRY[name]
    except KeyError:
        raise UnknownFormat(f"unknown format {name!r}: use one of {', '.join(FORMATS)}") from None


def guess_format(source: str) -> str:
    """The format of a path from its name: the format whose suffix is the longest ending of
    the name (.tex/.tar.gz -> tex, .jsonl -> jsonl, ...), else a folder's format; a ``.txt``
    is hep-th only when its start holds a ``->YEAR/PAPER.tex`` source marker (a missing or
    unreadable one is left to the reader, which records why).

    Raises:
        UnknownFormat: a name of no known format, or a file that its format's ``sniff``
            refuses (a ``.txt`` that is not a hep-th record file).
    """
    name = source.lower()
    claims = [
        (len(suffix), fmt)
        for fmt in FORMAT_REGISTRY.values()
        for suffix in fmt.suffixes
        if name.endswith(suffix)
    ]
    if claims:
        fmt = max(claims, key=lambda claim: claim[0])[1]
        why = fmt.sniff(source) if fmt.sniff is not None else None
        if why is not None:
            raise UnknownFormat(f"{source} {why}: pass --format (one of {', '.join(FORMATS)})")
        return fmt.name
    if Path(source).is_dir():
        folder = next((fmt for fmt in FORMAT_REGISTRY.values() if fmt.folders), None)
        if folder is not None:
            return folder.name
    raise UnknownFormat(f"cannot tell the format of {source!r}: pass --format")


# The readers import their modules when first called: most callers read one format.


def _read_tex(source: str, run: ExtractRun) -> Iterator[EquationRecord | Failure]:
    from mathsearch.indexer.tex_source import iter_tex

    return iter_tex(source, run.settings)


def _read_hepth(source: str, run: ExtractRun) -> Iterator[EquationRecord | Failure]:
    from mathsearch.indexer.hepth import iter_hepth

    positions: dict[str, int] = run.state.setdefault("hepth", {})  # one numbering per paper
    return iter_hepth(source, run.settings, positions=positions)


def _sniff_hepth(source: str) -> str | None:
    from mathsearch.indexer.hepth import looks_like_hepth

    if looks_like_hepth(source) is False:
        return "is not a hep-th record file (no ->YEAR/PAPER.tex source marker in its first lines)"
    return None


def _read_jsonl(source: str, run: ExtractRun) -> Iterator[EquationRecord | Failure]:
    from mathsearch.indexer.jsonl_source import iter_jsonl

    return iter_jsonl(source, run.settings)


def _read_jats(source: str, run: ExtractRun) -> Iterator[EquationRecord | Failure]:
    from mathsearch.indexer.jats_source import iter_jats

    return iter_jats(source, run.settings)


def _read_opensearch(source: str, run: ExtractRun) -> Iterator[EquationRecord | Failure]:
    from mathsearch.indexer.opensearch_source import iter_opensearch_index

    return iter_opensearch_index(
        run.client,
        source,
        run.field,
        mode=run.mode,  # "latex" or "text", as extract() was told
        id_field=run.id_field,
        section_field=run.section_field,
        settings=run.settings,
    )


register_format(SourceFormat("tex", _read_tex, (".tex", ".tar.gz", ".tgz", ".gz"), folders=True))
register_format(SourceFormat("hepth", _read_hepth, (".txt", ".txt.xz"), sniff=_sniff_hepth))
register_format(SourceFormat("jsonl", _read_jsonl, (".jsonl", ".jsonl.gz", ".ndjson")))
register_format(SourceFormat("jats", _read_jats, (".xml", ".xml.gz", ".nxml")))
register_format(SourceFormat("opensearch", _read_opensearch, sources="index"))
