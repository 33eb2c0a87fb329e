"""Canonical forms: the same tokens for equivalent formulas written differently.

BM25 over structural tokens finds ``x^{-1}`` near ``x^{-2}``, never near ``\\frac{1}{x}``; an
encoder may learn the equivalence, but a normal form *computes* it. ``canonical_tokens(latex)``
returns the tokens of the ``canon_tokens`` field (issue 21; the seed's equivalence task, SemVec
classes being classes of equal functions):

* ``form:<hash>`` - the whole normal form: equal for any two formulas with the same normal form;
* ``term:<hash>`` - each top-level additive term (algebra) or each cofactor, the function with
  one variable fixed (logic): partial credit for near-equivalents;
* ``vars:<a,b,...>`` - its variables (logic: those the function depends on; algebra: those
  written).

Readers:

* **propositional logic** (``\\land \\lor \\lnot \\oplus \\Rightarrow``, also ``\\wedge \\vee \\neg
  \\implies \\Leftrightarrow``, over one-letter variables and ``0 1 \\top \\bot``): parsed here
  (SymPy's LaTeX grammar has no logic) and evaluated on every assignment with NumPy; the normal
  form is the truth table over the variables it depends on - two formulas get the same
  ``form:`` token exactly when they are the same Boolean function;
* **algebra** (``+ - \\cdot / ^ \\frac \\sqrt``, ``\\sin``..., one-letter and Greek variables with
  subscripts, integers, ``=``): parsed here and *evaluated* while read at :data:`POINTS` complex
  points (each variable's values seeded by its name), the values rounded to :data:`DIGITS`
  digits: the Schwartz-Zippel identity test as a hash. Equal functions get equal values
  everywhere; different ones differ at random points with probability ~1. No SymPy: about
  50 us a formula, where building and normalising a SymPy expression (``cancel``, ``expand``)
  took 3-10 ms. An equation ``a = b`` is ``a - b`` with its sign fixed, so ``b = a`` agrees.
  Powers take the principal branch, so ``\\sqrt{x^2}`` and ``x`` differ, as they do over C;
* with ``sympy=True`` (``MATHSEARCH_CANONICAL_FORM=sympy``), a formula neither takes goes to
  SymPy's LaTeX parser (:func:`mathsearch.indexer.prefix.latex_to_expr_untimed`, under the
  SymPy time limit) and is evaluated at the same points, so its forms agree with the fast readers'.

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
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.logic_formula import (
    IGNORED_COMMANDS,
    LOGIC_COMMANDS,
    LogicFormulaError,
    LogicParser,
    LogicTree,
    is_logic,
    logic_formula,
    logic_tokens,
)
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

#: Variables a truth table may have (2^16 rows of one byte: 64 KiB per sub-formula).
MAX_VARIABLES = 16
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


def _variables(tree: LogicTree, found: set[str]) -> set[str]:
    if isinstance(tree, str):
        if tree not in {"0", "1"}:
            found.add(tree)
    else:
        for child in tree[1:]:
            _variables(child, found)
    return found


def _evaluate(tree: LogicTree, columns: dict[str, np.ndarray], rows: int) -> np.ndarray:
    if isinstance(tree, str):
        if tree in {"0", "1"}:
            return np.full(rows, tree == "1")
        return columns[tree]
    op, *args = tree
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
    tokens = logic_tokens(latex)
    if not tokens:
        raise CanonicalFormError("not a propositional formula", "sympy-unparsable")
    return _truth_table(tokens)


def _truth_table(tokens: list[str]) -> tuple[tuple[str, ...], np.ndarray]:
    try:
        tree = LogicParser(tokens).parse()
    except LogicFormulaError as exc:
        raise CanonicalFormError(str(exc), exc.reason) from exc
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


def _logic_tokens_of(tokens: list[str]) -> list[str]:
    names, table = _truth_table(tokens)
    bits = "".join("1" if value else "0" for value in table)
    tokens = [f"form:{_digest('logic:' + ','.join(names) + ':' + bits)}"]
    if names:
        tokens.append("vars:" + ",".join(names))
    # partial credit: the function with one variable fixed (its cofactors), per variable
    cube = table.reshape((2,) * len(names)) if names else table
    for axis, name in enumerate(names[: MAX_TERMS // 2]):
        for value in (0, 1):
            half = np.take(cube, value, axis=axis).reshape(-1)
            others = ",".join(n for n in names if n != name)
            text = "".join("1" if v else "0" for v in half)
            tokens.append(f"term:{_digest(f'logic:{name}={value}:{others}:{text}')}")
    return tokens


# ----------------------------------------------------------------------------- algebra

#: Points every algebraic formula is evaluated at (complex, one per variable name, seeded by the
#: name): equal functions give equal values everywhere, different ones differ at random points
#: with probability ~1 (the Schwartz-Zippel identity test; rounding to :data:`DIGITS`).
POINTS = 4
DIGITS = 9
#: |value| below which a value counts as zero (cancellation leaves ~1e-16 where 0 is exact).
ZERO = 1e-9
#: Largest integer exponent the simple reader evaluates.
MAX_EXPONENT = 64

_ALGEBRA_TOKEN = re.compile(
    r"\s*(?:\\([a-zA-Z]+)|\\([,;:! ])|([A-Za-z])|(\d+)|([-+*/^_(){}\[\]=])|([,.;]\s*$)|(\S))"
)
_ALGEBRA_COMMANDS = {"cdot": "*", "times": "*", "frac": "frac", "sqrt": "sqrt"}
#: Greek letters the simple reader takes as variables (``\pi`` is the constant).
GREEK = frozenset(
    [
        "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
        "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau",
        "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda",
        "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega",
    ]
)  # fmt: skip
#: Functions it applies (``\sin x``, ``\sin^2(x)``, ``\log{x}``).
FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "cot": lambda z: 1 / np.tan(z),
    "sec": lambda z: 1 / np.cos(z), "csc": lambda z: 1 / np.sin(z), "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "coth": lambda z: 1 / np.tanh(z), "exp": np.exp,
    "log": np.log, "ln": np.log,
}  # fmt: skip


@lru_cache(maxsize=8192)
def _point(name: str) -> np.ndarray:
    """The values of variable ``name`` at the :data:`POINTS` points (seeded by the name;
    read-only, cached: a generator costs more than the whole evaluation)."""
    rng = np.random.default_rng(zlib.crc32(name.encode("utf-8")))
    radius = rng.uniform(0.6, 1.4, POINTS)
    angle = rng.uniform(0.0, 2 * np.pi, POINTS)
    values = radius * np.exp(1j * angle)
    values.flags.writeable = False
    return values


class _AlgebraParser:
    """Polynomials, fractions and elementary functions (``+ - \\cdot \\times / ^ \\frac \\sqrt
    \\sin ...``, one-letter or Greek variables with subscripts, integers), evaluated while read:
    every value is the formula's value at the :data:`POINTS` points (a complex array). No
    SymPy: ~100x faster than building and normalising a SymPy expression."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0
        self.level = 0
        self.variables: set[str] = set()
        self.terms: list[np.ndarray] = []  # the top level's summands

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

    def expr(self) -> np.ndarray:
        self.level += 1
        top = self.level == 1
        value = self.term()
        if top:
            self.terms.append(value)
        while self.peek() in {"+", "-"}:
            sign = self.take()
            right = self.term()
            right = right if sign == "+" else -right
            if top:
                self.terms.append(right)
            value = value + right
        self.level -= 1
        return value

    def term(self) -> np.ndarray:
        value = self.factor()
        while True:
            token = self.peek()
            if token in {"*", "/"}:
                self.at += 1
                right = self.factor()
                value = value * right if token == "*" else value / right
            elif token is not None and (
                token.isalnum() or token[0] in "@!" or token in {"(", "{", "frac", "sqrt"}
            ):
                value = value * self.factor()  # implicit product: 2ab, a(b+c), m\omega
            else:
                return value

    def factor(self) -> np.ndarray:
        if self.peek() in {"+", "-"}:
            sign = self.take()
            value = self.factor()
            return -value if sign == "-" else value
        is_e = self.peek() == "e"
        base = self.atom()
        if self.peek() != "^":
            return base
        self.at += 1
        exponent = self.exponent()
        if np.all(exponent == exponent[0]) and abs(exponent[0]) > MAX_EXPONENT:
            raise ValueError("exponent too large for the simple reader")
        if is_e:
            return np.exp(exponent)  # e^{x} as SymPy's reader has it: exp(x)
        return np.power(base, exponent)

    def exponent(self) -> np.ndarray:
        if self.peek() == "{":
            self.at += 1
            self.level += 1
            value = self.expr()
            self.level -= 1
            self.expect("}")
            return value
        if self.peek() == "-":  # x^-1
            self.at += 1
            return -self.exponent()
        token = self.take()
        return self.leaf(token[0]) if token.isdigit() else self.leaf(token)

    def atom(self) -> np.ndarray:
        token = self.take()
        if token in {"(", "{"}:
            value = self.group()
            self.expect(")" if token == "(" else "}")
            return value
        if token == "frac":
            numerator, denominator = self.braced(), self.braced()
            return numerator / denominator
        if token == "sqrt":
            return np.sqrt(self.braced())
        if token.startswith("!"):
            return self.function(token[1:])
        if self.peek() == "_" and (token.isalpha() or token.startswith("@")):
            self.at += 1
            return self.variable(f"{token.lstrip('@')}_{self.subscript()}")
        return self.leaf(token)

    def group(self) -> np.ndarray:
        self.level += 1
        value = self.expr()
        self.level -= 1
        return value

    def function(self, name: str) -> np.ndarray:
        """``\\sin x``, ``\\sin(x)``, ``\\sin^2 x``; ``\\sin(x)^2`` is sin(x) squared."""
        power = None
        if self.peek() == "^":
            self.at += 1
            power = self.exponent()
        if self.peek() == "(":
            value = FUNCTIONS[name](self.atom())
            if power is None and self.peek() == "^":
                self.at += 1
                power = self.exponent()
        else:
            value = FUNCTIONS[name](self.factor())
        return value if power is None else np.power(value, power)

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

    def braced(self) -> np.ndarray:
        if self.peek() == "{":
            self.at += 1
            value = self.group()
            self.expect("}")
            return value
        token = self.take()  # \frac12
        return self.leaf(token[0])

    def variable(self, name: str) -> np.ndarray:
        self.variables.add(name)
        return _point(name)

    def leaf(self, token: str) -> np.ndarray:
        if token.isdigit():
            return np.full(POINTS, float(int(token)), dtype=complex)
        if token == "@pi":
            return np.full(POINTS, np.pi, dtype=complex)
        if len(token) == 1 and token.isalpha():
            return self.variable(token)
        if token.startswith("@"):
            return self.variable(token[1:])
        raise ValueError(f"unexpected {token!r}")


def _algebra_tokens(latex: str) -> list[str] | None:
    """The reader tokens of ``latex``, or None when it is not the simple reader's."""
    tokens: list[str] = []
    for match in _ALGEBRA_TOKEN.finditer(latex):
        command, space, letter, number, symbol, trailing, other = match.groups()
        if space is not None or trailing is not None:
            continue  # \, \; and the comma or full stop that ends a displayed formula
        if command is not None:
            if command in IGNORED_COMMANDS:
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
    if not tokens or len(tokens) > MAX_FAST_TOKENS:
        return None
    return tokens


@dataclass
class Evaluated:
    """A formula evaluated at the points: its value, top-level terms and variables; ``equation``
    when it was ``lhs = rhs`` (then ``value`` is ``lhs - rhs``, its sign still free)."""

    value: np.ndarray
    terms: list[np.ndarray]
    variables: set[str]
    equation: bool = False


def evaluate_algebra(latex: str) -> Evaluated | None:
    """The simple reader's evaluation of ``latex``, or None when it does not take it."""
    tokens = _algebra_tokens(latex)
    if tokens is None:
        return None
    sides = [tokens]
    if "=" in tokens:
        at = tokens.index("=")
        sides = [tokens[:at], tokens[at + 1 :]]
    parsed = []
    with np.errstate(all="ignore"):
        for side in sides:
            if not side or "=" in side:
                return None
            parser = _AlgebraParser(side)
            try:
                value = parser.expr()
            except (ValueError, KeyError, IndexError):
                return None
            if parser.at != len(side):
                return None
            parsed.append((value, parser))
    if len(parsed) == 1:
        value, parser = parsed[0]
        return Evaluated(value, parser.terms, parser.variables)
    (left, lp), (right, rp) = parsed
    terms = lp.terms + [-t for t in rp.terms]
    return Evaluated(left - right, terms, lp.variables | rp.variables, equation=True)


def _quantised(values: np.ndarray) -> str | None:
    """The values rounded to :data:`DIGITS` significant digits (None: not finite)."""
    if not np.all(np.isfinite(values)):
        return None
    parts = []
    for z in values:
        for x in (z.real, z.imag):
            parts.append("0" if abs(x) < ZERO else f"{x:.{DIGITS}g}")
    return ",".join(parts)


def _sign_fixed(values: np.ndarray) -> np.ndarray:
    """``values`` or ``-values``, whichever starts positive (``a = b`` and ``b = a`` agree)."""
    for z in values:
        for x in (z.real, z.imag):
            if abs(x) >= ZERO:
                return values if x > 0 else -values
    return values


def _evaluated_tokens(found: Evaluated) -> list[str]:
    value = _sign_fixed(found.value) if found.equation else found.value
    text = _quantised(value)
    if text is None:
        raise CanonicalFormError("not finite at the evaluation points", "too-large")
    tokens = [f"form:{_digest('algebra:' + text)}"]
    if found.variables:
        tokens.append("vars:" + ",".join(sorted(found.variables)))
    if len(found.terms) > 1:
        terms = {_quantised(_sign_fixed(t) if found.equation else t) for t in found.terms}
        tokens += sorted(f"term:{_digest('algebra:' + t)}" for t in terms if t)[:MAX_TERMS]
    return tokens


def _algebra_tokens_untimed(latex: str) -> list[str]:
    found = evaluate_algebra(latex)
    if found is None:
        raise CanonicalFormError("not a formula the simple reader takes", "sympy-unparsable")
    return _evaluated_tokens(found)


def _sympy_tokens_untimed(latex: str) -> list[str]:
    """SymPy's LaTeX reader, then the same evaluation at the points (consistent forms)."""
    import sympy

    from mathsearch.indexer.prefix import PrefixError, latex_to_expr_untimed

    try:
        expr = latex_to_expr_untimed(latex)
    except PrefixError as exc:
        raise CanonicalFormError(str(exc), exc.reason) from exc
    equation = isinstance(expr, sympy.Equality)
    if equation:
        expr = expr.lhs - expr.rhs
    if not isinstance(expr, sympy.Expr):
        raise CanonicalFormError(f"no normal form for a {type(expr).__name__}", "too-large")
    symbols = sorted(expr.free_symbols, key=str)
    terms = list(sympy.Add.make_args(expr)) if isinstance(expr, sympy.Add) else [expr]
    try:
        with np.errstate(all="ignore"):
            values = [_sympy_values(t, symbols) for t in terms]
    except Exception as exc:  # SymPy raises many types on odd trees
        detail = f"not evaluable: {type(exc).__name__}"
        raise CanonicalFormError(detail, "sympy-unparsable") from exc
    found = Evaluated(sum(values[1:], values[0]), values, {str(s) for s in symbols}, equation)
    return _evaluated_tokens(found)


def _sympy_values(expr: object, symbols: list[object]) -> np.ndarray:
    import sympy

    func = sympy.lambdify(symbols, expr, modules="numpy")
    result = func(*[_point(str(s)) for s in symbols])
    return np.broadcast_to(np.asarray(result, dtype=complex), (POINTS,)).copy()


#: Characters the fast readers know (anything else: not theirs, found by one regex search).
_FOREIGN_CHARACTER = re.compile(r"[^A-Za-z0-9\s\\+\-*/^_(){}\[\]=&|,.;:!]")
_COMMAND = re.compile(r"\\([a-zA-Z]+)")
#: Reader tokens beyond which no normal form is computed (expanding a long product costs
#: milliseconds to seconds; equivalence search is about formulas of a line or less).
MAX_FAST_TOKENS = 40


_KNOWN_COMMANDS = frozenset(
    set(LOGIC_COMMANDS) | set(_ALGEBRA_COMMANDS) | GREEK | set(FUNCTIONS) | IGNORED_COMMANDS
)


def _fast_readers_may_take(latex: str) -> bool:
    """A cheap (C-speed) pre-check: only known characters and commands, and not too long."""
    if _FOREIGN_CHARACTER.search(latex):
        return False
    known = _KNOWN_COMMANDS
    if not set(_COMMAND.findall(latex)) <= known:
        return False
    return len(latex) <= 4 * MAX_FAST_TOKENS


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
    fast = _fast_readers_may_take(latex)
    try:
        logic = logic_formula(latex) if fast else None
        if logic is not None:  # NumPy over the truth table: no time limit needed
            return _logic_tokens_of(logic)
        found = evaluate_algebra(latex) if fast else None
    except RecursionError as exc:
        raise CanonicalFormError("expression nested too deeply", "too-large") from exc
    if found is not None:  # NumPy over a few points: microseconds, no time limit needed
        return _evaluated_tokens(found)
    if not sympy:
        raise CanonicalFormError("not a formula the fast readers take", "sympy-unparsable")
    from mathsearch.indexer.sympy_latex import known_commands

    known_commands()  # the parser is built once per process, outside the time limit
    from mathsearch.indexer.time_limit import run_with_time_limit

    try:
        return run_with_time_limit(
            _sympy_tokens_untimed,
            limit,
            (latex,),
            error=CanonicalFormError,
            what="the canonical form",
            failure_reason="sympy-unparsable",
        )
    except RecursionError as exc:
        raise CanonicalFormError("expression nested too deeply", "too-large") from exc
