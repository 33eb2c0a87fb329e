"""SymPy-generated equivalent expression pairs (expemb seed, section 4 and appendix B).

The seed takes valid univariate expressions (Lample and Charton 2019 style random trees), applies
SymPy's rewriting functions (appendix B, Table 9) and keeps every result that is visually
different but equivalent, adding both ``(x1, x2)`` and ``(x2, x1)``; expressions that give NaN
are excluded and inputs and outputs have at most five operators (section 4, "Dataset").

* :func:`random_expression`: a random unary-binary tree of ``1 .. max_ops`` operators over the
  seed's operator list (arithmetic ``+ - * / abs pow sqrt``, trigonometric ``sin .. atan``,
  hyperbolic ``sinh .. atanh``, ``ln exp``), leaves ``x`` or a small non-zero integer;
* :data:`OPERATIONS`: ``simplify expand factor cancel trigsimp expand_log logcombine`` and
  ``rewrite`` of trigonometric (hyperbolic) expressions in terms of other trigonometric
  (hyperbolic) functions - each run under
  :func:`~mathsearch.indexer.time_limit.run_with_time_limit`;
* :func:`equivalent_forms` / :func:`generate_pairs`: the pairs as prefix tokens
  (:func:`mathsearch.indexer.prefix.expr_to_prefix`, the E-Gen convention).

Example::

    rng = random.Random(0)
    pairs = generate_pairs(50, rng, timeout=1.0)   # [(tokens_a, tokens_b), (tokens_b, ...), ...]

Torch-free; SymPy only.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from typing import Any

import sympy

from mathsearch.indexer.prefix import PrefixError, expr_to_prefix
from mathsearch.indexer.semvec_prefix import token_arity
from mathsearch.indexer.time_limit import run_with_time_limit

logger = logging.getLogger(__name__)

__all__ = [
    "BINARY",
    "OPERATIONS",
    "UNARY",
    "equivalent_forms",
    "generate_pairs",
    "operator_count",
    "random_expression",
]

X = sympy.Symbol("x")
#: Binary operators of the seed's list.
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
}
_UNARY_NAMES = (
    "abs sqrt sin cos tan cot sec csc asin acos atan sinh cosh tanh coth asinh acosh atanh ln exp"
)
#: Unary operators of the seed's list (``abs`` and ``ln`` as SymPy's ``Abs`` and ``log``).
UNARY: dict[str, Callable[[Any], Any]] = {
    name: getattr(sympy, {"abs": "Abs", "ln": "log"}.get(name, name))
    for name in _UNARY_NAMES.split()
}
_TRIG = (sympy.sin, sympy.cos, sympy.tan, sympy.cot, sympy.sec, sympy.csc)
_HYPER = (sympy.sinh, sympy.cosh, sympy.tanh, sympy.coth)


def _rewrites(expr: sympy.Basic) -> list[sympy.Basic]:
    """``rewrite`` in terms of each other trigonometric / hyperbolic function (Table 9)."""
    out = []
    for family in (_TRIG, _HYPER):
        present = {f for f in family if expr.has(f)}
        if present:
            out += [expr.rewrite(target) for target in family if target not in present]
    return out


#: SymPy operations of appendix B (Table 9); each gives zero or more forms.
OPERATIONS: dict[str, Callable[[sympy.Basic], list[sympy.Basic]]] = {
    "simplify": lambda e: [sympy.simplify(e)],
    "expand": lambda e: [sympy.expand(e)],
    "factor": lambda e: [sympy.factor(e)],
    "cancel": lambda e: [sympy.cancel(e)],
    "trigsimp": lambda e: [sympy.trigsimp(e)],
    "expand_log": lambda e: [sympy.expand_log(e, force=True)],
    "logcombine": lambda e: [sympy.logcombine(e, force=True)],
    "rewrite": _rewrites,
}


def operator_count(tokens: list[str] | tuple[str, ...]) -> int:
    """Operators (tokens with operands) in a prefix sequence; a rational ``/ p q`` counts one."""
    return sum(1 for token in tokens if token_arity(token) > 0)


def _draw(rng: random.Random, ops: int) -> Any:
    if ops == 0:
        return (
            X if rng.random() < 0.6 else sympy.Integer(rng.choice([-5, -4, -3, -2, -1, 2, 3, 4, 5]))
        )
    if rng.random() < 0.5:
        return UNARY[rng.choice(list(UNARY))](_draw(rng, ops - 1))
    left = rng.randint(0, ops - 1)
    op = rng.choice(list(BINARY))
    a, b = _draw(rng, left), _draw(rng, ops - 1 - left)
    if op == "pow":  # small integer exponents keep expressions readable and finite
        b = sympy.Integer(rng.choice([-1, 2, 3]))
    return BINARY[op](a, b)


def _usable(expr: Any) -> bool:
    if not isinstance(expr, sympy.Expr) or not expr.has(X):
        return False
    return not expr.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo, sympy.I)


def random_expression(rng: random.Random, max_ops: int = 5, tries: int = 50) -> sympy.Expr:
    """A random univariate expression of 1 .. ``max_ops`` operators (with ``x``, finite)."""
    for _ in range(tries):
        expr = _draw(rng, rng.randint(1, max_ops))
        if _usable(expr):
            tokens = _prefix(expr)
            if tokens is not None and 0 < operator_count(tokens) <= max_ops:
                return expr
    return X + 1


def _prefix(expr: Any) -> list[str] | None:
    try:
        return expr_to_prefix(expr)
    except PrefixError:
        return None


def equivalent_forms(
    expr: sympy.Expr, *, timeout: float = 1.0, max_ops: int = 5
) -> Iterator[tuple[str, list[str]]]:
    """``(operation, prefix tokens)`` of each equivalent form differing from ``expr``.

    Each operation runs within ``timeout`` seconds (a timeout or SymPy error skips it); NaN,
    infinite or complex results and forms of more than ``max_ops`` operators are dropped.
    """
    source = _prefix(expr)
    seen = {tuple(source)} if source else set()
    for name, operation in OPERATIONS.items():
        try:
            forms = run_with_time_limit(
                operation, timeout, (expr,), error=PrefixError, what=f"SymPy {name}"
            )
        except PrefixError:
            continue
        except Exception as exc:  # SymPy raises many types on odd input
            logger.debug("%s failed on %s: %s", name, expr, exc)
            continue
        for form in forms:
            tokens = _prefix(form) if _usable(form) else None
            if tokens and tuple(tokens) not in seen and operator_count(tokens) <= max_ops:
                seen.add(tuple(tokens))
                yield name, tokens


def generate_pairs(
    expressions: int,
    rng: random.Random,
    *,
    timeout: float = 1.0,
    max_ops: int = 5,
) -> list[tuple[list[str], list[str]]]:
    """Pairs from ``expressions`` random expressions: for each equivalent form ``x2`` of an
    expression ``x1``, both ``(x1, x2)`` and ``(x2, x1)`` (section 4)."""
    pairs: list[tuple[list[str], list[str]]] = []
    for _ in range(expressions):
        expr = random_expression(rng, max_ops)
        source = _prefix(expr)
        if source is None:
            continue
        for _name, tokens in equivalent_forms(expr, timeout=timeout, max_ops=max_ops):
            pairs += [(source, tokens), (tokens, source)]
    logger.info("%d SymPy pairs from %d expressions", len(pairs), expressions)
    return pairs
