"""Reader of the hep-th record format: ``LATEX->YEAR/PAPERID.tex``, records spanning lines.

The files (``hepth2003/equation.txt``, ``eqnarray.txt``, ``hep_array.txt.xz``; ``.xz`` is read
with :mod:`lzma` transparently) hold one display environment per record, the record ending
with ``->2003/0301004.tex`` or ``->HEP/2002/0210103.tex`` at the end of its last line.

:func:`iter_hepth` turns the records into :class:`EquationRecord` s: ``eqnarray`` (and other row
environments) are split into one equation per row with :mod:`mathsearch.indexer.display_math`,
``array``
records (``hep_array``) are one equation each with the ``array`` kept so it converts as a
matrix. Records that are pieces of macro definitions caught by the original regex (e.g.
``\\begin{equation}}`` + ``\\newcommand{\\eeq}{\\end{equation}``, or bodies with ``#1``) become
``Failure(stage="extract", reason="macro-fragment")``; others that hold no display
(``reason="no-display-math"``) or exceed ``settings.max_equation_chars`` (``too-large``) too.
``doc_id`` is the paper id (``0301004``); ``position`` counts the items (equations and
failures) of each paper across the input; pass one ``positions`` dict to several calls to keep
counting across files, so that ``equation.txt`` and ``eqnarray.txt`` never share an id.
``\\nn`` (hep-th shorthand for ``\\nonumber`` and often for ``\\nonumber\\\\``) ends a row.

Example::

    positions: dict[str, int] = {}
    for name in ("equation.txt", "eqnarray.txt"):
        for item in iter_hepth(f"data/hepth2003/{name}", positions=positions):
            ...
"""

from __future__ import annotations

import logging
import lzma
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from mathsearch.indexer.display_math import (
    ROW_ENVIRONMENTS,
    clean_latex,
    is_blank,
    iter_displays,
    mask_comments,
    split_display,
)
from mathsearch.indexer.errors import LimitExceeded
from mathsearch.indexer.latex_macros import DEFINER, Macro, MacroTable, expand_macros
from mathsearch.indexer.records import EquationRecord, Failure, excerpt, make_eq_id
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

_RECORD_END = re.compile(r"^(?P<latex>.*)->(?P<source>(?:[A-Za-z]+/)?\d{4}/[^/\s]+?\.tex)\s*$")
_DEFINITION_END = re.compile(r"\s*\\begin\s*\{[^{}]*\}\}")
_PARAMETER = re.compile(r"(?<!\\)#+[1-9]")
_WHOLE_ENVIRONMENT = re.compile(
    r"\A\s*\\begin\s*\{(?P<env>[A-Za-z]+\*?)\}.*\\end\s*\{(?P=env)\}\s*\Z", re.DOTALL
)
#: hep-th shorthands used without their definitions in the records.
ROW_SHORTHANDS = MacroTable({"nn": Macro("nn", 0, "\\nonumber\\\\")})
_NONUMBER = MacroTable({"nn": Macro("nn", 0, "\\nonumber")})


@dataclass(frozen=True)
class HepthRecord:
    """One raw record: paper id, its index among that paper's records, the LaTeX, the path."""

    doc_id: str
    position: int
    raw: str
    paper: str = ""
    dropped: int = 0  # characters beyond ``max_chars`` not kept in ``raw``

    @property
    def eq_id(self) -> str:
        return make_eq_id(self.doc_id, self.position)


def bundled_sample_lines() -> list[str]:
    """Lines of ``indexer/resources/hepth2003-sample.txt``, the corpus the demo indexes."""
    sample = resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt")
    return sample.read_text("utf-8").splitlines(keepends=True)


def _decode(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return line.decode("latin-1")


def open_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    """Lines of a record file (``.xz`` decompressed on the fly; UTF-8, else Latin-1 per line)."""
    path = Path(path)
    opener = lzma.open if path.name.endswith(".xz") else open
    with opener(path, "rb") as handle:
        for line in handle:
            yield _decode(line)


#: How much of a ``.txt`` :func:`looks_like_hepth` reads for a source marker (bytes).
SNIFF_BYTES = 1 << 20


def looks_like_hepth(path: str | os.PathLike[str], limit: int = SNIFF_BYTES) -> bool | None:
    """Whether the first ``limit`` bytes of ``path`` hold a ``->YEAR/PAPER.tex`` source
    marker (a hep-th record file's first record ends with one); ``None`` when the file is
    empty or cannot be read (the reader then records why)."""
    opener = lzma.open if str(path).endswith(".xz") else open
    try:
        with opener(path, "rb") as handle:
            head = handle.read(limit)
    except (OSError, EOFError, lzma.LZMAError):
        return None
    if not head.strip():
        return None
    return any(_RECORD_END.match(_decode(line)) for line in head.splitlines())


def read_records(
    lines: Iterable[str], *, max_chars: int | None = None, trailing: bool = False
) -> Iterator[HepthRecord]:
    """Group lines into records; ``position`` counts records within each paper from 0.

    A record keeps at most ``max_chars`` characters (the rest is counted in ``dropped``), so a
    file without markers never fills memory. With ``trailing``, lines after the last marker
    come as a record with ``paper=""`` (else they are logged and dropped).
    """
    buffer: list[str] = []
    size = dropped = 0
    positions: dict[str, int] = {}
    for line in lines:
        match = _RECORD_END.match(line.rstrip("\r\n"))
        piece = line if match is None else match.group("latex")
        if max_chars is not None and size + len(piece) > max_chars:
            keep = max(0, max_chars - size)
            dropped += len(piece) - keep
            piece = piece[:keep]
        buffer.append(piece)
        size += len(piece)
        if match is None:
            continue
        paper = match.group("source")
        doc_id = paper.rsplit("/", 1)[-1].removesuffix(".tex")
        position = positions.get(doc_id, 0)
        positions[doc_id] = position + 1
        yield HepthRecord(doc_id, position, "".join(buffer), paper, dropped)
        buffer, size, dropped = [], 0, 0
    if "".join(buffer).strip() or dropped:
        if trailing:
            yield HepthRecord("", 0, "".join(buffer), "", dropped)
        else:
            logger.warning("ignoring %d trailing line(s) without a source marker", len(buffer))


def _fragment(masked: str) -> str | None:
    """Why a (comment-masked) record is a macro-definition fragment, or None."""
    if _DEFINITION_END.match(masked):
        return "\\begin{..} closes a definition's brace"
    definer = next((m for m in DEFINER.finditer(masked) if m.group("cmd")), None)
    if definer is not None:
        return f"holds \\{definer.group('cmd')}"
    if _PARAMETER.search(masked):
        return "holds a macro parameter (#1..#9)"
    return None


def _why_not(raw: str) -> tuple[str, str]:
    """(reason, detail) for a record without a complete environment after comment masking."""
    if _WHOLE_ENVIRONMENT.match(raw) or any(True for _ in iter_displays(raw)):
        return "commented-out", "the environment's end (or all of it) is inside % comments"
    if re.match(r"\s*\\begin\s*\{", raw):
        return "unterminated-environment", "\\begin{..} without its \\end{..}"
    return "no-display-math", "no display environment"


def record_equations(record: HepthRecord, settings: IndexerSettings) -> list[str] | Failure:
    """The equations of one record, or a :class:`Failure` (position left for the caller)."""

    def failure(reason: str, detail: str) -> Failure:
        return Failure(
            "", record.doc_id, "extract", reason, detail, record.paper, excerpt(record.raw)
        )

    if not record.paper:
        return failure("no-source-marker", "lines after the last ->YEAR/PAPER.tex marker")
    if record.dropped:
        return failure("too-large", f"{len(record.raw) + record.dropped} characters")
    masked = mask_comments(record.raw)
    reason = _fragment(masked)
    if reason is not None:
        return failure("macro-fragment", reason)
    if len(masked) > settings.max_equation_chars:
        return failure("too-large", f"{len(masked)} characters")
    displays = list(iter_displays(masked))
    try:
        if not displays:
            if _WHOLE_ENVIRONMENT.match(masked) is None:
                return failure(*_why_not(record.raw))
            opened, closed = masked.count("\\begin{"), masked.count("\\end{")
            if opened > closed:
                # The corpus regex stopped at the \end of a nested environment (arrays in arrays).
                return failure(
                    "truncated-environment",
                    f"{opened} \\begin but {closed} \\end: cut at a nested environment's end",
                )
            latex = clean_latex(expand_macros(masked, _NONUMBER, settings))
            return [] if is_blank(latex) else [latex]
        equations: list[str] = []
        for raw in displays:
            table = ROW_SHORTHANDS if raw.env in ROW_ENVIRONMENTS else _NONUMBER
            equations.extend(split_display(raw.env, expand_macros(raw.body, table, settings)))
    except LimitExceeded as exc:
        return failure(exc.reason, str(exc))
    return equations


def iter_hepth(
    source: str | os.PathLike[str] | Iterable[str],
    settings: IndexerSettings | None = None,
    *,
    positions: dict[str, int] | None = None,
) -> Iterator[EquationRecord | Failure]:
    """Equations (and failures) of a record file or of its lines; never raises for bad data."""
    settings = settings or IndexerSettings()
    positions = {} if positions is None else positions
    cap = settings.max_equation_chars
    if not isinstance(source, str | os.PathLike):
        records = read_records(source, max_chars=cap, trailing=True)
        yield from _items(records, "", settings, positions)
        return
    name = str(source)
    try:
        records = read_records(open_lines(source), max_chars=cap, trailing=True)
        yield from _items(records, name, settings, positions)
    except (OSError, EOFError, lzma.LZMAError) as exc:  # unreadable or truncated file
        doc_id = Path(name).name.split(".")[0]
        detail = f"{type(exc).__name__}: {exc}"
        yield Failure(make_eq_id(doc_id, "*"), doc_id, "extract", "unreadable-source", detail, name)


def _items(
    records: Iterable[HepthRecord], name: str, settings: IndexerSettings, positions: dict[str, int]
) -> Iterator[EquationRecord | Failure]:
    for raw_record in records:
        record = raw_record
        if not record.paper:  # trailing lines: the file's name stands in for the paper
            stem = Path(name).name.split(".")[0] if name else "hepth"
            record = HepthRecord(stem, 0, record.raw, "", record.dropped)
        result = record_equations(record, settings)
        items: Sequence[str | Failure] = [result] if isinstance(result, Failure) else result
        for row, found in enumerate(items):
            position = positions.get(record.doc_id, 0)
            positions[record.doc_id] = position + 1
            eq_id, source = make_eq_id(record.doc_id, position), name or record.paper
            item = found
            if isinstance(found, str) and len(found) > settings.max_equation_chars:
                detail = f"{len(found)} characters"
                item = Failure(
                    "", record.doc_id, "extract", "too-large", detail, "", excerpt(found)
                )
            if isinstance(item, Failure):
                item.eq_id, item.source = eq_id, source
                yield item
            else:
                yield EquationRecord(
                    eq_id=eq_id,
                    doc_id=record.doc_id,
                    position=position,
                    latex=item,
                    source=source,
                    extra={"paper": record.paper, "record": record.position, "row": row},
                )
