"""Equations from JSON Lines (``.jsonl`` or ``.jsonl.gz``), and the JSONL writer of records.

Each line is one JSON object of one of two shapes, detected per line:

* an **equation**: has ``latex`` and/or ``mathml``; optional ``eq_id``, ``doc_id``,
  ``position``, ``section``, ``context``, ``source`` (any other key lands in ``extra``).
  Missing ids are derived: ``doc_id`` defaults to the file stem and ``position`` to the line
  index (0-based); ``eq_id`` is ``make_eq_id(doc_id, position)`` when the line names its
  document and ``content_id(latex or mathml)`` when it does not.
* a **document**: has ``text`` (or ``body``) and ``doc_id`` (or ``id``), optionally
  ``section``; its LaTeX goes through :func:`equations_in_text` (the ``.tex`` path: display
  math found by :mod:`mathsearch.indexer.display_math`, context windows of
  ``settings.context_chars``
  characters each side, section titles from ``\\section``).

A bad line (invalid UTF-8, bad JSON, not an object, longer than
``settings.max_document_bytes``, a field of the wrong type) becomes a :class:`Failure` with
``stage="extract"`` and its line number in ``detail``; :func:`iter_jsonl` never raises.

Example::

    from mathsearch.indexer.jsonl_source import iter_jsonl, write_jsonl
    write_jsonl(iter_jsonl("corpus.jsonl.gz"), "equations.jsonl")
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import sys
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from mathsearch.indexer.errors import ExtractionError
from mathsearch.indexer.records import (
    EquationRecord,
    Failure,
    content_id,
    excerpt,
    make_eq_id,
    storable_id,
)
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

EQUATION_KEYS = ("latex", "mathml")
DOCUMENT_TEXT_KEYS = ("text", "body")
DOCUMENT_ID_KEYS = ("doc_id", "id")
_RECORD_FIELDS = frozenset(EquationRecord.__dataclass_fields__)
_DRAIN_CHUNK = 1 << 20


def iter_jsonl(
    path: str | Path, settings: IndexerSettings | None = None
) -> Iterator[EquationRecord | Failure]:
    """Equation records of every line of ``path`` (``.jsonl``, ``.jsonl.gz``; see module doc)."""
    settings = settings or IndexerSettings()
    path = Path(path)
    stem = _stem(path)
    source = str(path)
    try:
        handle = _open(path)
    except OSError as exc:
        detail = f"cannot open {path}: {exc}"
        yield _failure(stem, "*", "unreadable-source", detail, source=source)
        return
    with handle:
        try:
            for lineno, raw in _lines(handle, settings.max_document_bytes):
                yield from _line_records(raw, lineno, stem, source, settings)
        except (OSError, EOFError, zlib.error) as exc:
            logger.warning("stopped reading %s: %s", path, exc)
            detail = f"cannot read {path}: {exc}"
            yield _failure(stem, "*", "unreadable-source", detail, source=source)


def _open(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if _is_gzip(path) else path.open("rb")


def _is_gzip(path: Path) -> bool:
    return path.name.lower().endswith(".gz")


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".jsonl.gz", ".json.gz", ".ndjson.gz", ".gz", ".jsonl", ".ndjson", ".json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return path.stem or name


def _lines(handle: io.BufferedIOBase, limit: int) -> Iterator[tuple[int, bytes | None]]:
    """``(line number from 1, bytes without the newline)``; ``None`` for a line over ``limit``.

    Memory stays bounded by ``limit``: the rest of an overlong line is read and dropped in
    chunks.
    """
    lineno = 0
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        lineno += 1
        if line.endswith(b"\n"):
            yield lineno, line[:-1]
            continue
        if len(line) <= limit:  # the last line, without a newline
            yield lineno, line
            return
        while True:
            chunk = handle.readline(_DRAIN_CHUNK)
            if not chunk or chunk.endswith(b"\n"):
                break
        yield lineno, None


def _failure(
    doc_id: str, where: int | str, reason: str, detail: str, *, source: str, text: str = ""
) -> Failure:
    label = f"line-{where}" if isinstance(where, int) else where
    return Failure(
        eq_id=make_eq_id(doc_id, label),
        doc_id=doc_id,
        stage="extract",
        reason=reason,
        detail=detail,
        source=source,
        excerpt=excerpt(text),
    )


def _line_records(
    raw: bytes | None, lineno: int, stem: str, source: str, settings: IndexerSettings
) -> Iterator[EquationRecord | Failure]:
    where = f"{source}:{lineno}"
    if raw is None:
        limit = settings.max_document_bytes
        detail = f"line {lineno}: over {limit} bytes"
        yield _failure(stem, lineno, "too-large", detail, source=where)
        return
    if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        detail = f"line {lineno}: invalid UTF-8 at byte {exc.start} ({exc.reason})"
        yield _failure(stem, lineno, "invalid-utf8", detail, source=where)
        return
    if not line.strip():
        return
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        detail = f"line {lineno}: invalid JSON ({exc})"
        yield _failure(stem, lineno, "invalid-json", detail, source=where, text=line)
        return
    if not isinstance(obj, dict):
        detail = f"line {lineno}: a JSON {type(obj).__name__}, not an object"
        yield _failure(stem, lineno, "not-an-object", detail, source=where, text=line)
        return
    try:
        if any(key in obj for key in EQUATION_KEYS):
            yield _equation(obj, lineno, stem, where)
        elif any(key in obj for key in DOCUMENT_TEXT_KEYS):
            yield from _document(obj, lineno, where, settings)
        else:
            keys = ", ".join(EQUATION_KEYS + DOCUMENT_TEXT_KEYS)
            raise ExtractionError(f"line {lineno}: none of {keys}", "unknown-shape")
    except ExtractionError as exc:
        doc_id = _line_doc_id(obj, stem)
        yield _failure(doc_id, lineno, exc.reason, str(exc), source=where, text=line)


def _line_doc_id(obj: dict[str, Any], stem: str) -> str:
    for key in DOCUMENT_ID_KEYS:
        value = obj.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return stem


def _field(
    obj: dict[str, Any], key: str, kinds: tuple[type, ...], lineno: int, default: Any = None
) -> Any:
    """``obj[key]`` when it has one of ``kinds`` (bool is never an int); the default if absent."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, kinds):
        names = " or ".join(kind.__name__ for kind in kinds)
        raise ExtractionError(
            f"line {lineno}: {key!r} must be {names}, not {type(value).__name__}", "invalid-field"
        )
    return value


def _equation(obj: dict[str, Any], lineno: int, stem: str, source: str) -> EquationRecord:
    latex = _field(obj, "latex", (str,), lineno)
    mathml = _field(obj, "mathml", (str,), lineno)
    if not (latex or "").strip() and not (mathml or "").strip():
        raise ExtractionError(f"line {lineno}: empty latex and mathml", "empty-equation")
    named_doc = _field(obj, "doc_id", (str, int), lineno)
    doc_id = str(named_doc) if named_doc is not None and str(named_doc) else stem
    position = _field(obj, "position", (int,), lineno, default=lineno - 1)
    if position < 0:
        raise ExtractionError(f"line {lineno}: negative position {position}", "invalid-field")
    eq_id = _field(obj, "eq_id", (str, int), lineno)
    if eq_id is None or not str(eq_id):
        has_doc = named_doc is not None and str(named_doc)
        eq_id = make_eq_id(doc_id, position) if has_doc else content_id(latex or mathml)
    extra = {key: value for key, value in obj.items() if key not in _RECORD_FIELDS}
    nested = _field(obj, "extra", (dict,), lineno, default={})
    keywords = {**nested, **extra}.get("keywords")
    if keywords is not None and not _strings(keywords):
        detail = f"line {lineno}: 'keywords' must be a string or a list of strings"
        raise ExtractionError(detail, "invalid-field")
    return EquationRecord(
        eq_id=storable_id(str(eq_id)),
        doc_id=doc_id,
        position=position,
        latex=latex or None,
        mathml=mathml or None,
        section=_field(obj, "section", (str,), lineno, default=""),
        context=_field(obj, "context", (str,), lineno, default=""),
        source=_field(obj, "source", (str,), lineno, default=source),
        extra={**nested, **extra},
    )


def _strings(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    )


def _document(
    obj: dict[str, Any], lineno: int, source: str, settings: IndexerSettings
) -> Iterator[EquationRecord | Failure]:
    key = next(key for key in DOCUMENT_TEXT_KEYS if key in obj)
    text = _field(obj, key, (str,), lineno, default="")
    raw_id = next((obj[k] for k in DOCUMENT_ID_KEYS if obj.get(k) is not None), None)
    if raw_id is None:
        raise ExtractionError(
            f"line {lineno}: a document ({key!r}) without 'doc_id' or 'id'", "missing-doc-id"
        )
    id_key = next(k for k in DOCUMENT_ID_KEYS if obj.get(k) is not None)
    doc_id = str(_field(obj, id_key, (str, int), lineno))
    section = _field(obj, "section", (str,), lineno, default="")
    yield from equations_in_text(text, doc_id, source=source, section=section, settings=settings)


def equations_in_text(
    text: str,
    doc_id: str,
    *,
    source: str = "",
    section: str = "",
    settings: IndexerSettings | None = None,
) -> Iterator[EquationRecord | Failure]:
    """Records of the display equations in the LaTeX ``text`` of document ``doc_id``.

    The text goes through the same path as a ``.tex`` file
    (:func:`mathsearch.indexer.tex_source.extract_document`: comments masked, user macros expanded,
    display math found by :mod:`mathsearch.indexer.display_math`, rows split, section titles and
    context
    windows of ``settings.context_chars`` each side); ``section`` is used for equations outside
    any ``\\section``. Positions count the equations from 0. Also the OpenSearch "text" mode.
    An unexpected error inside the extractor becomes one failure record, never an exception.
    """
    from mathsearch.indexer.tex_source import extract_document

    settings = settings or IndexerSettings()
    if len(text.encode("utf-8", "surrogatepass")) > settings.max_document_bytes:
        detail = f"text of {doc_id} over {settings.max_document_bytes} bytes"
        yield _failure(doc_id, "*", "too-large", detail, source=source)
        return
    try:
        for item in extract_document(text, doc_id, source, settings):
            if isinstance(item, EquationRecord) and section and not item.section:
                item.section = section
            yield item
    except Exception as exc:  # errors are data: one bad document never stops a batch
        logger.exception("extraction of %s failed", doc_id)
        reason = getattr(exc, "reason", "internal-error")
        detail = f"extraction failed: {type(exc).__name__}: {exc}"
        yield _failure(doc_id, "*", reason, detail, source=source, text=text)


def write_jsonl(
    records: Iterable[EquationRecord | Failure | dict[str, Any]],
    path_or_file: str | Path | IO[str] | IO[bytes],
) -> int:
    """Write one JSON object per record (``to_dict``); ``"-"`` is stdout, ``.gz`` is gzipped.

    Returns how many lines were written. A file object passed in is flushed, not closed.
    """
    if isinstance(path_or_file, str | Path):
        if str(path_or_file) == "-":
            return _write_lines(records, sys.stdout)
        path = Path(path_or_file)
        if _is_gzip(path):
            with gzip.open(path, "wt", encoding="utf-8", newline="\n") as handle:
                return _write_lines(records, handle)
        with path.open("w", encoding="utf-8", newline="\n") as handle:
            return _write_lines(records, handle)
    return _write_lines(records, path_or_file)


def _write_lines(
    records: Iterable[EquationRecord | Failure | dict[str, Any]], handle: IO[Any]
) -> int:
    binary = isinstance(handle, io.RawIOBase | io.BufferedIOBase) or "b" in str(
        getattr(handle, "mode", "")
    )
    count = 0
    for record in records:
        data = record if isinstance(record, dict) else record.to_dict()
        line = json.dumps(data, ensure_ascii=False)
        try:
            encoded = line.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: escape them rather than fail the batch
            line = json.dumps(data, ensure_ascii=True)
            encoded = line.encode("utf-8")
        handle.write(encoded + b"\n" if binary else line + "\n")
        count += 1
    handle.flush()
    return count
