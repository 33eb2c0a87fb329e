r"""Pure-Python LaTeX -> Presentation MathML, the default converter.

A recursive-descent parser over a regex tokenizer that builds :class:`MathNode` trees directly
(no XML text in between), following KaTeX's MathML conventions (see
:mod:`mathsearch.indexer.latex_symbols`)
so the graphs look like those of the KDD 2020 seed (section 3.1), which compiled arXiv LaTeX with
KaTeX. It covers the display math of real arXiv papers: fractions (``\frac``, ``\over``,
``\atop``, ``\choose``), roots, scripts and limits, ``\left..\right`` and ``\big`` delimiters,
accents, fonts (``\mathrm{..}`` and ``{\rm ..}``), text, spacing, arrays, matrices and the amsmath
alignment environments, plain-TeX ``\matrix{..\cr..}``.

Errors are typed: :class:`~mathsearch.indexer.errors.ConversionError` with a reason code
(``unbalanced-braces``, ``missing-argument``, ``unknown-environment``,
``mismatched-environment``, ``macro-parameter``, ``invalid-utf8``, ``unknown-macro`` in strict
mode) and :class:`~mathsearch.indexer.errors.LimitExceeded` (``too-large``, ``too-deep``,
``too-many-nodes``). Unknown control sequences (user macros whose definitions were not in the
source) are kept as upright identifiers ``<mi mathvariant="normal">\name</mi>`` and listed in
:attr:`Conversion.unknown_macros`; ``strict=True`` turns them into errors as KaTeX does.

>>> from mathsearch.indexer.mathml_tree import to_mathml
>>> to_mathml(latex_to_mathml(r"\frac{a}{b}").tree, display=False)
'<math xmlns="http://www.w3.org/1998/Math/MathML"><mrow><mfrac><mi>a</mi><mi>b</mi></mfrac></mrow></math>'
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from mathsearch.indexer import latex_commands, latex_tables
from mathsearch.indexer.errors import ConversionError, LimitExceeded
from mathsearch.indexer.latex_parser import Parser
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"\\(?:[A-Za-z@]+|[^A-Za-z@])| |[0-9]+(?:\.[0-9]+)?|\.[0-9]+|.", re.S)
_COMMENT = re.compile(r"(?<!\\)%[^\n]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass
class Conversion:
    """The result of one conversion: the ``math`` tree and the unknown macros it kept."""

    tree: MathNode
    unknown_macros: list[str] = field(default_factory=list)


def tokenize(latex: str) -> list[str]:
    r"""LaTeX tokens: control sequences, numbers, single characters; comments dropped.

    Whitespace runs become one ``" "`` token (it matters in text arguments only).

    >>> tokenize(r"\alpha_{12} + x % comment")
    ['\\alpha', '_', '{', '12', '}', ' ', '+', ' ', 'x', ' ']
    """
    if "%" in latex:
        latex = _COMMENT.sub("", latex)
    text = " ".join(latex.split())
    if latex[-1:].isspace():
        text += " "
    return _TOKEN.findall(text)


def latex_to_mathml(
    latex: str | bytes, settings: IndexerSettings | None = None, *, strict: bool = False
) -> Conversion:
    """Convert one equation's LaTeX (without ``$``/environment delimiters) to a MathML tree.

    Args:
        latex: the LaTeX source; bytes must be UTF-8.
        settings: limits (``max_equation_chars``, ``max_depth``, ``max_nodes``);
            :meth:`IndexerSettings.from_env` when None.
        strict: raise ``ConversionError(reason="unknown-macro")`` on unknown control sequences
            instead of keeping them as identifiers.

    Raises:
        ConversionError: the LaTeX is malformed (see the module docstring for the reasons).
        LimitExceeded: the input is too long, too deeply nested or has too many tokens.
    """
    settings = settings or _default_settings()
    if isinstance(latex, bytes):
        try:
            latex = latex.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConversionError(f"not valid UTF-8: {exc}", reason="invalid-utf8") from exc
    if len(latex) > settings.max_equation_chars:
        raise LimitExceeded(
            f"{len(latex)} characters, the limit is {settings.max_equation_chars}",
            reason="too-large",
        )
    if _SURROGATE.search(latex):
        raise ConversionError("contains lone surrogates (invalid UTF-8)", reason="invalid-utf8")
    if _CONTROL.search(latex):
        latex = _CONTROL.sub(" ", latex)
    tokens = tokenize(latex)
    if len(tokens) > settings.max_nodes:
        raise LimitExceeded(
            f"{len(tokens)} tokens, the limit is {settings.max_nodes}", reason="too-many-nodes"
        )
    parser = Parser(tokens, max_depth=settings.max_depth, strict=strict, handlers=HANDLERS)
    children = parser.parse_all()
    row = MathNode("mrow", children=children)
    return Conversion(MathNode("math", children=[row]), parser.unknown)


#: Commands with arguments: latex_commands', then latex_tables' (arrays, environments).
HANDLERS = {**latex_commands.HANDLERS, **latex_tables.HANDLERS}

_SETTINGS: list[IndexerSettings] = []


def _default_settings() -> IndexerSettings:
    if not _SETTINGS:
        _SETTINGS.append(IndexerSettings.from_env())
    return _SETTINGS[0]
