"""Equations of LaTeX sources: a ``.tex`` file, a folder of them, or an arXiv source archive.

:func:`iter_tex` yields one :class:`EquationRecord` per display equation (rows of ``align``-like
environments count separately, see :mod:`mathsearch.indexer.display_math`) and a :class:`Failure`
with
``stage="extract"`` for whatever cannot be read; it never raises for a bad input.

- A file: ``doc_id`` is its stem (``0301001.tex`` -> ``0301001``); ``\\input``/``\\include`` are
  resolved from its folder (never above it).
- A folder: every ``*.tex`` below it, sorted; a file with ``\\documentclass`` (or the old
  ``\\documentstyle``) is a document with its ``\\input`` files inlined, and a file inlined by
  one is not a document of its own. ``doc_id`` is the path below the folder, without ``.tex``.
- An archive (``.tar.gz``, ``.tgz``, ``.tar``, or ``.gz`` holding a tar or a single ``.tex``):
  one document, ``doc_id`` the name without those extensions (``hep-th0301001.tar.gz`` ->
  ``hep-th0301001``). Only regular ``.tex`` members are read (links, devices and names that are
  absolute or climb with ``..`` are ignored), sizes are bounded by
  ``settings.max_document_bytes``; the main file is the one with ``\\documentclass``, and
  without one the ``.tex`` files are concatenated in name order.

Per document: comments and ``\\iffalse .. \\fi`` blocks are masked, user macros collected
(:mod:`mathsearch.indexer.latex_macros`) and their definitions removed, environment shorthands such
as
``\\be .. \\ee`` expanded, display math found from ``\\begin{document}`` on, every body
macro-expanded before its rows are split. ``section`` is the innermost enclosing
``\\part``/``\\chapter``/``\\(sub)(sub)section`` title, ``context`` ``settings.context_chars``
characters of lightly cleaned prose each side (other displays left out), ``position`` the running
index in the document (failures of single equations take a position too), ``source`` the path.
Text is decoded as UTF-8, or as Latin-1 when that fails (nothing is lost either way).
"""

from __future__ import annotations

import bisect
import functools
import gzip
import logging
import posixpath
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from mathsearch.indexer.display_math import (
    RawDisplay,
    iter_displays,
    mask_comments,
    mask_iffalse,
    split_display,
)
from mathsearch.indexer.errors import ExtractionError, LimitExceeded
from mathsearch.indexer.latex_macros import (
    blank_definitions,
    collect_macros,
    environment_shorthands,
    expand,
    expand_macros,
    find_definitions,
    group_end,
)
from mathsearch.indexer.records import EquationRecord, Failure, excerpt, make_eq_id
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

#: File name endings read as archives, longest first.
ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tar", ".gz")
_MAIN = re.compile(r"\\document(?:class|style)(?![A-Za-z@])")
_INPUT = re.compile(
    r"\\(?:input|include|subfile)(?![A-Za-z@])\s*(?:\{(?P<braced>[^{}]*)\}|(?P<bare>[\w./-]+))"
)
_SECTION = re.compile(
    r"\\(?:part|chapter|section|subsection|subsubsection)(?![A-Za-z@])\*?\s*(?:\[[^\]]*\])?\s*(?=\{)"
)
_DROPPED = re.compile(
    r"\\(?:label|ref|eqref|pageref|cite\w*|bibitem|vspace|hspace|includegraphics|url|begin|end)"
    r"\*?\s*(?:\[[^\]]*\])?\s*\{[^{}]*\}"
)
_CONTROL = re.compile(r"\\(?:[A-Za-z@]+\*?|.)", re.DOTALL)
_MAX_INPUT_DEPTH = 16
#: Bytes no LaTeX file holds: C0 controls but tab, line feed, vertical tab, form feed, carriage
#: return, ^Z (old DOS end of file) and escape.
_CONTROL_BYTES = bytes([*range(0, 9), *range(14, 26), *range(28, 32)])
#: How much of a file :func:`binary_reason` looks at.
_SNIFF_BYTES = 8192


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def binary_reason(data: bytes) -> str | None:
    """Why ``data`` is not a text file, or ``None`` when it may be LaTeX: a NUL byte, or more
    than one control byte in ten, in its first 8 KiB.

    >>> binary_reason("x^2 + y^2 = z^2, café".encode("latin-1")) is None
    True
    >>> binary_reason(b"\\x7fELF\\x02\\x01\\x00")
    'binary data (NUL bytes), not LaTeX'
    """
    head = data[:_SNIFF_BYTES]
    if b"\x00" in head:
        return "binary data (NUL bytes), not LaTeX"
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if controls * 10 > len(head):
        return f"binary data ({controls} control bytes in the first {len(head)}), not LaTeX"
    return None


def doc_id_of(name: str) -> str:
    """The document id of a file or archive name: the name without archive/``.tex`` endings."""
    base = posixpath.basename(name.replace("\\", "/"))
    for suffix in (*ARCHIVE_SUFFIXES, ".tex"):
        if base.lower().endswith(suffix) and len(base) > len(suffix):
            base = base[: -len(suffix)]
            break
    if base.lower().endswith(".tex") and len(base) > 4:  # paper.tex.gz
        base = base[:-4]
    return base


def plain_text(latex: str) -> str:
    """Text of a LaTeX fragment with commands lightly stripped and white space collapsed."""
    text = _DROPPED.sub(" ", latex)
    text = _CONTROL.sub(lambda m: " " if m.group() in {"\\\\", "\\ "} else "", text)
    text = re.sub(r"[{}$&%~^_]", " ", text)
    return " ".join(text.split())


def _context(text: str, span: tuple[int, int], region: tuple[int, int], chars: int) -> str:
    (start, end), (lower, upper) = span, region
    if chars <= 0:
        return ""
    window = 4 * chars + 64
    first, last = max(lower, start - window), min(upper, end + window)
    before, after = plain_text(text[first:start]), plain_text(text[end:last])
    if len(before) > chars or first > lower:  # drop the word the cut went through
        before = before[-chars:].split(" ", 1)[-1]
    if len(after) > chars or last < upper:
        after = after[:chars].rsplit(" ", 1)[0]
    return f"{before} {after}".strip()


def _without_displays(text: str, displays: list[RawDisplay]) -> str:
    """``text`` with every display blanked (offsets kept), so contexts hold only prose."""
    pieces: list[str] = []
    last = 0
    for raw in displays:
        pieces.extend((text[last : raw.start], " " * (raw.end - raw.start)))
        last = raw.end
    pieces.append(text[last:])
    return "".join(pieces)


def section_titles(text: str) -> list[tuple[int, str]]:
    """(offset, title) of every sectioning command, in order; titles as plain text."""
    titles: list[tuple[int, str]] = []
    for match in _SECTION.finditer(text):
        end = group_end(text, match.end())
        if end > 0:
            titles.append((match.start(), plain_text(text[match.end() + 1 : end - 1])))
    return titles


def assemble(main: str, load: Callable[[str], str | None], max_chars: int) -> str:
    """The comment-masked text of ``main`` with ``\\input``/``\\include`` files inlined.

    ``load`` maps a normalised relative name to the file's text (None when absent).
    """
    size = 0

    def inline(name: str, stack: tuple[str, ...]) -> str:
        nonlocal size
        text = mask_comments(load(name) or "")
        size += len(text)
        pieces: list[str] = []
        last = 0
        for match, found in _inputs(text, name, main, load):
            if found is None or found in stack or len(stack) >= _MAX_INPUT_DEPTH:
                continue
            if size > max_chars:
                logger.warning("not inlining %s: document over %d chars", found, max_chars)
                continue
            pieces.extend((text[last : match.start()], "\n", inline(found, (*stack, found)), "\n"))
            last = match.end()
        pieces.append(text[last:])
        return "".join(pieces)

    return inline(main, (main,))


def _inputs(
    text: str, current: str, main: str, load: Callable[[str], str | None]
) -> Iterator[tuple[re.Match[str], str | None]]:
    """Each ``\\input``-like command of ``text`` with the file it names (None when absent).

    Names are tried from the folder of the current file, of the main file, and the root.
    """
    folders = dict.fromkeys((posixpath.dirname(current), posixpath.dirname(main), ""))
    for match in _INPUT.finditer(text):
        target = (match.group("braced") or match.group("bare") or "").strip()
        found = None
        for folder in folders if target else ():
            for candidate in (target, f"{target}.tex"):
                name = posixpath.normpath(posixpath.join(folder, candidate))
                if not name.startswith(("../", "/")) and name != ".." and load(name) is not None:
                    found = name
                    break
            if found is not None:
                break
        yield match, found


def extract_document(
    text: str, doc_id: str, source: str = "", settings: IndexerSettings | None = None
) -> Iterator[EquationRecord | Failure]:
    """The equations of one assembled document (see the module docstring)."""
    settings = settings or IndexerSettings()
    text = mask_iffalse(mask_comments(text))
    definitions = find_definitions(text)
    macros = collect_macros(definitions)
    text = blank_definitions(text, definitions)
    shorthands = environment_shorthands(macros)
    if len(shorthands):
        try:
            text = expand(
                text,
                shorthands,
                max_expansions=settings.max_macro_expansions * 100,
                max_chars=settings.max_document_bytes,
            )
        except LimitExceeded as exc:
            yield Failure(
                make_eq_id(doc_id, "*"),
                doc_id,
                "extract",
                exc.reason,
                f"environment shorthands not expanded: {exc}",
                source,
            )
    begin = re.search(r"\\begin\s*\{document\}", text)
    lower = begin.end() if begin else 0
    finish = re.search(r"\\end\s*\{document\}", text[lower:])
    upper = lower + finish.start() if finish else len(text)
    titles = section_titles(text)
    offsets = [offset for offset, _ in titles]
    unterminated: list[RawDisplay] = []
    displays = list(iter_displays(text, lower, upper, unterminated=unterminated))
    prose = _without_displays(text, displays)
    position = 0
    skipped = {id(raw) for raw in unterminated}
    for raw in sorted([*displays, *unterminated], key=lambda item: item.start):
        if id(raw) in skipped:  # not read as an equation: a failure in its place
            yield Failure(
                make_eq_id(doc_id, position),
                doc_id,
                "extract",
                "unterminated-environment",
                _unterminated_detail(raw),
                source,
                excerpt(text[raw.start : raw.end] + raw.body),
            )
            position += 1
            continue
        at = bisect.bisect_right(offsets, raw.start) - 1
        section = titles[at][1] if at >= 0 else ""
        context = _context(prose, (raw.start, raw.end), (lower, upper), settings.context_chars)
        try:
            if len(raw.body) > settings.max_equation_chars:
                raise LimitExceeded(f"{len(raw.body)} characters", "too-large")
            rows = split_display(raw.env, expand_macros(raw.body, macros, settings))
        except LimitExceeded as exc:
            yield Failure(
                make_eq_id(doc_id, position),
                doc_id,
                "extract",
                exc.reason,
                str(exc),
                source,
                excerpt(raw.body),
            )
            position += 1
            continue
        for row, latex in enumerate(rows):
            eq_id = make_eq_id(doc_id, position)
            if len(latex) > settings.max_equation_chars:
                detail = f"{len(latex)} characters"
                yield Failure(eq_id, doc_id, "extract", "too-large", detail, source, excerpt(latex))
            else:
                yield EquationRecord(
                    eq_id=eq_id,
                    doc_id=doc_id,
                    position=position,
                    latex=latex,
                    section=section,
                    context=context,
                    source=source,
                    extra={"env": raw.env, "row": row},
                )
            position += 1


def _unterminated_detail(raw: RawDisplay) -> str:
    if raw.env in {"\\[", "$$"}:
        closing = "\\]" if raw.env == "\\[" else "$$"
        return f"{raw.env} without its {closing} before a blank line or the next display"
    return f"\\begin{{{raw.env}}} without its \\end{{{raw.env}}} (or another display opens first)"


def _document_failure(doc_id: str, source: str, reason: str, detail: str) -> Failure:
    return Failure(make_eq_id(doc_id, "*"), doc_id, "extract", reason, detail, source)


def _read_file(path: Path, limit: int) -> bytes:
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise LimitExceeded(f"{path} is over {limit} bytes", "too-large")
    why = binary_reason(data)
    if why is not None:
        raise ExtractionError(f"{path}: {why}", "binary-source")
    return data


def _safe_name(name: str) -> str | None:
    name = name.replace("\\", "/")
    normal = posixpath.normpath(name)
    if name.startswith("/") or normal == ".." or normal.startswith("../") or ":" in normal:
        return None
    return normal


def _archive_files(path: Path, limit: int) -> dict[str, str]:
    """The ``.tex`` members of an archive (or the one file of a gzipped ``.tex``)."""
    lower = path.name.lower()
    if lower.endswith(".gz") and not lower.endswith((".tar.gz", ".tgz")):
        with gzip.open(path, "rb") as handle:
            head = handle.read(512)
        if head[257:262] != b"ustar":
            with gzip.open(path, "rb") as handle:
                data = handle.read(limit + 1)
            if len(data) > limit:
                raise LimitExceeded(f"decompressed {path.name} is over {limit} bytes", "too-large")
            why = binary_reason(data)
            if why is not None:
                raise ExtractionError(f"decompressed {path.name}: {why}", "binary-source")
            return {f"{doc_id_of(path.name)}.tex": _decode(data)}
    files: dict[str, str] = {}
    seen = read = 0
    with tarfile.open(path, mode="r|*") as archive:
        for member in archive:
            seen += max(member.size, 0)
            if seen > 4 * limit:
                raise LimitExceeded(f"{path.name} unpacks to over {4 * limit} bytes", "too-large")
            name = _safe_name(member.name)
            if not member.isreg() or name is None:
                logger.warning(
                    "%s: ignoring member %r (not a safe regular file)", path, member.name
                )
                continue
            if not name.lower().endswith(".tex"):
                continue
            extracted = archive.extractfile(member)
            data = extracted.read(limit + 1) if extracted is not None else b""
            read += len(data)
            if read > limit:
                raise LimitExceeded(
                    f"the .tex files of {path.name} exceed {limit} bytes", "too-large"
                )
            files[name] = _decode(data)
    return files


def _main_file(files: dict[str, str]) -> str | None:
    mains = [name for name in sorted(files) if _MAIN.search(mask_comments(files[name]))]
    full = [name for name in mains if "\\begin{document}" in files[name]]
    found = full or mains
    return found[0] if found else None


def _iter_archive(path: Path, settings: IndexerSettings) -> Iterator[EquationRecord | Failure]:
    doc_id, source = doc_id_of(path.name), str(path)
    try:
        files = _archive_files(path, settings.max_document_bytes)
    except (LimitExceeded, ExtractionError) as exc:
        yield _document_failure(doc_id, source, exc.reason, str(exc))
        return
    except (tarfile.TarError, OSError, EOFError, zlib.error, ValueError) as exc:
        yield _document_failure(doc_id, source, "bad-archive", f"{type(exc).__name__}: {exc}")
        return
    if not files:
        yield _document_failure(doc_id, source, "no-tex-files", f"{path.name} holds no .tex file")
        return
    main = _main_file(files)
    if main is None:
        text = "\n".join(mask_comments(files[name]) for name in sorted(files))
    else:
        text = assemble(main, files.get, settings.max_document_bytes)
    yield from extract_document(text, doc_id, source, settings)


class _DiskFiles:
    """Reads ``.tex`` files below ``root`` (never above it), remembering why one failed."""

    def __init__(self, root: Path, limit: int) -> None:
        self.root, self.limit = root.resolve(), limit
        self.errors: dict[str, ExtractionError | LimitExceeded | OSError] = {}
        self.read = functools.lru_cache(maxsize=64)(self._read)

    def _read(self, name: str) -> str | None:
        file = self.root / name
        try:
            if not (file.is_file() and file.resolve().is_relative_to(self.root)):
                return None
            return _decode(_read_file(file, self.limit))
        except (OSError, LimitExceeded, ExtractionError) as exc:
            logger.warning("cannot read %s: %s", file, exc)
            self.errors[name] = exc
            return None


def _iter_folder(root: Path, settings: IndexerSettings) -> Iterator[EquationRecord | Failure]:
    names = sorted(
        file.relative_to(root).as_posix() for file in root.rglob("*.tex") if file.is_file()
    )
    files = _DiskFiles(root, settings.max_document_bytes)
    mains = [name for name in names if _MAIN.search(mask_comments(files.read(name) or ""))]
    inlined: set[str] = set()
    for main in mains:
        pending = [main]
        while pending:
            current = pending.pop()
            for _, found in _inputs(
                mask_comments(files.read(current) or ""), current, main, files.read
            ):
                if found is not None and found not in inlined and found != main:
                    inlined.add(found)
                    pending.append(found)
    for name in names:
        if name in inlined and name not in mains:
            continue
        doc_id, source = name[:-4], str(root / name)
        if files.read(name) is None:
            error = files.errors.get(name)
            reason = getattr(error, "reason", "unreadable-source")
            yield _document_failure(doc_id, source, reason, str(error or "unreadable"))
            continue
        text = assemble(name, files.read, settings.max_document_bytes)
        yield from extract_document(text, doc_id, source, settings)


def iter_tex(
    path: str | Path, settings: IndexerSettings | None = None
) -> Iterator[EquationRecord | Failure]:
    """Equations of a ``.tex`` file, a folder of them or an arXiv source archive."""
    settings = settings or IndexerSettings()
    path = Path(path)
    if path.is_dir():
        yield from _iter_folder(path, settings)
        return
    if path.name.lower().endswith(ARCHIVE_SUFFIXES):
        yield from _iter_archive(path, settings)
        return
    doc_id, source = doc_id_of(path.name), str(path)
    try:
        _read_file(path, settings.max_document_bytes)
    except (LimitExceeded, ExtractionError) as exc:
        yield _document_failure(doc_id, source, exc.reason, str(exc))
        return
    except OSError as exc:
        yield _document_failure(doc_id, source, "unreadable-source", str(exc))
        return
    load = _DiskFiles(path.parent, settings.max_document_bytes).read
    yield from extract_document(
        assemble(path.name, load, settings.max_document_bytes), doc_id, source, settings
    )


def iter_tex_bytes(
    data: bytes, doc_id: str, source: str = "", settings: IndexerSettings | None = None
) -> Iterator[EquationRecord | Failure]:
    """Equations of one in-memory ``.tex`` document (no ``\\input`` resolution)."""
    settings = settings or IndexerSettings()
    if len(data) > settings.max_document_bytes:
        yield _document_failure(
            doc_id, source, "too-large", f"{len(data)} bytes > {settings.max_document_bytes}"
        )
        return
    why = binary_reason(data)
    if why is not None:
        yield _document_failure(doc_id, source, "binary-source", f"{source or doc_id}: {why}")
        return
    yield from extract_document(_decode(data), doc_id, source, settings)
