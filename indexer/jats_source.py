"""Equations of JATS article XML: every ``disp-formula`` as an :class:`EquationRecord`.

A ``disp-formula`` may hold Presentation MathML (``mml:math``), LaTeX (``tex-math``, often a
whole ``\\documentclass`` document around one ``$$..$$``), or both inside ``alternatives``;
the record carries whichever it finds. ``doc_id`` is the article's DOI, PMC id or PMID (in that
order) and the file stem otherwise; ``position`` counts ``disp-formula`` elements in document
order; ``section`` is the title of the enclosing ``sec``; ``context`` the text around the
formula in its paragraph (``settings.context_chars`` each side).

Parsing is safe by construction: documents over ``settings.max_document_bytes`` are refused
before parsing (also after gunzip, which is read with a cap), a DOCTYPE that declares entities
(billion laughs, external entities such as ``file:///etc/passwd``) is refused without being
expanded, a DOCTYPE's network URL is never fetched (it is renamed before parsing, so an
article citing ``http://dtd.nlm.nih.gov/...`` still parses), and lxml runs with entity
resolution, DTD loading and network access off. Every
refusal is a :class:`Failure` with ``stage="extract"``; :func:`iter_jats` never raises for a
bad document.

Example::

    records = [r for r in iter_jats("articles/") if isinstance(r, EquationRecord)]
    first = records[0]  # .eq_id, .section, .latex or .mathml, .context
"""

from __future__ import annotations

import copy
import gzip
import html.entities
import logging
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from mathsearch.indexer.errors import ExtractionError, IndexerError, LimitExceeded
from mathsearch.indexer.mathml_reader import safe_xml_parser
from mathsearch.indexer.records import EquationRecord, Failure, excerpt, make_eq_id
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

#: ``pub-id-type`` values taken as the document id, in order of preference.
ID_TYPES = ("doi", "pmc", "pmcid", "pmid")
#: File names :func:`iter_jats` reads from a folder.
SUFFIXES = (".xml", ".nxml", ".xml.gz", ".nxml.gz")

_XML_DECL = re.compile(rb"^\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")
_DOCTYPE = re.compile(r"<!DOCTYPE", re.IGNORECASE)
_ENTITY_DECL = re.compile(r"<!ENTITY", re.IGNORECASE)
#: A network URL as the DOCTYPE's system id (``http://dtd.nlm.nih.gov/...`` in older NLM
#: articles): libxml2 refuses it under ``no_network`` (a parse error), so it is renamed first.
_DOCTYPE_URL = re.compile(
    rb"(<!DOCTYPE\s[^\[>]*?)([\"'])[A-Za-z][A-Za-z0-9+.-]*://[^\"'>]*\2", re.IGNORECASE
)
_DOCUMENT_BODY = re.compile(r"\\begin\{document\}(?P<body>.*?)(?:\\end\{document\}|\Z)", re.DOTALL)
_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_SECTION_TAGS = frozenset({"sec", "app"})


def safe_parser() -> etree.XMLParser:
    """The only parser JATS goes through: the MathML reader's (no entities, DTD or network)."""
    return safe_xml_parser()


def iter_jats(
    path: str | Path, settings: IndexerSettings | None = None
) -> Iterator[EquationRecord | Failure]:
    """Records of one JATS file (``.xml``, ``.nxml``, ``.xml.gz``) or every such file in a folder.

    A folder is read recursively in sorted order. One :class:`Failure` per unreadable document
    (``too-large``, ``invalid-utf8``, ``entity-declaration``, ``malformed-xml``, ...) or per
    ``disp-formula`` without math (``no-math``).
    """
    settings = settings or IndexerSettings()
    root = Path(path)
    if root.is_dir():
        files = sorted(
            p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(SUFFIXES)
        )
        logger.info("reading %d JATS file(s) under %s", len(files), root)
        for file in files:
            yield from _iter_file(file, settings)
    else:
        yield from _iter_file(root, settings)


def jats_records(
    data: bytes, doc_stem: str, source: str = "", settings: IndexerSettings | None = None
) -> Iterator[EquationRecord | Failure]:
    """Records of one JATS document given as bytes (``doc_stem``: the id when none is found)."""
    settings = settings or IndexerSettings()
    try:
        root = _parse(data, settings)
    except IndexerError as exc:
        logger.warning("refusing %s: %s", source or doc_stem, exc)
        yield _document_failure(doc_stem, source, exc.reason, str(exc))
        return
    yield from _records(root, doc_stem, source, settings)


def _iter_file(file: Path, settings: IndexerSettings) -> Iterator[EquationRecord | Failure]:
    stem = _stem(file)
    try:
        data = _read(file, settings.max_document_bytes)
    except IndexerError as exc:
        logger.warning("refusing %s: %s", file, exc)
        yield _document_failure(stem, str(file), exc.reason, str(exc))
        return
    yield from jats_records(data, stem, str(file), settings)


def _stem(file: Path) -> str:
    name = file.name
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or name
    return file.stem


def _read(file: Path, limit: int) -> bytes:
    """The file's bytes (gunzipped), refusing anything over ``limit`` bytes before parsing."""
    try:
        if file.name.lower().endswith(".gz"):
            with gzip.open(file, "rb") as handle:
                data = handle.read(limit + 1)
        else:
            size = file.stat().st_size
            if size > limit:
                raise LimitExceeded(f"{size} bytes, over the limit of {limit}")
            data = file.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise ExtractionError(f"cannot read {file}: {exc}", "unreadable-source") from exc
    if len(data) > limit:
        raise LimitExceeded(f"more than {limit} bytes after decompression")
    return data


def _parse(data: bytes, settings: IndexerSettings) -> etree._Element:
    """Parse ``data`` safely; :class:`IndexerError` (with its reason code) for any refusal."""
    limit = settings.max_document_bytes
    if len(data) > limit:
        raise LimitExceeded(f"{len(data)} bytes, over the limit of {limit}")
    declared = _XML_DECL.match(data)
    encoding = declared.group(1).decode("ascii").lower() if declared else "utf-8"
    try:
        text = data.decode(encoding)
    except LookupError as exc:
        raise ExtractionError(f"unknown encoding {encoding!r}", "invalid-encoding") from exc
    except UnicodeDecodeError as exc:
        utf8 = encoding.replace("-", "").replace("_", "") in {"utf8", "utf8sig"}
        raise ExtractionError(
            f"not valid {encoding} at byte {exc.start}: {exc.reason}",
            "invalid-utf8" if utf8 else "invalid-encoding",
        ) from exc
    # Entity declarations are refused before lxml sees them: nothing is ever expanded or fetched.
    if _DOCTYPE.search(text) and _ENTITY_DECL.search(text):
        raise ExtractionError(
            "the DOCTYPE declares entities (an XML bomb or external entity?); refused unparsed",
            "entity-declaration",
        )
    try:
        root = etree.fromstring(_DOCTYPE_URL.sub(rb'\1"external.dtd"', data, 1), safe_parser())
    except (etree.XMLSyntaxError, ValueError) as exc:  # ValueError: e.g. unsupported encoding
        raise ExtractionError(f"malformed XML: {exc}", "malformed-xml") from exc
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and any(True for _ in dtd.entities()):
        raise ExtractionError("the DOCTYPE declares entities; refused", "entity-declaration")
    return root


def _document_failure(doc_id: str, source: str, reason: str, detail: str) -> Failure:
    return Failure(
        eq_id=make_eq_id(doc_id, "*"),
        doc_id=doc_id,
        stage="extract",
        reason=reason,
        detail=detail,
        source=source,
    )


def _local(element: etree._Element) -> str:
    """Local name of an element ('' for comments, PIs and entity references)."""
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1] if tag.startswith("{") else tag.rsplit(":", 1)[-1]


def _entity_text(entity: etree._Entity) -> str:
    """The character(s) of an unresolved named entity reference (HTML5 / MathML names)."""
    text = html.entities.html5.get(f"{entity.name};", "")
    if not text:
        logger.debug("dropping unknown entity reference &%s;", entity.name)
    return text


def _pieces(
    node: etree._Element, skip: frozenset[str], target: etree._Element | None = None
) -> Iterator[str | None]:
    """Text of ``node`` in document order; ``None`` marks ``target`` (whose text is left out).

    Elements named in ``skip`` contribute nothing but their tail (the caller's loop adds it).
    Recursion is bounded: libxml2 refuses trees deeper than 256 without ``huge_tree``.
    """
    if node is target:
        yield None
        return
    if isinstance(node, etree._Entity):
        yield _entity_text(node)
        return
    name = _local(node)
    if not name or name in skip:
        return
    if node.text:
        yield node.text
    for child in node:
        yield from _pieces(child, skip, target)
        if child.tail:
            yield child.tail


def _plain(node: etree._Element, skip: frozenset[str] = frozenset()) -> str:
    return " ".join("".join(p for p in _pieces(node, skip) if p is not None).split())


def _raw(node: etree._Element) -> str:
    return "".join(p for p in _pieces(node, frozenset()) if p is not None)


def _records(
    root: etree._Element, doc_stem: str, source: str, settings: IndexerSettings
) -> Iterator[EquationRecord | Failure]:
    doc_id = _article_id(root) or doc_stem
    position = 0
    for element in root.iter():
        if _local(element) != "disp-formula":
            continue
        yield _formula(element, doc_id, position, source, settings)
        position += 1
    logger.debug("%s: %d disp-formula element(s)", doc_id, position)


def _article_id(root: etree._Element) -> str | None:
    meta = next((el for el in root.iter() if _local(el) == "article-meta"), None)
    scope = meta if meta is not None else root
    ids: dict[str, str] = {}
    for element in scope.iter():
        if _local(element) == "article-id":
            kind = (element.get("pub-id-type") or "").lower()
            value = _plain(element)
            if value and kind not in ids:
                ids[kind] = value
    return next((ids[kind] for kind in ID_TYPES if kind in ids), None)


def _first(element: etree._Element, name: str) -> etree._Element | None:
    return next((el for el in element.iterdescendants() if _local(el) == name), None)


def _formula(
    element: etree._Element, doc_id: str, position: int, source: str, settings: IndexerSettings
) -> EquationRecord | Failure:
    eq_id = make_eq_id(doc_id, position)
    math = _first(element, "math")
    tex = _first(element, "tex-math")
    mathml = serialise_math(math) if math is not None and len(math) else None
    latex = clean_tex_math(_raw(tex)) if tex is not None else None
    if not mathml and not latex:
        return Failure(
            eq_id=eq_id,
            doc_id=doc_id,
            stage="extract",
            reason="no-math",
            detail="disp-formula holds neither MathML nor tex-math (a graphic only?)",
            source=source,
            excerpt=excerpt(_plain(element)),
        )
    extra = {"xml_id": element.get("id")} if element.get("id") else {}
    return EquationRecord(
        eq_id=eq_id,
        doc_id=doc_id,
        position=position,
        latex=latex or None,
        mathml=mathml,
        section=_section(element),
        context=_context(element, settings.context_chars),
        source=source,
        extra=extra,
    )


def serialise_math(math: etree._Element) -> str:
    """The ``math`` element as a standalone string: its namespace kept, unused ones dropped."""
    clone = copy.deepcopy(math)
    clone.tail = None
    for entity in list(clone.iter(etree.Entity)):
        _replace_with_text(entity, _entity_text(entity))
    etree.cleanup_namespaces(clone)
    return etree.tostring(clone, encoding="unicode", with_tail=False)


def _replace_with_text(node: etree._Element, text: str) -> None:
    parent = node.getparent()
    if parent is None:
        return
    joined = text + (node.tail or "")
    previous = node.getprevious()
    if previous is not None:
        previous.tail = (previous.tail or "") + joined
    else:
        parent.text = (parent.text or "") + joined
    parent.remove(node)


def clean_tex_math(tex: str) -> str | None:
    """LaTeX of a ``tex-math``: the body of a wrapping document, without ``$``/``\\[`` fences.

    >>> clean_tex_math(r"\\documentclass{minimal}\\begin{document}$$E=mc^2$$\\end{document}")
    'E=mc^2'
    >>> clean_tex_math(r"\\[ a+b \\]")
    'a+b'
    """
    if "\\begin{document}" in tex:
        match = _DOCUMENT_BODY.search(tex)
        tex = match.group("body") if match else tex
    tex = tex.strip()
    for opening, closing in _DELIMITERS:
        if (
            len(tex) >= len(opening) + len(closing)
            and tex.startswith(opening)
            and tex.endswith(closing)
        ):
            inner = tex[len(opening) : -len(closing)]
            if opening not in inner.replace("\\$", "") and closing not in inner.replace("\\$", ""):
                tex = inner.strip()
                break
    return tex or None


def _section(element: etree._Element) -> str:
    for ancestor in element.iterancestors():
        if _local(ancestor) in _SECTION_TAGS:
            title = next((c for c in ancestor if _local(c) == "title"), None)
            if title is not None and (text := _plain(title)):
                return text
    return ""


_CONTEXT_SKIP = frozenset({"disp-formula", "math", "tex-math", "alternatives"})


def _context(element: etree._Element, chars: int) -> str:
    """Text of the enclosing paragraph (else the parent) around ``element``, ``chars`` a side."""
    if chars <= 0:
        return ""
    container = next((a for a in element.iterancestors() if _local(a) == "p"), None)
    if container is None:
        container = element.getparent()
    if container is None:
        return ""
    before: list[str] = []
    after: list[str] = []
    seen_target = False
    after_len = 0
    for piece in _pieces(container, _CONTEXT_SKIP, element):
        if piece is None:
            seen_target = True
            continue
        if not seen_target:
            before.append(piece)
            continue
        after.append(piece)
        after_len += len(piece)
        if after_len > 4 * chars + 64:
            break
    left = " ".join("".join(before).split())
    right = " ".join("".join(after).split())
    return " ".join(part for part in (_tail_words(left, chars), _head_words(right, chars)) if part)


def _tail_words(text: str, chars: int) -> str:
    """The last ``chars`` characters of ``text`` without a word cut in half at the start."""
    if len(text) <= chars:
        return text
    window = text[-chars:]
    if not text[-chars - 1].isspace() and " " in window:
        window = window.split(" ", 1)[1]
    return window.strip()


def _head_words(text: str, chars: int) -> str:
    """The first ``chars`` characters of ``text`` without a word cut in half at the end."""
    if len(text) <= chars:
        return text
    window = text[:chars]
    if not text[chars].isspace() and " " in window:
        window = window.rsplit(" ", 1)[0]
    return window.strip()
