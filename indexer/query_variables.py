r"""Query variables (wildcards) in LaTeX queries: ``\qvar{name}`` (NTCIR) and ``?name``.

A query variable stands for one sub-expression (:mod:`mathsearch.indexer.unify` says how it
binds). :func:`parse_pattern` turns a query into a :class:`Pattern`: its MathML tree, converted
by the one featurisation (:class:`~mathsearch.indexer.parse.Featuriser`, docs/architecture.md,
rule 2), in which every variable is a node of its own, ``MathNode(QVAR_TAG, text=name)``.

Syntax (the spec):

- ``\qvar{name}``: the NTCIR / Approach Zero form. ``name`` is the brace content stripped of
  spaces, anything without braces (NTCIR writes ``\qvar{*1*}``); a name that is one control word
  is that word without its backslash (``\qvar{\alpha}`` is ``alpha``). ``\qvar{}``, ``\qvar``
  without a brace argument and nested braces are ``bad-variable``.
- ``?name``: ``?`` directly followed by letters and digits (``?x``, ``?x1``, ``?ab`` is ONE
  variable ``ab``; write ``?a?b`` or ``?a ?b`` for two), or by one control word (``?\alpha``
  is the variable ``alpha``). ``?x_1`` is the variable ``x`` with the subscript 1.
- ``\qvar{x}``, ``\qvar{ x }`` and ``?x`` are the same variable.
- A ``?`` followed by ``_``, ``^``, ``{`` or ``'`` is ``bad-variable`` (a script or group
  with no name to hang on). Any other ``?`` (at the end, before a space, ``}`` or an operator)
  is a literal question mark, as real ARQMath topics end with one (``f\circ g = g\circ f?``);
  ``\?`` is always literal.

Conversion: each variable occurrence is replaced by the placeholder ``{\text{QvarPH<k>X}}``
(``k`` = the variable's index) before conversion. Both converters (python and KaTeX) turn it
into exactly one ``mtext`` node wherever an argument may stand (sub/superscripts, ``\frac``
arguments, ``f(?x)``, accents, table cells, inside ``\mathbf{..}``), which is then replaced by
the ``qvar`` node. A variable inside text (``\text{Frequency \qvar{a}}``, NTCIR topic 23)
becomes an ``mrow`` marked with :data:`QVAR_TEXT_ATTR` holding ``mtext`` pieces and ``qvar``
nodes; :mod:`~mathsearch.indexer.unify` matches it as a text glob. A variable that conversion
swallows (``\operatorname{?f}``, ``\label{?x}``) is ``bad-variable``.

The first stage's inputs:

- ``neutral_latex``: every variable replaced by a plain italic identifier, one letter per name
  (repeats keep their letter), chosen among letters the query does not use (``x y z a b c ...``).
  An identifier is the most frequent leaf of real equations, so the encoders see an ordinary
  node where the variable was; ``\square`` or ``\ast`` would be rare operator nodes that pull
  neighbours with boxes and stars.
- ``structure_tokens``: :func:`~mathsearch.indexer.lexical.math_tokens` of the tree without the
  tokens that involve a variable (its label, pairs and paths through it, ``x>qvar`` tag pairs).

>>> find_variables(r"\qvar{x}^2 + ?y = ?x")
['x', 'y']
>>> to_qvar_syntax(r"?f(?x) + 1?")
'\\qvar{f}(\\qvar{x}) + 1?'
"""

from __future__ import annotations

import logging
import re
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mathsearch.indexer.errors import ConversionError, IndexerError
from mathsearch.indexer.lexical import math_tokens
from mathsearch.indexer.mathml_tree import MathNode

if TYPE_CHECKING:
    from mathsearch.indexer.parse import Featuriser

logger = logging.getLogger(__name__)

__all__ = [
    "QVAR_TAG",
    "QVAR_TEXT_ATTR",
    "Pattern",
    "QueryVariableError",
    "find_variables",
    "has_variables",
    "parse_pattern",
    "to_qvar_syntax",
]

#: Tag of a query variable node; its ``text`` is the variable's name.
QVAR_TAG = "qvar"
#: Attribute of an ``mrow`` that is text with variables in it (mtext pieces and qvar nodes).
QVAR_TEXT_ATTR = "data-qvar-text"

_SCAN = re.compile(r"\\qvar(?![A-Za-z@])|\\[A-Za-z@]+|\\.|\?", re.DOTALL)
_QVAR_ARG = re.compile(r"\s*\{([^{}]*)\}")
_QUESTION_NAME = re.compile(r"[A-Za-z0-9]+|\\[A-Za-z]+")
_CONTROL_WORD = re.compile(r"\\([A-Za-z]+)")
_ENDS_WITH_WORD = re.compile(r"\\[A-Za-z]+\Z")
_NO_NAME = frozenset("_^{'")
_NEUTRAL_LETTERS = "xyzabcuvwstpqrmnkhgfdejl"
_ROWS = frozenset({"math", "mrow", "mstyle", "mpadded"})
_SPACES = frozenset({"mspace"})
_BLANK = str.maketrans(dict.fromkeys("\u2061\u2062\u2063\u2064\u200b\u00a0"))
_SENTINEL = "QVAR\u2047"


class QueryVariableError(IndexerError):
    """A query whose variables cannot be used: ``reason`` is ``only-wildcards`` (nothing but
    variables) or ``bad-variable`` (malformed syntax, or a variable conversion swallowed)."""

    reason = "bad-variable"


@dataclass(frozen=True)
class _Occurrence:
    start: int
    end: int
    name: str


def _name_of(raw: str) -> str:
    name = raw.strip()
    word = _CONTROL_WORD.fullmatch(name)
    return word.group(1) if word else name


def _scan(latex: str) -> list[_Occurrence]:
    """The variable occurrences of ``latex`` in order; raises on malformed syntax."""
    found: list[_Occurrence] = []
    for m in _SCAN.finditer(latex):
        if found and m.start() < found[-1].end:
            continue  # inside the braces of a \qvar{..} just read
        token = m.group()
        if token == "\\qvar":
            arg = _QVAR_ARG.match(latex, m.end())
            if arg is None:
                raise QueryVariableError(
                    f"\\qvar at {m.start()} needs a name in braces without nested braces, "
                    "e.g. \\qvar{x}",
                    "bad-variable",
                )
            name = _name_of(arg.group(1))
            if not name:
                raise QueryVariableError(f"\\qvar{{}} at {m.start()} has no name", "bad-variable")
            found.append(_Occurrence(m.start(), arg.end(), name))
        elif token == "?":
            named = _QUESTION_NAME.match(latex, m.end())
            if named is not None:
                found.append(_Occurrence(m.start(), named.end(), _name_of(named.group())))
            elif latex[m.end() : m.end() + 1] in _NO_NAME and m.end() < len(latex):
                raise QueryVariableError(
                    f"? at {m.start()} is followed by {latex[m.end()]!r}, not a name "
                    "(write ?x or \\qvar{x})",
                    "bad-variable",
                )
    return found


def _names(found: list[_Occurrence]) -> list[str]:
    return list(dict.fromkeys(item.name for item in found))


def find_variables(latex: str) -> list[str]:
    r"""The names of the query variables, in order of first appearance (both syntaxes).

    Raises:
        QueryVariableError: ``bad-variable`` for malformed syntax (``\qvar{}``, ``?_1``).

    >>> find_variables(r"\frac{?a}{\qvar{*1*}} + ?\alpha + ?a")
    ['a', '*1*', 'alpha']
    """
    return _names(_scan(latex))


def has_variables(latex: str) -> bool:
    """Whether ``latex`` holds at least one query variable (malformed ones count as variables:
    :func:`parse_pattern` will then say what is wrong).

    >>> has_variables("x^2 + ?y"), has_variables(r"\\sqrt{2i-1}?")
    (True, False)
    """
    try:
        return bool(_scan(latex))
    except QueryVariableError:
        return True


def _replace(latex: str, found: list[_Occurrence], texts: dict[str, str]) -> str:
    out: list[str] = []
    at = 0
    for item in found:
        piece = texts[item.name]
        before = latex[at : item.start]
        out.append(before)
        if piece[:1].isalpha() and _ENDS_WITH_WORD.search(before):
            out.append(" ")  # after a control word: \cos?x -> \cos x, not \cosx
        out.append(piece)
        at = item.end
    out.append(latex[at:])
    return "".join(out)


def to_qvar_syntax(latex: str) -> str:
    r"""``latex`` with every variable written ``\qvar{name}`` (the NTCIR form Approach Zero
    reads); literal question marks are kept.

    >>> to_qvar_syntax(r"\frac{?a}{\qvar{ b }} + ?\alpha")
    '\\frac{\\qvar{a}}{\\qvar{b}} + \\qvar{alpha}'
    """
    found = _scan(latex)
    return _replace(latex, found, {name: f"\\qvar{{{name}}}" for name in _names(found)})


@dataclass(frozen=True)
class Pattern:
    """A parsed query with variables (see the module docstring for the fields' rules).

    ``tree`` has the shape of :attr:`ParsedEquation.tree` (``math`` > ``mrow`` > ...) with every
    variable a ``MathNode(QVAR_TAG, text=name)``; ``variables`` are the names in order of first
    appearance; ``neutral_latex`` and ``structure_tokens`` feed the first stage.
    """

    latex: str
    tree: MathNode
    variables: tuple[str, ...]
    neutral_latex: str
    structure_tokens: tuple[str, ...]


def _placeholder_prefix(latex: str) -> str:
    prefix = "QvarPH"
    while prefix in latex:
        prefix += "Q"
    return prefix


def _text_pieces(text: str, finder: re.Pattern[str], names: list[str]) -> list[MathNode]:
    nodes: list[MathNode] = []
    at = 0
    for m in finder.finditer(text):
        if text[at : m.start()].strip():
            nodes.append(MathNode("mtext", text=text[at : m.start()]))
        nodes.append(MathNode(QVAR_TAG, text=names[int(m.group(1) or m.group(2))]))
        at = m.end()
    if text[at:].strip():
        nodes.append(MathNode("mtext", text=text[at:]))
    return nodes


def _mark_variables(tree: MathNode, prefix: str, names: list[str]) -> tuple[MathNode, set[str]]:
    """A copy of ``tree`` with the placeholders replaced by variable nodes; the names seen."""
    exact = re.compile(re.escape(prefix) + r"(\d+)X")
    inner = re.compile(r"\{?\\text\{" + re.escape(prefix) + r"(\d+)X\}\}?|" + exact.pattern)
    seen: set[str] = set()

    def copy(node: MathNode) -> MathNode:
        text = node.text
        if text is not None and prefix in text:
            whole = exact.fullmatch(text.strip())
            if node.tag == "mtext" and whole is not None:
                name = names[int(whole.group(1))]
                seen.add(name)
                return MathNode(QVAR_TAG, text=name)
            if node.tag == "mtext":
                pieces = _text_pieces(text, inner, names)
                seen.update(p.text or "" for p in pieces if p.tag == QVAR_TAG)
                return MathNode("mrow", {QVAR_TEXT_ATTR: "true"}, children=pieces)
            raise QueryVariableError(
                f"a variable landed inside {node.tag} text {text!r}, where LaTeX takes no "
                "sub-expression (e.g. \\operatorname{..}); move it out",
                "bad-variable",
            )
        return MathNode(
            node.tag,
            dict(node.attrs) if node.attrs else None,
            [copy(child) for child in node.children],
            text,
        )

    return copy(tree), seen


def _only_variables(tree: MathNode) -> bool:
    for node in tree.iter():
        tag = node.tag
        if tag in _ROWS or tag in _SPACES or tag == QVAR_TAG:
            continue
        if node.attrs and node.attrs.get(QVAR_TEXT_ATTR):
            continue
        if tag in ("mo", "mtext") and not (node.text or "").translate(_BLANK).strip():
            continue
        return False
    return True


def _neutral_letters(names: list[str], tree: MathNode) -> dict[str, str]:
    used = {n.text for n in tree.iter() if n.tag == "mi" and n.text}
    free = [c for c in _NEUTRAL_LETTERS if c not in used]
    free += [c for c in string.ascii_letters if c not in used and c not in free]
    return {name: free[i] if i < len(free) else "x" for i, name in enumerate(names)}


def _structure_tokens(tree: MathNode) -> tuple[str, ...]:
    def copy(node: MathNode) -> MathNode:
        if node.tag == QVAR_TAG:
            return MathNode(QVAR_TAG, text=_SENTINEL)
        return MathNode(node.tag, node.attrs, [copy(c) for c in node.children], node.text)

    tokens = math_tokens(copy(tree))
    suffix = ">" + QVAR_TAG
    shape = ":" + QVAR_TAG
    return tuple(
        t for t in tokens if _SENTINEL not in t and not t.endswith(suffix) and not t.endswith(shape)
    )


def parse_pattern(latex: str, featuriser: Featuriser) -> Pattern:
    r"""Parse a query with variables into a :class:`Pattern` through ``featuriser``.

    A query without variables gives a pattern with ``variables == ()`` (a plain structural
    query). The conversion runs once, on the query with placeholders.

    Raises:
        QueryVariableError: ``bad-variable`` (syntax, or a variable conversion swallowed) or
            ``only-wildcards`` (no node but variables, rows and spaces).
        ConversionError: the query does not convert (the featuriser's failure reason).

    >>> from mathsearch.indexer.parse import Featuriser
    >>> pattern = parse_pattern(r"\frac{?a}{2m}", Featuriser(converter="python"))
    >>> pattern.variables, pattern.neutral_latex
    (('a',), '\\frac{x}{2m}')
    >>> [n.text for n in pattern.tree.iter() if n.tag == QVAR_TAG]
    ['a']
    """
    found = _scan(latex)
    names = _names(found)
    prefix = _placeholder_prefix(latex)
    source = _replace(
        latex, found, {name: f"{{\\text{{{prefix}{i}X}}}}" for i, name in enumerate(names)}
    )
    parsed = featuriser.parse_latex(source)
    if not hasattr(parsed, "tree"):
        reason = getattr(parsed, "reason", "conversion-error")
        detail = getattr(parsed, "detail", "")
        raise ConversionError(f"the query does not convert: {detail}", reason=reason)
    tree, seen = _mark_variables(parsed.tree, prefix, names)
    lost = [name for name in names if name not in seen]
    if lost:
        raise QueryVariableError(
            f"variable(s) {', '.join(lost)} vanished in conversion (inside a label, a "
            "column spec or an argument LaTeX reads as plain text)",
            "bad-variable",
        )
    if names and _only_variables(tree):
        raise QueryVariableError(
            "the query is only variables: add at least one symbol or structure",
            "only-wildcards",
        )
    letters = _neutral_letters(names, tree)
    neutral = _replace(latex, found, letters)
    logger.debug("pattern %r: variables %s, neutral %r", latex, names, neutral)
    return Pattern(
        latex=latex,
        tree=tree,
        variables=tuple(names),
        neutral_latex=neutral,
        structure_tokens=_structure_tokens(tree),
    )
