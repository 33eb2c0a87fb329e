"""Propositional logic in LaTeX (``\\land \\lor \\lnot \\oplus \\Rightarrow``, also ``\\wedge
\\vee \\neg \\implies \\Leftrightarrow``, over one-letter variables and ``0 1 \\top \\bot``):
its tokens, a precedence-climbing parser into nested tuples, and the formula as prefix tokens in
the SemVec convention (``and or xor implies not``, :mod:`mathsearch.indexer.semvec_prefix`).

SymPy's LaTeX grammar has no logic, so this reader serves both the canonical forms
(:mod:`mathsearch.indexer.canonical_form`: truth tables) and the seq2seq encoder's prefix tokens
(:func:`mathsearch.indexer.prefix.latex_to_prefix`).

>>> logic_prefix(r"\\lnot (a \\land b) \\lor c")
['or', 'not', 'and', 'a', 'b', 'c']
>>> logic_prefix(r"x^2 + 1") is None
True
"""

from __future__ import annotations

import re
from typing import TypeAlias

from mathsearch.indexer.errors import IndexerError

__all__ = [
    "IGNORED_COMMANDS",
    "LOGIC_COMMANDS",
    "LogicFormulaError",
    "LogicParser",
    "LogicTree",
    "is_logic",
    "logic_formula",
    "logic_prefix",
    "logic_tokens",
]


class LogicFormulaError(IndexerError):
    """A logic formula that cannot be read (reason ``sympy-unparsable``)."""

    reason = "sympy-unparsable"


#: LaTeX command -> operator of the logic reader.
LOGIC_COMMANDS = {
    "land": "&",
    "wedge": "&",
    "lor": "|",
    "vee": "|",
    "lnot": "~",
    "neg": "~",
    "oplus": "^",
    "Rightarrow": ">",
    "implies": ">",
    "Leftrightarrow": "=",
    "iff": "=",
    "top": "1",
    "bot": "0",
}
_LOGIC_OPERATORS = {"&", "|", "~", "^", ">", "="}
_LOGIC_TOKEN = re.compile(r"\s*(?:\\([a-zA-Z]+)|([A-Za-z])|([01])|([()\[\]{}])|(\S))")
IGNORED_COMMANDS = {"left", "right", "big", "Big", "bigl", "bigr", "Bigl", "Bigr"}
#: Binding power of the binary operators (higher binds tighter); ``>`` is right-associative.
_POWER = {"&": 4, "^": 3, "|": 2, ">": 1, "=": 0}


def logic_tokens(latex: str) -> list[str] | None:
    """The logic reader's tokens, or None when ``latex`` is not propositional logic."""
    tokens: list[str] = []
    for match in _LOGIC_TOKEN.finditer(latex):
        command, letter, bit, bracket, other = match.groups()
        if command is not None:
            if command in IGNORED_COMMANDS:
                continue
            if command not in LOGIC_COMMANDS:
                return None
            tokens.append(LOGIC_COMMANDS[command])
        elif letter is not None:
            tokens.append(letter)
        elif bit is not None:
            tokens.append(bit)
        elif bracket is not None:
            tokens.append("(" if bracket in "([{" else ")")
        elif other in {"&", "|"}:
            tokens.append(other)
        else:
            return None
    return tokens


def is_logic(latex: str) -> bool:
    """Whether ``latex`` is a propositional formula (a logic operator and nothing else)."""
    return logic_formula(latex) is not None


def logic_formula(latex: str) -> list[str] | None:
    """The logic reader's tokens when ``latex`` is a propositional formula, else None."""
    tokens = logic_tokens(latex)
    return tokens if tokens and any(t in _LOGIC_OPERATORS for t in tokens) else None


#: A parsed formula: a variable or constant (``"p"``, ``"0"``, ``"1"``), ``("~", operand)`` or
#: ``(operator, left, right)``.
LogicTree: TypeAlias = "str | tuple[str, LogicTree] | tuple[str, LogicTree, LogicTree]"


class LogicParser:
    """Precedence climbing over the logic tokens into nested tuples (:data:`LogicTree`)."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def parse(self) -> LogicTree:
        tree = self.binary(0)
        if self.at != len(self.tokens):
            raise LogicFormulaError(f"unexpected {self.tokens[self.at]!r}", "sympy-unparsable")
        return tree

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise LogicFormulaError("formula ends early", "sympy-unparsable")
        self.at += 1
        return token

    def binary(self, least: int) -> LogicTree:
        left = self.unary()
        while (op := self.peek()) is not None and op in _POWER and _POWER[op] >= least:
            self.at += 1
            right = self.binary(_POWER[op] if op == ">" else _POWER[op] + 1)
            left = (op, left, right)
        return left

    def unary(self) -> LogicTree:
        token = self.take()
        if token == "~":
            return ("~", self.unary())
        if token == "(":
            inner = self.binary(0)
            if self.take() != ")":
                raise LogicFormulaError("unbalanced parentheses", "sympy-unparsable")
            return inner
        if token in _LOGIC_OPERATORS or token == ")":
            raise LogicFormulaError(f"operand expected, got {token!r}", "sympy-unparsable")
        return token


#: Logic operator -> SemVec prefix token (``=``, equivalence, is ``not xor``).
_PREFIX = {"&": "and", "|": "or", "^": "xor", ">": "implies"}


def _prefix(tree: LogicTree) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    op, *args = tree
    if op == "~":
        return ["not", *_prefix(args[0])]
    if op == "=":
        return ["not", "xor", *_prefix(args[0]), *_prefix(args[1])]
    return [_PREFIX[op], *_prefix(args[0]), *_prefix(args[1])]


def logic_prefix(latex: str) -> list[str] | None:
    """Prefix tokens of a propositional formula (None when ``latex`` is not one).

    Raises:
        LogicFormulaError: a logic formula that does not parse (unbalanced, a missing operand).
    """
    tokens = logic_formula(latex)
    if tokens is None:
        return None
    return _prefix(LogicParser(tokens).parse())
