"""SymPy's Lark LaTeX parser, extended for :mod:`mathsearch.indexer.prefix` (LaTeX -> SymPy).

``sympy.parsing.latex`` with the Lark backend (antlr4 is not installed), its grammar extended by
the Greek letters it lacks (``\\pi`` -> the symbol ``pi``), built once per process (~1.5 s).
Ambiguous readings: fewest calls of unusual function names (``c(r-L)`` is a product, ``f(x)`` a
call), then the shallowest tree. :func:`parse_latex` runs under ``evaluate(False)``, so that
``9^{9^9}`` is never computed, and under one lock per process (the parser is not thread-safe);
:func:`known_commands` lists the commands the grammar knows, to fail fast on others.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any

import sympy
from sympy.core.function import AppliedUndef
from sympy.utilities.exceptions import SymPyDeprecationWarning

logger = logging.getLogger(__name__)

_CALLED_NAMES = "f g h F G H u v w y phi psi chi Phi Psi Gamma"  # x(t)-style names read as calls
_CALLED = frozenset(_CALLED_NAMES.split())
_EXTRA_GREEK = "pi varpi sigma varsigma iota Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi"
_EXTRA_GREEK += " Psi Omega"  # the letters SymPy's Lark grammar lacks


class _Serial:
    """One lock per process around the Lark parser, renewed in forked children (a child
    forked while another thread held it must not inherit it locked)."""

    lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: setattr(_Serial, "lock", threading.Lock()))


@functools.lru_cache(maxsize=1)
def _parser() -> tuple[Any, frozenset[str]]:
    """The Lark LaTeX parser with more Greek letters, and the commands its grammar knows."""
    import sympy.physics.quantum  # the transformer imports it; not under evaluate(False)
    from lark import Lark
    from sympy.parsing.latex.lark import LarkLaTeXParser, TransformToSymPyExpr

    class Transformer(TransformToSymPyExpr):
        def _ambig(self, children: list[Any]) -> Any:
            """Of ambiguous readings keep the one with fewest calls of unusual function names
            (``c(r-L)`` is a product, ``f(x)`` a call), then the shallowest (``\\cot x + y``)."""
            options = [c for c in children if isinstance(c, sympy.Basic)] or children
            return min(options, key=lambda c: (_odd_calls(c), _depth(c)))

    grammar_dir = Path(LarkLaTeXParser.__init__.__code__.co_filename).parent / "grammar"
    text = (grammar_dir / "latex.lark").read_text("utf-8")
    greek = (grammar_dir / "greek_symbols.lark").read_text("utf-8")
    extra = " | ".join(f'"\\\\{name}"' for name in _EXTRA_GREEK.split())
    greek = greek.replace("GREEK_SYMBOL: ", f"EXTRA_GREEK: {extra}\nGREEK_SYMBOL: EXTRA_GREEK | ")
    if "%import .greek_symbols.GREEK_SYMBOL" in text and "EXTRA_GREEK" in greek:
        text = text.replace("%import .greek_symbols.GREEK_SYMBOL", greek.replace("%ignore", "//"))
    else:  # a SymPy whose grammar moved: keep it as shipped
        logger.warning("sympy LaTeX grammar not patched (layout changed); \\pi is unsupported")
    lark = Lark(
        text,
        source_path=str(grammar_dir) + "/",
        parser="earley",
        start="latex_string",
        lexer="auto",
        ambiguity="explicit",
        propagate_positions=False,
        maybe_placeholders=False,
        keep_all_tokens=True,
    )
    known = frozenset(re.findall(r'"\\\\([a-zA-Z]+)"', text))
    return (lark, Transformer()), known


def _odd_calls(expr: Any) -> int:
    calls = getattr(expr, "atoms", lambda *_: ())(AppliedUndef)
    return sum(str(call.func.__name__) not in _CALLED for call in calls)


def _depth(expr: Any) -> int:
    args = getattr(expr, "args", ())
    return 1 + max((_depth(arg) for arg in args), default=0)


def known_commands() -> frozenset[str]:
    """The control words the (extended) grammar knows; builds the parser on the first call."""
    return _parser()[1]


def parse_latex(text: str) -> Any:
    """The unevaluated SymPy tree of ``text`` (lark and SymPy raise many types on bad input)."""
    (lark, transformer), _known = _parser()
    with _Serial.lock, sympy.evaluate(False), warnings.catch_warnings():
        warnings.simplefilter("ignore", SymPyDeprecationWarning)
        return transformer.transform(lark.parse(text))
