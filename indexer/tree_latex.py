r"""LaTeX for a MathML (sub)tree: :func:`subtree_latex`, the inverse of the python converter for
the common presentation tags (what a wildcard hit's bindings show, and how patterns made from
equations are written back as queries). Query variables come out as ``\qvar{x}`` or ``?x``.
"""

from __future__ import annotations

import logging
import re

from mathsearch.indexer import latex_symbols as sym
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.query_variables import QVAR_TAG
from mathsearch.indexer.tree_shape import (
    BLANK,
    TRANSPARENT,
    is_glob,
    is_token,
    token_variant,
    unwrap,
)

logger = logging.getLogger(__name__)

__all__ = ["subtree_latex"]


def _reverse_symbols() -> dict[tuple[str, str, str | None], str]:
    table: dict[tuple[str, str, str | None], str] = {}
    for name, (tag, attrs, text, _) in sym.SYMBOL_COMMANDS.items():
        key = (tag, text, attrs.get("mathvariant") if attrs else None)
        if key not in table or len(name) < len(table[key]):
            table[key] = name
    return table


_SYMBOLS = _reverse_symbols()
_FONTS = {
    "normal": "mathrm",
    "bold": "mathbf",
    "italic": "mathit",
    "sans-serif": "mathsf",
    "monospace": "mathtt",
    "script": "mathcal",
    "double-struck": "mathbb",
    "fraktur": "mathfrak",
    "bold-italic": "boldsymbol",
}
_ACCENTS = {char: name for name, (char, wide) in reversed(sym.ACCENTS.items()) if not wide}
_ACCENTS.update({"‾": "overline", "⏞": "overbrace"})
_UNDER = {char: name for name, char in reversed(sym.UNDER_ACCENTS.items())}
_SPACE_NAMES = {"0.1667em": ",", "0.2222em": ":", "0.2778em": ";", "-0.1667em": "!"}
_SPACE_NAMES.update({"1em": "quad", "2em": "qquad", "0.5em": "enspace"})
_ENCLOSE = {"box": "boxed", "updiagonalstrike": "cancel", "downdiagonalstrike": "bcancel"}
_LIMIT_BASES = frozenset({*sym.LARGE_OPS.values(), *sym.LIMIT_FUNCTIONS})
_ESCAPED = frozenset("#$%&_{}")
_WORD_END = re.compile(r"\\[A-Za-z]+\Z")
_QUESTION_NAME = re.compile(r"[A-Za-z0-9]+")
_POINT = frozenset("." + d for d in "0123456789")


def _join(pieces: list[str]) -> str:
    out: list[str] = []
    for piece in pieces:
        if not piece:
            continue
        if out and piece[0].isalpha() and _WORD_END.search(out[-1]):
            out.append(" ")
        elif out and out[-1][-1].isdigit() and (piece[0].isdigit() or piece[:2] in _POINT):
            out.append("{" + piece + "}")  # 1 then 2 is not the number 12
            continue
        out.append(piece)
    return "".join(out)


def _char(node: MathNode) -> str:
    text = (node.text or "").strip()
    if len(text) == 1 and text.isascii() and text != "\\":
        return "\\" + text if text in _ESCAPED else text
    name = _SYMBOLS.get((node.tag, text, token_variant(node) if node.tag == "mi" else None))
    if name is None and node.tag != "mi":
        name = _SYMBOLS.get((node.tag, text, None))
    if name is not None:
        return "\\" + name
    if text == "mod":
        return "\\bmod"
    if len(text) > 1 and text.endswith("\u0338"):
        return "\\not" + _char(MathNode(node.tag, text=text[:-1]))
    if text in _ESCAPED:
        return "\\" + text
    return text


def _token(node: MathNode) -> str:
    tag, text = node.tag, (node.text or "").strip()
    if tag == "mo" and not text.translate(BLANK).strip():
        return ""
    if tag == "mi":
        variant = token_variant(node)
        if text.startswith("\\"):
            return text
        name = _SYMBOLS.get(("mi", text, variant))
        if name is not None:
            return "\\" + name
        if len(text) > 1 and variant is None and text.isalpha() and text.isascii():
            known = text in sym.FUNCTIONS or text in sym.LIMIT_FUNCTIONS
            return "\\" + text if known else f"\\operatorname{{{text}}}"
        if variant is not None and variant in _FONTS:
            body = text if text.isascii() and text.isalpha() else _char(MathNode("mi", text=text))
            return f"\\{_FONTS[variant]}{{{body}}}"
        return _char(node)
    if tag == "mtext":
        body = (node.text or "").replace("\u00a0", " ")
        if not body.strip():
            return "~"
        if body.count("{") != body.count("}"):
            body = body.replace("{", "").replace("}", "")
        return f"\\text{{{body}}}"
    if tag == "mspace":
        attrs = node.attrs or {}
        if attrs.get("linebreak"):
            return "\\\\"
        width = attrs.get("width", "")
        return "\\" + _SPACE_NAMES[width] if width in _SPACE_NAMES else f"\\hspace{{{width}}}"
    return _char(node)


def _delimiter(node: MathNode) -> str:
    text = (node.text or "").strip()
    if not text:
        return "."
    name = _SYMBOLS.get(("mo", text, None))
    if text in "()[]|/<>":
        return text
    return "\\" + name if name is not None else (("\\" + text) if text in "{}" else text)


def _group(node: MathNode, variables: str) -> str:
    """LaTeX of a script or argument, without double braces."""
    inner = unwrap(node)
    if inner.tag in TRANSPARENT and not _fenced(inner):
        return _join([_latex(c, variables) for c in inner.children])
    return _latex(inner, variables)


def _fenced(node: MathNode) -> bool:
    kids = node.children
    return bool(kids) and kids[0].tag == "mo" and (kids[0].attrs or {}).get("fence") == "true"


def _base(node: MathNode, variables: str) -> str:
    inner = unwrap(node)
    text = _latex(inner, variables)
    if is_token(inner) or _fenced(inner):
        return text
    return text if text.startswith("{") else "{" + text + "}"


def _scripts(node: MathNode, variables: str) -> str:
    kids = node.children
    base = _base(kids[0], variables)
    sub = sup = None
    if node.tag == "msub":
        sub = kids[1]
    elif node.tag == "msup":
        sup = kids[1]
    else:
        sub, sup = kids[1], kids[2]
    out = [base]
    if unwrap(kids[0]).text in _LIMIT_BASES and kids[0].tag == "mo":
        out.append("\\nolimits")
    if sup is not None:
        first = sup.children[0] if sup.tag == "mrow" and sup.children else sup
        if first.tag == "mo" and first.text and set(first.text) == {"′"}:
            out.append("'" * len(first.text))
            sup = MathNode("mrow", children=sup.children[1:]) if first is not sup else None
    if sub is not None:
        out.append("_{" + _group(sub, variables) + "}")
    if sup is not None:
        out.append("^{" + _group(sup, variables) + "}")
    return _join(out)


def _under_over(node: MathNode, variables: str) -> str:
    kids = node.children
    tag, attrs = node.tag, node.attrs or {}
    if tag == "mover" and attrs.get("accent") == "true" and kids[1].text in _ACCENTS:
        return f"\\{_ACCENTS[kids[1].text or '']}{{{_group(kids[0], variables)}}}"
    under_accent = kids[1].text in _UNDER and (attrs.get("accentunder") or kids[1].text in "⏟‾")
    if tag == "munder" and under_accent:
        return f"\\{_UNDER[kids[1].text or '']}{{{_group(kids[0], variables)}}}"
    base = unwrap(kids[0])
    if base.text is not None and base.text.strip() in _LIMIT_BASES:
        head = _latex(base, variables) + "\\limits"
    elif tag == "mover":
        return f"\\overset{{{_group(kids[1], variables)}}}{{{_group(kids[0], variables)}}}"
    elif tag == "munder":
        return f"\\underset{{{_group(kids[1], variables)}}}{{{_group(kids[0], variables)}}}"
    else:
        head = f"\\mathop{{{_group(kids[0], variables)}}}\\limits"
    under = kids[1] if tag in ("munder", "munderover") else None
    over = kids[2] if tag == "munderover" else (kids[1] if tag == "mover" else None)
    out = [head]
    if under is not None:
        out.append("_{" + _group(under, variables) + "}")
    if over is not None:
        out.append("^{" + _group(over, variables) + "}")
    return _join(out)


def _row(node: MathNode, variables: str, braces: bool) -> str:
    kids = node.children
    if _fenced(node):
        out = ["\\left" + _delimiter(kids[0])]
        inner = kids[1:]
        closing = "."
        last = inner[-1] if inner else None
        if last is not None and last.tag == "mo" and (last.attrs or {}).get("fence") == "true":
            closing = _delimiter(last)
            inner = inner[:-1]
        for child in inner:
            if child.tag == "mo" and (child.attrs or {}).get("fence") == "true":
                out.append("\\middle" + _delimiter(child))
            else:
                out.append(_latex(child, variables))
        out.append("\\right" + closing)
        return _join(out)
    body = _join([_latex(c, variables) for c in kids])
    return "{" + body + "}" if braces else body


def _table(node: MathNode, variables: str) -> str:
    rows = []
    for row in node.children:
        cells = row.children[1:] if row.tag == "mlabeledtr" else row.children
        rows.append(" & ".join(_join([_group(k, variables) for k in c.children]) for c in cells))
    return "\\begin{matrix}" + " \\\\ ".join(rows) + "\\end{matrix}"


def _variable(name: str, variables: str) -> str:
    if variables == "question" and _QUESTION_NAME.fullmatch(name):
        return "?" + name
    return f"\\qvar{{{name}}}"


def _latex(node: MathNode, variables: str, braces: bool = True) -> str:
    tag, kids = node.tag, node.children
    if tag == QVAR_TAG:
        return _variable((node.text or "").strip(), variables)
    if is_glob(node):
        body = " ".join(
            _variable((c.text or "").strip(), variables) if c.tag == QVAR_TAG else c.text or ""
            for c in kids
        )
        return f"\\text{{{' '.join(body.split())}}}"
    if is_token(node) or tag == "mspace":
        return _token(node)
    if tag == "math":
        return _join([_latex(c, variables, False) for c in kids])
    if tag in ("mrow", "mstyle", "mpadded"):
        return _row(node, variables, braces)
    if tag in ("msub", "msup", "msubsup") and len(kids) >= (3 if tag == "msubsup" else 2):
        return _scripts(node, variables)
    if tag in ("mover", "munder", "munderover") and len(kids) >= (3 if tag == "munderover" else 2):
        return _under_over(node, variables)
    if tag == "mfrac" and len(kids) == 2:
        num, den = _group(kids[0], variables), _group(kids[1], variables)
        if (node.attrs or {}).get("linethickness", "").startswith("0"):
            return f"{{{num} \\atop {den}}}"
        return f"\\frac{{{num}}}{{{den}}}"
    if tag == "msqrt":
        return "\\sqrt{" + _join([_group(c, variables) for c in kids]) + "}"
    if tag == "mroot" and len(kids) == 2:
        return f"\\sqrt[{_group(kids[1], variables)}]{{{_group(kids[0], variables)}}}"
    if tag == "mtable":
        return _table(node, variables)
    if tag == "mphantom":
        return "\\phantom{" + _join([_latex(c, variables) for c in kids]) + "}"
    if tag == "menclose":
        command = _ENCLOSE.get((node.attrs or {}).get("notation", ""), "boxed")
        return f"\\{command}{{" + _join([_latex(c, variables) for c in kids]) + "}"
    if not kids:
        return _char(node)
    return "{" + _join([_latex(c, variables) for c in kids]) + "}"


def subtree_latex(node: MathNode, *, variables: str = "qvar") -> str:
    r"""LaTeX for a MathML (sub)tree, best effort: what the python converter reads back into an
    equal tree for the common presentation tags; variables as ``\qvar{x}`` (``variables="qvar"``)
    or ``?x`` (``"question"``, names that are not letters and digits stay ``\qvar``).

    >>> from mathsearch.indexer.latex_to_mathml import latex_to_mathml
    >>> subtree_latex(latex_to_mathml(r"\frac{\alpha_1}{\sqrt{x}} \leq \sum_{i} x_i'").tree)
    "\\frac{\\alpha_{1}}{\\sqrt{x}}\\le\\sum\\limits_{i}x'_{i}"
    """
    try:
        top = node.children[0] if node.tag == "math" and len(node.children) == 1 else node
        if top.tag in ("mrow", "mstyle", "mpadded") and not _fenced(top):
            return _join([_latex(c, variables) for c in top.children])
        return _latex(top, variables)
    except RecursionError:
        logger.debug("subtree_latex: tree too deep, texts only")
        return " ".join(n.text for n in node.iter() if n.text)
