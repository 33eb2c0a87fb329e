r"""Handlers of tables: ``\begin{..}`` environments, plain-TeX ``\matrix{..}``, ``\substack``.

Rows end at ``\\`` or ``\cr``, cells at ``&``; the array-like environments of
:data:`mathsearch.indexer.latex_symbols.MATRIX_ENVIRONMENTS` become ``mtable`` (with fences for
``pmatrix`` and friends); any other environment is a ``ConversionError`` (``unknown-environment``).
"""

from __future__ import annotations

from collections.abc import Callable

from mathsearch.indexer import latex_symbols as sym
from mathsearch.indexer.errors import ConversionError
from mathsearch.indexer.latex_commands import Handler
from mathsearch.indexer.latex_parser import Parser, _mo, _row
from mathsearch.indexer.mathml_tree import MathNode

#: The table handlers; latex_to_mathml joins them to latex_commands.HANDLERS.
HANDLERS: dict[str, Handler] = {}


def _register(*names: str) -> Callable[[Handler], Handler]:
    def wrap(func: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = func
        return func

    return wrap


@_register("substack")
def _substack(p: Parser, name: str) -> MathNode:
    p.skip_spaces()
    if p.i >= p.n or p.toks[p.i] != "{":
        raise ConversionError("\\substack needs a {..} argument", reason="missing-argument")
    p.i += 1
    return _table(p, "}", ("", ""))


@_register("begin")
def _begin(p: Parser, name: str) -> MathNode:
    env = p.raw_group().strip()
    if env not in sym.MATRIX_ENVIRONMENTS:
        raise ConversionError(f"unknown environment {{{env}}}", reason="unknown-environment")
    if env in ("array", "darray", "subarray", "tabular"):
        p.optional()
    if env in sym.ENVIRONMENTS_WITH_SPEC:
        p.raw_group()
    return _table(p, env, sym.MATRIX_ENVIRONMENTS[env])


def _plain_matrix(p: Parser, name: str) -> MathNode:
    p.skip_spaces()
    if p.i >= p.n or p.toks[p.i] != "{":
        raise ConversionError(f"\\{name} needs a {{..}} argument", reason="missing-argument")
    p.i += 1
    return _table(p, "}", sym.PLAIN_MATRICES[name])


for _name in sym.PLAIN_MATRICES:
    HANDLERS[_name] = _plain_matrix


def _table(p: Parser, env: str, fences: tuple[str, str]) -> MathNode:
    """Rows and cells up to ``\\end{env}`` (or the closing brace when ``env`` is ``}``)."""
    p.enter()
    rows: list[MathNode] = []
    cells: list[MathNode] = []
    while True:
        cell = p.parse_list(frozenset())
        cells.append(MathNode("mtd", children=[_row(cell)] if cell else []))
        if p.i >= p.n:
            raise ConversionError(
                f"environment {env} is not closed", reason="mismatched-environment"
            )
        tok = p.toks[p.i]
        p.i += 1
        if tok == "&":
            continue
        if tok in ("\\\\", "\\cr"):
            p.optional()
            rows.append(MathNode("mtr", children=cells))
            cells = []
            continue
        if tok in ("\\right", "\\middle"):
            p.delimiter()
            continue
        if tok == "}" and env == "}":
            break
        if tok == "\\end" and env != "}":
            closing = p.raw_group().strip()
            if closing != env:
                raise ConversionError(
                    f"\\begin{{{env}}} ended by \\end{{{closing}}}", reason="mismatched-environment"
                )
            break
        raise ConversionError(f"unexpected {tok!r} in {env}", reason="unbalanced-braces")
    if any(cell.children for cell in cells) or not rows:
        rows.append(MathNode("mtr", children=cells))
    p.depth -= 1
    table = MathNode("mtable", children=rows)
    left, right = fences
    if not left and not right:
        return table
    nodes = [_mo(left, {"fence": "true"})] if left else []
    nodes.append(table)
    if right:
        nodes.append(_mo(right, {"fence": "true"}))
    return MathNode("mrow", children=nodes)
