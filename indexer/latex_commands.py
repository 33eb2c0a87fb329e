r"""Handlers of the LaTeX commands that take arguments (``\frac``, ``\left``, ``\begin`` ...).

Each handler is ``handler(parser, name) -> MathNode | None`` and reads its arguments from the
parser's token stream; :data:`HANDLERS` maps command names (without the backslash) to them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mathsearch.indexer import latex_symbols as sym
from mathsearch.indexer.errors import ConversionError
from mathsearch.indexer.latex_parser import Parser, _mo, _row
from mathsearch.indexer.mathml_tree import MathNode

Handler = Callable[[Parser, str], "MathNode | None"]
HANDLERS: dict[str, Handler] = {}
_UNIT = re.compile(r"(?:em|ex|pt|pc|mm|cm|in|bp|dd|cc|sp|mu|fil+)")


def _register(*names: str) -> Callable[[Handler], Handler]:
    def wrap(func: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = func
        return func

    return wrap


@_register("frac", "dfrac", "tfrac", "cfrac")
def _frac(p: Parser, name: str) -> MathNode:
    if name == "cfrac":
        p.optional()
    numerator = p.argument()
    return MathNode("mfrac", children=[numerator, p.argument()])


@_register("binom", "dbinom", "tbinom")
def _binom(p: Parser, name: str) -> MathNode:
    top = p.argument()
    frac = MathNode("mfrac", {"linethickness": "0px"}, children=[top, p.argument()])
    return MathNode(
        "mrow", children=[_mo("(", {"fence": "true"}), frac, _mo(")", {"fence": "true"})]
    )


@_register("sqrt")
def _sqrt(p: Parser, name: str) -> MathNode:
    index = p.optional()
    body = p.argument()
    if index:
        return MathNode("mroot", children=[body, _row(index)])
    return MathNode("msqrt", children=[body])


@_register("left")
def _left(p: Parser, name: str) -> MathNode:
    nodes: list[MathNode] = []
    opening = p.delimiter()
    if opening:
        nodes.append(_mo(opening, {"fence": "true"}))
    while True:
        nodes.extend(p.parse_list(frozenset({"\\right"})))
        if p.i >= p.n or p.toks[p.i] != "\\middle":
            break
        p.i += 1
        nodes.append(_mo(p.delimiter(), {"fence": "true"}))
    if p.i < p.n and p.toks[p.i] == "\\right":
        p.i += 1
        closing = p.delimiter()
        if closing:
            nodes.append(_mo(closing, {"fence": "true"}))
    # Otherwise a \left whose \right is in another row of the source: keep what we have.
    return MathNode("mrow", children=nodes)


def _big(p: Parser, name: str) -> MathNode | None:
    char = p.delimiter() if p.i < p.n else ""
    if not char:
        return None
    size = sym.BIG_SIZES[name]
    return _mo(char, {"fence": "false", "stretchy": "true", "minsize": size, "maxsize": size})


for _name in sym.BIG_SIZES:
    HANDLERS[_name] = _big


def _accent(p: Parser, name: str) -> MathNode:
    char, stretchy = sym.ACCENTS[name]
    base = p.argument()
    if name in ("overbrace",):
        p.limits = True
    mark = _mo(char, {"stretchy": "true"}) if stretchy else _mo(char)
    return MathNode("mover", {"accent": "true"}, children=[base, mark])


def _under_accent(p: Parser, name: str) -> MathNode:
    base = p.argument()
    if name == "underbrace":
        p.limits = True
    mark = _mo(sym.UNDER_ACCENTS[name], {"stretchy": "true"})
    return MathNode("munder", {"accentunder": "true"}, children=[base, mark])


for _name in sym.ACCENTS:
    HANDLERS[_name] = _accent
for _name in sym.UNDER_ACCENTS:
    HANDLERS[_name] = _under_accent


@_register("stackrel", "overset", "buildrel")
def _overset(p: Parser, name: str) -> MathNode:
    top = p.argument()
    return MathNode("mover", children=[p.argument(), top])


@_register("underset")
def _underset(p: Parser, name: str) -> MathNode:
    bottom = p.argument()
    return MathNode("munder", children=[p.argument(), bottom])


def _font(p: Parser, name: str) -> MathNode:
    saved = p.variant
    p.variant = sym.FONT_COMMANDS[name]
    try:
        return p.argument()
    finally:
        p.variant = saved


for _name in sym.FONT_COMMANDS:
    HANDLERS[_name] = _font


def _text(p: Parser, name: str) -> MathNode | None:
    if name in ("makebox", "framebox"):
        p.optional()
        p.optional()
    text = p.raw_group().replace("$", "")
    text = " ".join(text.replace("~", " ").split())
    return MathNode("mtext", text=text) if text else None


for _name in sym.TEXT_COMMANDS:
    HANDLERS[_name] = _text


@_register("operatorname", "operatornamewithlimits", "DeclareMathOperator")
def _operatorname(p: Parser, name: str) -> MathNode:
    star = p.i < p.n and p.toks[p.i] == "*"
    if star:
        p.i += 1
    text = "".join(ch for ch in p.raw_group() if ch not in "\\{} ")
    p.apply_function = True
    p.limits = star or name == "operatornamewithlimits"
    return MathNode("mi", text=text or "op")


@_register("mathop")
def _mathop(p: Parser, name: str) -> MathNode:
    node = p.argument()
    p.limits = True
    return node


@_register(
    "mathbin",
    "mathrel",
    "mathord",
    "mathopen",
    "mathclose",
    "mathpunct",
    "mathinner",
    "llap",
    "rlap",
    "clap",
    "mathllap",
    "mathrlap",
    "mathclap",
    "smash",
    "lefteqn",
    "ensuremath",
    "underbar",
)
def _transparent(p: Parser, name: str) -> MathNode:
    return p.argument()


@_register("phantom", "hphantom", "vphantom")
def _phantom(p: Parser, name: str) -> MathNode:
    return MathNode("mphantom", children=[p.argument()])


@_register("boxed")
def _boxed(p: Parser, name: str) -> MathNode:
    return MathNode("menclose", {"notation": "box"}, children=[p.argument()])


@_register("cancel", "bcancel", "xcancel", "sout")
def _cancel(p: Parser, name: str) -> MathNode:
    notation = {"cancel": "updiagonalstrike", "bcancel": "downdiagonalstrike"}
    body = p.argument()
    return MathNode(
        "menclose", {"notation": notation.get(name, "horizontalstrike")}, children=[body]
    )


@_register("not")
def _not(p: Parser, name: str) -> MathNode | None:
    p.skip_spaces()
    if p.i >= p.n:
        raise ConversionError("\\not without a symbol", reason="missing-argument")
    tok = p.toks[p.i]
    if tok in ("}", "&", "\\\\", "\\end", "\\right"):  # {\not} alone: a bare slash
        return _mo("\u0338")
    p.i += 1
    node = p.atom(tok)
    if node is not None and node.text is not None:
        return MathNode(
            node.tag if node.tag == "mo" else "mo", node.attrs, text=node.text + "\u0338"
        )
    return node


@_register("color")
def _color(p: Parser, name: str) -> MathNode:
    colour = p.raw_group()
    inner = p.parse_list(frozenset())
    return MathNode("mstyle", {"mathcolor": colour}, children=inner)


@_register("textcolor", "colorbox")
def _textcolor(p: Parser, name: str) -> MathNode:
    colour = p.raw_group()
    return MathNode("mstyle", {"mathcolor": colour}, children=[p.argument()])


@_register("pmod", "pod")
def _pmod(p: Parser, name: str) -> MathNode:
    body = p.argument()
    inner = [_mo("(", {"stretchy": "false"})]
    if name == "pmod":
        inner += [MathNode("mi", text="mod"), MathNode("mspace", {"width": "0.3333em"})]
    return MathNode("mrow", children=[*inner, body, _mo(")", {"stretchy": "false"})])


@_register("bmod", "mod")
def _bmod(p: Parser, name: str) -> MathNode:
    return _mo("mod")


@_register(
    "xrightarrow",
    "xleftarrow",
    "xRightarrow",
    "xLeftarrow",
    "xleftrightarrow",
    "xmapsto",
    "xlongequal",
)
def _xarrow(p: Parser, name: str) -> MathNode:
    below = p.optional()
    above = p.argument()
    arrow = _mo(
        {
            "xrightarrow": "→",
            "xleftarrow": "←",
            "xRightarrow": "⇒",
            "xLeftarrow": "⇐",
            "xleftrightarrow": "↔",
            "xmapsto": "↦",
        }.get(name, "="),
        {"stretchy": "true"},
    )
    if below:
        return MathNode("munderover", children=[arrow, _row(below), above])
    return MathNode("mover", children=[arrow, above])


def _dimension(p: Parser) -> str:
    """Read a TeX dimension such as ``-2.5pt`` or ``3mu plus 1fil`` after ``\\hskip``."""
    text: list[str] = []
    p.skip_spaces()
    while p.i < p.n and len(text) < 8:
        tok = p.toks[p.i]
        if tok in ("-", "+", ".") or tok[0].isdigit():
            text.append(tok)
            p.i += 1
            continue
        if tok.isalpha() and len(tok) == 1:
            # Units are two letters (pt, em, mu ...), tokenized one letter at a time.
            word = "".join(p.toks[p.i : p.i + 2])
            if _UNIT.fullmatch(word):
                text.append(word)
                p.i += 2
        break
    return "".join(text) or "0em"


@_register("hspace", "hskip", "kern", "mkern", "mskip", "hglue", "mspace")
def _hspace(p: Parser, name: str) -> MathNode:
    if p.i < p.n and p.toks[p.i] == "*":
        p.i += 1
    width = p.raw_group() if name in ("hspace", "mspace") else _dimension(p)
    return MathNode("mspace", {"width": width.replace(" ", "")})


@_register("raise", "lower", "moveleft", "moveright")
def _raise(p: Parser, name: str) -> None:
    _dimension(p)


@_register("raisebox")
def _raisebox(p: Parser, name: str) -> MathNode | None:
    p.raw_group()
    p.optional()
    p.optional()
    return _text(p, "text")
