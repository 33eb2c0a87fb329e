"""Canonical forms: the same tokens for equivalent formulas written differently.

BM25 over structural tokens finds ``x^{-1}`` near ``x^{-2}``, never near ``\\frac{1}{x}``; an
encoder may learn the equivalence, but a normal form *computes* it. ``canonical_tokens(latex)``
returns the tokens of the ``canon_tokens`` field (issue 21; the seed's equivalence task, SemVec
classes being classes of equal functions):

* ``form:<hash>`` - the whole normal form: equal for any two formulas with the same normal form;
* ``term:<hash>`` - each additive term of it (algebra) or each prime implicant of a minimal
  DNF (logic, up to :data:`MAX_DNF_VARIABLES` variables): partial credit for near-equivalents;
* ``vars:<a,b,...>`` - the variables the formula depends on (after simplification).

Two readers, both under the SymPy time limit (``MATHSEARCH_SYMPY_TIMEOUT``):

* **propositional logic** (``\\land \\lor \\lnot \\oplus \\Rightarrow``, also ``\\wedge \\vee \\neg
  \\implies \\Leftrightarrow``, over one-letter variables and ``0 1 \\top \\bot``): parsed here
  (SymPy's LaTeX grammar has no logic) and evaluated on every assignment with NumPy; the normal
  form is the truth table over the variables it depends on - two formulas get the same
  ``form:`` token exactly when they are the same Boolean function;
* **algebra** (everything SymPy's LaTeX parser reads, :func:`indexer.prefix.latex_to_expr_untimed`):
  ``cancel(together(e))`` for rational functions (a canonical ``p/q``), ``expand(e)`` otherwise;
  an equation ``a = b`` becomes ``a - b`` with its sign fixed, so ``a = b`` and ``b = a`` agree.

A formula neither reader takes raises :class:`CanonicalFormError` with a reason
(``sympy-unparsable``, ``timeout``, ``too-large``); the featuriser keeps the reason and indexes
the equation without the field - never a failure record.

Example::

    canonical_tokens(r"x^{-1}")[0] == canonical_tokens(r"\\frac{1}{x}")[0]       # True
    canonical_tokens(r"\\lnot (a \\land b)") == canonical_tokens(r"\\lnot a \\lor \\lnot b")  # True
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable

import numpy as np

from indexer.errors import IndexerError
from indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

#: Variables a truth table may have (2^16 rows of one byte: 64 KiB per sub-formula).
MAX_VARIABLES = 16
#: Variables up to which the minimal DNF's prime implicants become ``term:`` tokens.
MAX_DNF_VARIABLES = 8
#: ``term:`` tokens kept per formula.
MAX_TERMS = 64
HASH_CHARS = 12

__all__ = ["CanonicalFormError", "canonical_tokens", "is_logic", "truth_table"]


class CanonicalFormError(IndexerError):
    """Reason codes: ``sympy-unparsable``, ``timeout``, ``too-large``."""

    reason = "sympy-unparsable"


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:HASH_CHARS]


# ----------------------------------------------------------------------------- logic

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
_IGNORED = {"left", "right", "big", "Big", "bigl", "bigr", "Bigl", "Bigr"}
#: Binding power of the binary operators (higher binds tighter); ``>`` is right-associative.
_POWER = {"&": 4, "^": 3, "|": 2, ">": 1, "=": 0}


def _logic_tokens(latex: str) -> list[str] | None:
    """The logic reader's tokens, or None when ``latex`` is not propositional logic."""
    tokens: list[str] = []
    for match in _LOGIC_TOKEN.finditer(latex):
        command, letter, bit, bracket, other = match.groups()
        if command is not None:
            if command in _IGNORED:
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
    tokens = _logic_tokens(latex)
    return bool(tokens) and any(t in _LOGIC_OPERATORS for t in tokens)


class _LogicParser:
    """Precedence climbing over the logic tokens into nested tuples."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def parse(self) -> object:
        tree = self.binary(0)
        if self.at != len(self.tokens):
            raise CanonicalFormError(f"unexpected {self.tokens[self.at]!r}", "sympy-unparsable")
        return tree

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise CanonicalFormError("formula ends early", "sympy-unparsable")
        self.at += 1
        return token

    def binary(self, least: int) -> object:
        left = self.unary()
        while (op := self.peek()) in _POWER and _POWER[op] >= least:
            self.at += 1
            right = self.binary(_POWER[op] if op == ">" else _POWER[op] + 1)
            left = (op, left, right)
        return left

    def unary(self) -> object:
        token = self.take()
        if token == "~":
            return ("~", self.unary())
        if token == "(":
            inner = self.binary(0)
            if self.take() != ")":
                raise CanonicalFormError("unbalanced parentheses", "sympy-unparsable")
            return inner
        if token in _LOGIC_OPERATORS or token == ")":
            raise CanonicalFormError(f"operand expected, got {token!r}", "sympy-unparsable")
        return token


def _variables(tree: object, found: set[str]) -> set[str]:
    if isinstance(tree, str):
        if tree not in {"0", "1"}:
            found.add(tree)
    else:
        for child in tree[1:]:  # type: ignore[index]
            _variables(child, found)
    return found


def _evaluate(tree: object, columns: dict[str, np.ndarray], rows: int) -> np.ndarray:
    if isinstance(tree, str):
        if tree in {"0", "1"}:
            return np.full(rows, tree == "1")
        return columns[tree]
    op, *args = tree  # type: ignore[misc]
    values = [_evaluate(arg, columns, rows) for arg in args]
    if op == "~":
        return ~values[0]
    a, b = values
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == ">":
        return ~a | b
    return a == b


def truth_table(latex: str) -> tuple[tuple[str, ...], np.ndarray]:
    """``(variables, table)`` of a propositional formula over the variables it depends on.

    ``table[i]`` is the value where variable ``j`` (sorted by name) is bit ``j`` of ``i``
    (most significant first). Variables the function does not depend on are dropped, so
    ``a \\lor (b \\land \\lnot b)`` and ``a`` have the same table.

    Raises:
        CanonicalFormError: not propositional logic, unreadable, or more than
            :data:`MAX_VARIABLES` variables.
    """
    tokens = _logic_tokens(latex)
    if not tokens:
        raise CanonicalFormError("not a propositional formula", "sympy-unparsable")
    tree = _LogicParser(tokens).parse()
    names = sorted(_variables(tree, set()))
    if len(names) > MAX_VARIABLES:
        raise CanonicalFormError(f"{len(names)} variables > {MAX_VARIABLES}", "too-large")
    rows = 1 << len(names)
    index = np.arange(rows)
    columns = {
        name: ((index >> (len(names) - 1 - j)) & 1).astype(bool) for j, name in enumerate(names)
    }
    table = _evaluate(tree, columns, rows)
    # drop the variables the function does not depend on (axis j of the 2 x 2 x ... cube)
    cube = table.reshape((2,) * len(names)) if names else table.reshape(())
    kept: list[str] = []
    for name in names:
        axis = len(kept)
        low, high = np.take(cube, 0, axis=axis), np.take(cube, 1, axis=axis)
        if np.array_equal(low, high):
            cube = low
        else:
            kept.append(name)
    return tuple(kept), np.asarray(cube, dtype=bool).reshape(-1)


def _logic_tokens_of(latex: str) -> list[str]:
    names, table = truth_table(latex)
    bits = "".join("1" if value else "0" for value in table)
    tokens = [f"form:{_digest('logic:' + ','.join(names) + ':' + bits)}"]
    if names:
        tokens.append("vars:" + ",".join(names))
    if 0 < len(names) <= MAX_DNF_VARIABLES and 0 < table.sum() < table.size:
        import sympy
        from sympy.logic import SOPform

        symbols = sympy.symbols(list(names))
        minterms = [int(i) for i in np.flatnonzero(table)]
        dnf = SOPform(symbols, minterms)
        terms = dnf.args if isinstance(dnf, sympy.Or) else (dnf,)
        tokens += sorted({f"term:{_digest('logic:' + sympy.srepr(t))}" for t in terms})
    return tokens[: 2 + MAX_TERMS]


# ----------------------------------------------------------------------------- algebra


def _normal_form(expr: object) -> object:
    import sympy

    if isinstance(expr, sympy.Equality):
        expr = expr.lhs - expr.rhs
        form = _normal_form(expr)
        return -form if form.could_extract_minus_sign() else form  # type: ignore[attr-defined]
    if isinstance(expr, sympy.core.relational.Relational):
        return expr.func(_normal_form(expr.lhs), _normal_form(expr.rhs), evaluate=False)
    if not isinstance(expr, sympy.Expr):
        raise CanonicalFormError(f"no normal form for a {type(expr).__name__}", "too-large")
    if expr.is_rational_function():
        return sympy.cancel(sympy.together(expr))
    return sympy.expand(expr)


_ALGEBRA_TOKEN = re.compile(
    r"\s*(?:\\([a-zA-Z]+)|\\([,;:! ])|([A-Za-z])|(\d+)|([-+*/^_(){}\[\]=])|([,.;]\s*$)|(\S))"
)
_ALGEBRA_COMMANDS = {"cdot": "*", "times": "*", "frac": "frac", "sqrt": "sqrt"}
#: Greek letters the simple reader takes as symbols (``\pi`` is the constant).
GREEK = frozenset(
    [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "varepsilon",
        "zeta",
        "eta",
        "theta",
        "vartheta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
        "pi",
        "rho",
        "sigma",
        "tau",
        "upsilon",
        "phi",
        "varphi",
        "chi",
        "psi",
        "omega",
        "Gamma",
        "Delta",
        "Theta",
        "Lambda",
        "Xi",
        "Pi",
        "Sigma",
        "Upsilon",
        "Phi",
        "Psi",
        "Omega",
    ]
)
#: Functions it applies (``\sin x``, ``\sin^2(x)``, ``\log{x}``).
FUNCTIONS = frozenset(
    ["sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "exp", "log", "ln"]
)
#: Largest integer exponent the simple reader evaluates (beyond: SymPy's reader and its guards).
MAX_EXPONENT = 64


class _AlgebraParser:
    """Polynomials, fractions and elementary functions (``+ - \\cdot \\times / ^ \\frac
    \\sqrt \\sin ...``, one-letter or Greek variables with subscripts, integers): read directly
    into SymPy, ~100x faster than SymPy's LaTeX (Earley) parser. Anything else returns None from
    :func:`_simple_algebra` (and goes to that parser when it is on)."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError("formula ends early")
        self.at += 1
        return token

    def expect(self, token: str) -> None:
        if self.take() != token:
            raise ValueError(f"{token!r} expected")

    def expr(self) -> object:
        import sympy

        value = self.term()
        while self.peek() in {"+", "-"}:
            sign = self.take()
            right = self.term()
            value = sympy.Add(value, right if sign == "+" else -right)
        return value

    def term(self) -> object:
        import sympy

        value = self.factor()
        while True:
            token = self.peek()
            if token in {"*", "/"}:
                self.at += 1
                right = self.factor()
                value = value * right if token == "*" else value * sympy.Pow(right, -1)
            elif token is not None and (
                token.isalnum() or token[0] in "@!" or token in {"(", "{", "frac", "sqrt"}
            ):
                value = value * self.factor()  # implicit product: 2ab, a(b+c), m\omega
            else:
                return value

    def factor(self) -> object:
        if self.peek() in {"+", "-"}:
            sign = self.take()
            value = self.factor()
            return -value if sign == "-" else value
        base = self.atom()
        if self.peek() != "^":
            return base
        import sympy

        self.at += 1
        exponent = self.exponent()
        if exponent.is_Integer and abs(int(exponent)) > MAX_EXPONENT:
            raise ValueError("exponent too large for the simple reader")
        if base == sympy.Symbol("e"):
            return sympy.exp(exponent)
        return sympy.Pow(base, exponent)

    def exponent(self) -> object:
        if self.peek() == "{":
            self.at += 1
            value = self.expr()
            self.expect("}")
            return value
        if self.peek() == "-":  # x^-1
            self.at += 1
            return -self.exponent()
        token = self.take()
        return self.leaf(token[0]) if token.isdigit() else self.leaf(token)

    def atom(self) -> object:
        import sympy

        token = self.take()
        if token in {"(", "{"}:
            value = self.expr()
            self.expect(")" if token == "(" else "}")
            return value
        if token == "frac":
            numerator, denominator = self.braced(), self.braced()
            return numerator * sympy.Pow(denominator, -1)
        if token == "sqrt":
            return sympy.sqrt(self.braced())
        if token.startswith("!"):
            return self.function(token[1:])
        if self.peek() == "_" and (token.isalpha() or token.startswith("@")):
            self.at += 1
            return sympy.Symbol(f"{token.lstrip('@')}_{self.subscript()}")
        return self.leaf(token)

    def function(self, name: str) -> object:
        """``\\sin x``, ``\\sin(x)``, ``\\sin^2 x`` (the power of the value)."""
        import sympy

        power = None
        if self.peek() == "^":
            self.at += 1
            power = self.exponent()
        func = {"ln": sympy.log}.get(name) or getattr(sympy, name)
        if self.peek() == "(":  # \sin(x)^2 is sin(x) squared, not sin(x^2)
            value = func(self.atom())
            if power is None and self.peek() == "^":
                self.at += 1
                power = self.exponent()
        else:
            value = func(self.factor())
        return value if power is None else sympy.Pow(value, power)

    def subscript(self) -> str:
        """The text of a subscript: one token, or a braced run of letters and digits."""
        if self.peek() != "{":
            return self.take().lstrip("@")
        self.at += 1
        parts = []
        while (token := self.take()) != "}":
            if not (token.isalnum() or token.startswith("@")):
                raise ValueError("subscript too complex for the simple reader")
            parts.append(token.lstrip("@"))
        return "".join(parts)

    def braced(self) -> object:
        if self.peek() == "{":
            self.at += 1
            value = self.expr()
            self.expect("}")
            return value
        token = self.take()  # \frac12
        return self.leaf(token[0])

    @staticmethod
    def leaf(token: str) -> object:
        import sympy

        if token.isdigit():
            return sympy.Integer(int(token))
        if len(token) == 1 and token.isalpha():
            return sympy.Symbol(token)
        if token == "@pi":
            return sympy.pi
        if token.startswith("@"):
            return sympy.Symbol(token[1:])
        raise ValueError(f"unexpected {token!r}")


def _simple_algebra(latex: str) -> object | None:
    """The SymPy expression of a simple polynomial / fraction, or None (see the parser)."""
    tokens: list[str] = []
    for match in _ALGEBRA_TOKEN.finditer(latex):
        command, space, letter, number, symbol, trailing, other = match.groups()
        if space is not None or trailing is not None:
            continue  # \, \; and the comma or full stop that ends a displayed formula
        if command is not None:
            if command in _IGNORED:
                continue
            if command in GREEK:
                tokens.append("@" + command)
            elif command in FUNCTIONS:
                tokens.append("!" + command)
            elif command in _ALGEBRA_COMMANDS:
                tokens.append(_ALGEBRA_COMMANDS[command])
            else:
                return None
        elif letter is not None or number is not None:
            tokens.append(letter or number)
        elif symbol is not None:
            tokens.append({"[": "(", "]": ")"}.get(symbol, symbol))
        elif other is not None:
            return None
    sides = [tokens]
    if "=" in tokens:
        at = tokens.index("=")
        sides = [tokens[:at], tokens[at + 1 :]]
    values = []
    for side in sides:
        if not side or "=" in side:
            return None
        parser = _AlgebraParser(side)
        try:
            values.append(parser.expr())
        except (ValueError, ZeroDivisionError, TypeError, AttributeError):
            return None
        if parser.at != len(side):
            return None
    if len(values) == 2:
        import sympy

        return sympy.Eq(values[0], values[1], evaluate=False)
    return values[0]


def _algebra_tokens_untimed(latex: str) -> list[str]:
    import sympy

    from indexer.prefix import PrefixError, latex_to_expr_untimed

    expr = _simple_algebra(latex)
    if expr is None:
        try:
            expr = latex_to_expr_untimed(latex)
        except PrefixError as exc:
            raise CanonicalFormError(str(exc), exc.reason) from exc
    try:
        form = _normal_form(expr)
        text = sympy.srepr(form)
    except CanonicalFormError:
        raise
    except RecursionError as exc:
        raise CanonicalFormError("expression nested too deeply", "too-large") from exc
    except Exception as exc:  # SymPy raises many types on odd trees (a Tuple in a product)
        raise CanonicalFormError(
            f"no normal form: {type(exc).__name__}", "sympy-unparsable"
        ) from exc
    tokens = [f"form:{_digest(text)}"]
    names = sorted(str(s) for s in getattr(form, "free_symbols", ()))
    if names:
        tokens.append("vars:" + ",".join(names))
    numerator = sympy.fraction(form)[0] if isinstance(form, sympy.Expr) else form
    terms = sympy.Add.make_args(numerator) if isinstance(numerator, sympy.Expr) else ()
    if len(terms) > 1:
        tokens += sorted({f"term:{_digest(sympy.srepr(t))}" for t in terms})[:MAX_TERMS]
    return tokens


def canonical_tokens(
    latex: str,
    timeout: float | None = None,
    *,
    settings: IndexerSettings | None = None,
    sympy: bool = True,
) -> list[str]:
    """The ``canon_tokens`` of a LaTeX formula (module docstring); ``timeout`` defaults to
    ``MATHSEARCH_SYMPY_TIMEOUT``. ``sympy=False`` leaves out SymPy's LaTeX reader (the
    indexer's default, ``MATHSEARCH_CANONICAL_FORM=fast``: on hep-th it reaches the reader for
    ~40% of the equations and costs ~80 ms each on average, for ~10% more normal forms).

    Raises:
        CanonicalFormError: neither reader takes it, it is too large, or it ran out of time.
    """
    settings = settings or IndexerSettings.from_env()
    if not isinstance(latex, str) or not latex.strip():
        raise CanonicalFormError("empty formula", "sympy-unparsable")
    if len(latex) > settings.max_equation_chars:
        raise CanonicalFormError(
            f"{len(latex)} characters > {settings.max_equation_chars}", "too-large"
        )
    limit = settings.sympy_timeout if timeout is None else timeout
    work: Callable[[str], list[str]]
    if is_logic(latex):
        work = _logic_tokens_of
    elif _simple_algebra(latex) is not None:
        work = _algebra_tokens_untimed
    elif not sympy:
        raise CanonicalFormError("not a formula the fast readers take", "sympy-unparsable")
    else:
        from indexer.sympy_latex import known_commands

        known_commands()  # the parser is built once per process, outside the time limit
        work = _algebra_tokens_untimed
    from indexer.time_limit import run_with_time_limit

    try:
        return run_with_time_limit(
            work,
            limit,
            (latex,),
            error=CanonicalFormError,
            what="the canonical form",
            failure_reason="sympy-unparsable",
        )
    except RecursionError as exc:
        raise CanonicalFormError("expression nested too deeply", "too-large") from exc
