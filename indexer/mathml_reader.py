"""MathML text -> :class:`~mathsearch.indexer.mathml_tree.MathNode` tree, parsed safely.

``parse_mathml`` reads what digital libraries and KaTeX actually emit and returns one tree rooted at
a ``math`` node, the structure every featurisation (graph, BoW, math tokens, symbols) works on:

- plain MathML with or without the MathML namespace, prefixed MathML (``<mml:math>``, even when
  the prefix is declared on an enclosing element that is not part of the input);
- KaTeX MathML: ``semantics`` is unwrapped and ``annotation`` / ``annotation-xml`` (the LaTeX
  source) are dropped, wherever they occur;
- KaTeX HTML output (``<span class="katex"><span class="katex-mathml"><math>...``): the first
  ``math`` element is cut out of the text before parsing (everything outside ``<math>...</math>``
  is discarded unparsed), and HTML named entities (``&nbsp;``, ``&InvisibleTimes;``) are turned
  into numeric character references, so no HTML parser is needed;
- a bare element (``<mrow>...</mrow>``) or several top-level elements: wrapped into ``math``.

Namespaces are stripped to local names. Content MathML elements are just elements. The
attributes of the ``math`` root are dropped (``display``, ``alttext``, ``altimg`` describe how the
formula sits in its document, not the formula); other elements keep all their attributes (the
vocabulary decides which ones become features). Text: the direct text of an element (its text
plus the tails of its children, for mixed content) has XML whitespace trimmed and runs collapsed
to one space, whitespace-only text is dropped, and the rest is NFC-normalised.

Safety (untrusted input; every failure is a typed :class:`~mathsearch.indexer.errors.IndexerError`):

=============================================  =====================  ================
check                                          exception              reason
=============================================  =====================  ================
input longer than ``max_equation_chars`` (the  ``LimitExceeded``      ``too-large``
MathML; a KaTeX HTML wrapper may be 16x that)
any ``<!DOCTYPE`` / ``<!ENTITY`` (XML bombs,   ``MathMLError``        ``forbidden-dtd``
external entities), rejected before parsing
element nesting deeper than ``max_depth``      ``LimitExceeded``      ``too-deep``
elements + text characters over ``max_nodes``  ``LimitExceeded``      ``too-many-nodes``
malformed XML, invalid UTF-8, no element       ``MathMLError``        ``invalid-mathml``
=============================================  =====================  ================

The lxml parser never resolves entities, loads DTDs or touches the network, keeps libxml2's own
limits (``huge_tree=False``: depth 256, bounded text nodes) and drops comments and processing
instructions. Parsers are kept per thread (lxml parsers are not thread-safe).
"""

from __future__ import annotations

import html.entities
import logging
import re
import threading
import unicodedata

from lxml import etree

from mathsearch.indexer.errors import LimitExceeded, MathMLError
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

__all__ = ["MATHML_NS", "parse_mathml", "safe_xml_parser"]

MATHML_NS = "http://www.w3.org/1998/Math/MathML"

#: A KaTeX HTML page carries its MathML plus a much longer HTML rendering.
_WRAPPER_FACTOR = 16
_DROPPED = frozenset({"annotation", "annotation-xml"})
_XML_ENTITIES = frozenset({"lt", "gt", "amp", "quot", "apos"})
_WRAP = "mathsearch-wrapper"

_FORBIDDEN = re.compile(r"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_MATH_OPEN = re.compile(r"<((?:[A-Za-z_][\w.-]*:)?math)(?=[\s/>])")
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_PREFIX = re.compile(r"[<\s/]([A-Za-z_][\w.-]*):[A-Za-z_]")
_NAMED_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
_XML_WS = re.compile(r"[ \t\n\r]+")

_local = threading.local()
_DEFAULT_SETTINGS = IndexerSettings()


def safe_xml_parser() -> etree.XMLParser:
    """The XML parser all untrusted input goes through (per thread): no entities, DTD, network."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = etree.XMLParser(
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            dtd_validation=False,
            huge_tree=False,
            remove_comments=True,
            remove_pis=True,
            collect_ids=False,
            recover=False,
        )
        _local.parser = parser
    return parser


def _decode(data: str | bytes) -> str:
    if isinstance(data, str):
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            return bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise MathMLError(f"MathML is not valid UTF-8: {exc}", "invalid-mathml") from exc
    raise TypeError(f"parse_mathml expects str or bytes, not {type(data).__name__}")


def _numeric_entity(match: re.Match[str]) -> str:
    name = match.group(1)
    if name in _XML_ENTITIES:
        return match.group(0)
    chars = html.entities.html5.get(name + ";")
    if chars is None:
        return match.group(0)  # undefined: the XML parser reports it
    return "".join(f"&#{ord(ch)};" for ch in chars)


def _math_snippet(text: str) -> str:
    """The first ``<math>...</math>`` element of ``text`` (text itself when it has none)."""
    match = _MATH_OPEN.search(text)
    if match is None:
        return _XML_DECL.sub("", text, count=1)
    close = text.find("</" + match.group(1), match.end())
    if close < 0:
        return text[match.start() :]
    end = text.find(">", close)
    return text[match.start() : (len(text) if end < 0 else end + 1)]


def _wrap(snippet: str) -> str:
    """Wrap in one synthetic root that binds every prefix used to the MathML namespace.

    Declarations inside the snippet override these; prefixes declared outside the input (JATS puts
    ``xmlns:mml`` on ``<article>``) still parse. The wrapper also admits several top-level nodes.
    """
    prefixes = set(_PREFIX.findall(snippet)) - {"xmlns", "xml"} if ":" in snippet else ()
    decls = "".join(f' xmlns:{prefix}="{MATHML_NS}"' for prefix in sorted(prefixes))
    return f"<{_WRAP}{decls}>{snippet}</{_WRAP}>"


def _clean(text: str | None) -> str | None:
    if not text:
        return None
    text = text.strip(" \t\n\r")
    if not text:
        return None
    if "  " in text or "\n" in text or "\t" in text or "\r" in text:
        text = _XML_WS.sub(" ", text)
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text


def _local_name(tag: str) -> str:
    return tag.rpartition("}")[2] if tag[0] == "{" else tag


def _direct_text(element: etree._Element) -> str | None:
    parts = [element.text] if element.text else []
    for child in element:
        if child.tail:
            parts.append(child.tail)
    if not parts:
        return None
    return _clean(parts[0] if len(parts) == 1 else "".join(parts))


def _attributes(element: etree._Element) -> dict[str, str] | None:
    if not len(element.attrib):
        return None
    return {_local_name(key): value for key, value in element.attrib.items()}


def _children(element: etree._Element) -> list[etree._Element]:
    """Element children, with ``semantics`` unwrapped and annotations dropped (iteratively)."""
    out: list[etree._Element] = []
    pending = list(reversed(element))
    while pending:
        child = pending.pop()
        tag = child.tag
        if not isinstance(tag, str):
            if isinstance(child, etree._Entity):
                raise MathMLError("entity references are not allowed", "forbidden-dtd")
            continue
        name = _local_name(tag)
        if name in _DROPPED:
            continue
        if name == "semantics":
            pending.extend(reversed(child))
            continue
        out.append(child)
    return out


def _convert(top: list[etree._Element], settings: IndexerSettings) -> MathNode:
    """lxml elements -> MathNode, iteratively, enforcing depth and node limits."""
    if len(top) == 1 and _local_name(top[0].tag) == "math":
        root = MathNode("math", text=_direct_text(top[0]))
        pending = [(child, root, 2) for child in reversed(_children(top[0]))]
    else:
        root = MathNode("math")
        pending = [(element, root, 2) for element in reversed(top)]
    max_depth, max_nodes = settings.max_depth, settings.max_nodes
    count = 1 + len(root.text or "")
    while pending:
        element, parent, depth = pending.pop()
        if depth > max_depth:
            raise LimitExceeded(f"MathML nesting is deeper than {max_depth} levels", "too-deep")
        text = _direct_text(element)
        node = MathNode(_local_name(element.tag), _attributes(element), None, text)
        count += 1 + (len(text) if text else 0)
        if count > max_nodes:
            raise LimitExceeded(f"MathML has more than {max_nodes} graph nodes", "too-many-nodes")
        parent.children.append(node)
        if len(element):
            pending.extend((child, node, depth + 1) for child in reversed(_children(element)))
    return root


def parse_mathml(text: str | bytes, settings: IndexerSettings | None = None) -> MathNode:
    """Parse MathML (or KaTeX HTML, or a bare MathML fragment) into a tree rooted at ``math``.

    >>> parse_mathml("<math><msup><mi>x</mi><mn>2</mn></msup></math>").children
    [MathNode('msup', 2 children)]

    ``settings`` default to ``IndexerSettings()`` (pass ``IndexerSettings.from_env()`` to honour
    the ``MATHSEARCH_*`` variables). Raises :class:`~mathsearch.indexer.errors.LimitExceeded`
    (``too-large``, ``too-deep``, ``too-many-nodes``) or
    :class:`~mathsearch.indexer.errors.MathMLError`
    (``invalid-mathml``, ``forbidden-dtd``); see the module docstring.
    """
    settings = settings or _DEFAULT_SETTINGS
    limit = settings.max_equation_chars
    if len(text) > limit * _WRAPPER_FACTOR:
        raise LimitExceeded(f"input of {len(text)} characters is too long", "too-large")
    decoded = _decode(text)
    if _FORBIDDEN.search(decoded):
        raise MathMLError("DOCTYPE and ENTITY declarations are not allowed", "forbidden-dtd")
    snippet = _math_snippet(decoded)
    if len(snippet) > limit:
        raise LimitExceeded(
            f"MathML of {len(snippet)} characters exceeds the limit of {limit}", "too-large"
        )
    if "&" in snippet:
        snippet = _NAMED_ENTITY.sub(_numeric_entity, snippet)
    try:
        wrapper = etree.fromstring(_wrap(snippet), safe_xml_parser())
    except etree.XMLSyntaxError as exc:
        message = str(exc)
        if "depth" in message.lower():
            raise LimitExceeded(f"MathML nesting is too deep: {message}", "too-deep") from exc
        raise MathMLError(f"malformed MathML: {message}", "invalid-mathml") from exc
    except (etree.LxmlError, ValueError) as exc:
        raise MathMLError(f"malformed MathML: {exc}", "invalid-mathml") from exc
    top = _children(wrapper)
    if not top:
        raise MathMLError("no MathML element in the input", "invalid-mathml")
    return _convert(top, settings)
