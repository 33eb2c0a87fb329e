"""SymPy prefix (Polish) sequences: the input of the seq2seq encoder (expemb seed, sections 3-4).

The seed writes an expression tree in Polish notation, e.g. ``sin(x)/cos(x)`` ->
``[div, sin, x, cos, x]``, and checks equivalence with SymPy (``simplify(a - b) == 0`` under a
time limit). Tokens follow the E-Gen data (``shared/data/egen``), so our sequences and that
training data share one vocabulary:

* binary ``+ - * / pow`` and ``d`` (``d x f`` is df/dx); n-ary SymPy ``Add``/``Mul`` are written
  right-nested (``a+b+c`` -> ``+ a + b c``); SymPy has no subtraction or division node, so
  ``a-b`` is ``+ a * -1 b`` and ``a/b`` is ``* a pow b -1`` (both forms occur in E-Gen);
* unary functions by name: ``sin cos tan cot sec csc asin ... sinh ... acsch ln exp sqrt abs``;
* leaves: symbol names (``x``), constants ``pi E I oo``, integers as one decimal token
  (``-5``), rationals ``/ p q``, floats as Python's ``repr`` (``0.5``).

What LaTeX adds beyond E-Gen uses extra tokens: relations ``= != < <= > >=``, ``int v f``,
``defint v a b f``, ``sum i a b f``, ``prod i a b f``, ``lim v p f``, ``factorial floor
ceiling conjugate sign re im gamma``, ``binomial min max``, ``fnN name a1 .. aN`` for an
undefined function, ``var:NAME`` for a symbol whose name is an operator or number token.

Parsing (:mod:`mathsearch.indexer.sympy_latex`): ``sympy.parsing.latex`` with the Lark backend
(antlr4 is
not installed), its grammar extended by the Greek letters it lacks (``\\pi`` -> constant ``pi``),
run under ``evaluate(False)`` so that ``9^{9^9}`` is never computed; the tree is then re-evaluated
bottom-up (canonical order, ``x+x`` -> ``2*x``, ``e^{y}`` -> ``exp y``) except numeric
powers/factorials too large to compute. Ambiguous readings: fewest calls of unusual function
names (``c(r-L)`` is a product, ``f(x)`` a call), then the shallowest tree. An unknown command
fails fast, before the Earley parser.
Coverage (first 2,000 hep-th 2003 equations): 2.8 %; ARQMath task-2 topics 2020/21/22: 28/44/35 %.

Time limit (:mod:`mathsearch.indexer.time_limit`): SIGALRM in the main thread (repeated every 0.1 s,
since
Python drops an exception raised inside a garbage-collector callback), else a forked child killed
at the deadline. A signal cannot cut one long C call short; the numeric guards above keep SymPy
out of those.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import sympy
from sympy.core.function import AppliedUndef
from sympy.utilities.exceptions import SymPyDeprecationWarning

from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.logic_formula import LogicFormulaError, logic_prefix
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.sympy_latex import known_commands, parse_latex
from mathsearch.indexer.time_limit import run_with_time_limit


class PrefixError(IndexerError):
    """Reason codes: ``sympy-unparsable``, ``timeout``, ``too-large``, ``invalid-prefix``."""

    reason = "sympy-unparsable"


_NAMED = "sin cos tan cot sec csc asin acos atan acot asec acsc sinh cosh tanh coth sech csch"
_NAMED += " asinh acosh atanh acoth asech acsch exp sqrt factorial floor ceiling conjugate sign"
_UNARY: dict[str, Any] = {name: getattr(sympy, name) for name in _NAMED.split()}
_UNARY |= {"re": sympy.re, "im": sympy.im, "gamma": sympy.gamma, "ln": sympy.log, "abs": sympy.Abs}
_FUNCTION_TOKEN = {cls: token for token, cls in _UNARY.items() if token != "sqrt"}
_RELATIONS = {"=": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt}
_RELATIONS[">="] = sympy.Ge
_RELATION_TOKEN = {cls: token for token, cls in _RELATIONS.items()}
_BINARY = {"+", "-", "*", "/", "pow", "d", "int", "binomial", "min", "max", *_RELATIONS}
_ARITY = dict.fromkeys(_UNARY, 1) | dict.fromkeys(_BINARY, 2) | {"lim": 3}
_ARITY |= dict.fromkeys(("defint", "sum", "prod"), 4)
_CONSTANT_NAMES = "pi E I oo zoo nan true false"
_CONSTANTS = {name: getattr(sympy, name) for name in _CONSTANT_NAMES.split()}
_GUARDED = {"pow": sympy.Pow} | {f: getattr(sympy, f) for f in ("factorial", "gamma", "binomial")}
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)(e-?\d+)?|-?inf")
_FN = re.compile(r"fn(\d+)")
_MAX_BITS = 4096  # numeric powers / factorials larger than this stay unevaluated


# ----------------------------------------------------------------------------- SymPy -> prefix


def _leaf(expr: sympy.Basic) -> list[str]:
    if isinstance(expr, sympy.Symbol):
        name = re.sub(r"\s+", "_", str(expr.name))
        clash = (
            name in _ARITY or name in _CONSTANTS or _FN.fullmatch(name) or _FLOAT.fullmatch(name)
        )
        return ["var:" + name if clash or name.startswith("var:") else name]
    if isinstance(expr, sympy.Integer):
        if int(expr).bit_length() > _MAX_BITS:
            raise PrefixError(f"an integer of {int(expr).bit_length()} bits", "too-large")
        return [str(int(expr))]
    if isinstance(expr, sympy.Rational):
        return ["/", str(expr.p), str(expr.q)]
    if isinstance(expr, sympy.Float):
        return [repr(float(expr))]
    for token, constant in _CONSTANTS.items():
        if expr == constant:
            return [token]
    if expr == sympy.S.NegativeInfinity:
        return ["*", "-1", "oo"]
    raise PrefixError(f"no prefix token for {type(expr).__name__}", "sympy-unparsable")


def _fold(token: str, args: list[list[str]]) -> list[str]:
    out: list[str] = []
    for arg in args[:-1]:
        out += [token, *arg]
    return out + args[-1]


def _limits(head: str, limits: tuple[Any, ...]) -> list[str]:
    out: list[str] = []
    for limit in reversed(limits):
        if len(limit) == 1 and head == "int":
            out += ["int", *_walk(limit[0])]
        elif len(limit) == 3:
            out += ["defint" if head == "int" else head, *(t for x in limit for t in _walk(x))]
        else:
            raise PrefixError(f"{head} with limits {limit}", "sympy-unparsable")
    return out


def _walk(expr: Any) -> list[str]:
    if not isinstance(expr, sympy.Basic):
        raise PrefixError(f"not a SymPy expression: {type(expr).__name__}", "sympy-unparsable")
    if isinstance(expr, (sympy.Add, sympy.Mul, sympy.Min, sympy.Max)):
        token = {sympy.Add: "+", sympy.Mul: "*", sympy.Min: "min", sympy.Max: "max"}[expr.func]
        return _fold(token, [_walk(arg) for arg in expr.args])
    if isinstance(expr, sympy.Pow):
        base, power = expr.args
        if power == sympy.S.Half:
            return ["sqrt", *_walk(base)]
        return ["pow", *_walk(base), *_walk(power)]
    if isinstance(expr, sympy.log) and len(expr.args) == 2:
        return ["*", "ln", *_walk(expr.args[0]), "pow", "ln", *_walk(expr.args[1]), "-1"]
    if type(expr) in _FUNCTION_TOKEN and len(expr.args) == 1:
        return [_FUNCTION_TOKEN[type(expr)], *_walk(expr.args[0])]
    if type(expr) in _RELATION_TOKEN:
        return [_RELATION_TOKEN[type(expr)], *_walk(expr.lhs), *_walk(expr.rhs)]
    if isinstance(expr, sympy.binomial):
        return ["binomial", *_walk(expr.args[0]), *_walk(expr.args[1])]
    if isinstance(expr, sympy.Derivative):
        out: list[str] = []
        for variable, count in reversed(expr.variable_count):
            if not isinstance(count, sympy.Integer) or count > 64:
                raise PrefixError(f"derivative order {count}", "sympy-unparsable")
            out += ["d", *_walk(variable)] * int(count)
        return out + _walk(expr.expr)
    if isinstance(expr, sympy.Integral):
        return _limits("int", expr.limits) + _walk(expr.function)
    if isinstance(expr, (sympy.Sum, sympy.Product)):
        return _limits("sum" if isinstance(expr, sympy.Sum) else "prod", expr.limits) + _walk(
            expr.function
        )
    if isinstance(expr, sympy.Limit):
        return ["lim", *_walk(expr.args[1]), *_walk(expr.args[2]), *_walk(expr.args[0])]
    if isinstance(expr, AppliedUndef):
        name = re.sub(r"\s+", "_", str(expr.func.__name__))
        return [f"fn{len(expr.args)}", name, *(t for arg in expr.args for t in _walk(arg))]
    if not expr.args:
        return _leaf(expr)
    raise PrefixError(f"no prefix token for {type(expr).__name__}", "sympy-unparsable")


def expr_to_prefix(expr: sympy.Basic) -> list[str]:
    """Prefix tokens of a SymPy expression (E-Gen conventions, see the module docstring)."""
    try:
        return _walk(expr)
    except RecursionError as exc:
        raise PrefixError("expression nested too deeply", "too-large") from exc
    except (TypeError, ValueError, AttributeError) as exc:  # odd objects inside the tree
        raise PrefixError(f"{type(exc).__name__}: {exc}"[:200], "sympy-unparsable") from exc


# ----------------------------------------------------------------------------- prefix -> SymPy


def _number(token: str) -> sympy.Basic | None:
    if _INT.fullmatch(token):
        return sympy.Integer(int(token))
    if _FLOAT.fullmatch(token):
        return sympy.Float(float(token))
    return None


def _too_big(func: Any, args: tuple[Any, ...]) -> bool:
    """Numeric powers / factorials whose value would be huge (and hang in C code)."""
    if func is sympy.Pow and all(a.is_number for a in args):
        if not all(a.is_Rational for a in args):  # e.g. 2^(2^65536) left unevaluated below
            return any(a.has(sympy.Pow) for a in args)
        base, power = args
        bits = math.log2(max(abs(int(base.p)), abs(int(base.q)), 2))
        return abs(int(power.p)) * bits > _MAX_BITS
    if func in (sympy.factorial, sympy.gamma, sympy.binomial):
        return any(a.is_Integer and abs(int(a)) > 1000 for a in args)
    return False


def _build(token: str, args: list[sympy.Basic], evaluate: bool) -> sympy.Basic:
    evaluate = evaluate and not _too_big(_GUARDED.get(token), tuple(args))
    if token in _RELATIONS:
        return _RELATIONS[token](*args, evaluate=False)
    if token in ("+", "-"):
        right = args[1] if token == "+" else sympy.Mul(-1, args[1], evaluate=evaluate)
        return sympy.Add(args[0], right, evaluate=evaluate)
    if token in ("*", "/"):
        right = args[1] if token == "*" else sympy.Pow(args[1], -1, evaluate=evaluate)
        return sympy.Mul(args[0], right, evaluate=evaluate)
    if token == "pow":
        return sympy.Pow(args[0], args[1], evaluate=evaluate)
    if token == "d":
        return sympy.Derivative(args[1], args[0])
    if token == "int":
        return sympy.Integral(args[1], args[0])
    if token in ("defint", "sum", "prod"):
        cls = {"defint": sympy.Integral, "sum": sympy.Sum, "prod": sympy.Product}[token]
        return cls(args[3], (args[0], args[1], args[2]))
    if token == "lim":
        return sympy.Limit(args[2], args[0], args[1])
    if token in ("binomial", "min", "max"):
        cls = {"binomial": sympy.binomial, "min": sympy.Min, "max": sympy.Max}[token]
        return cls(*args, evaluate=evaluate)
    if token == "sqrt":
        return sympy.Pow(args[0], sympy.S.Half, evaluate=evaluate)
    return _UNARY[token](args[0], evaluate=evaluate)


def prefix_to_expr(tokens: list[str], evaluate: bool = True) -> sympy.Basic:
    """The SymPy expression of prefix ``tokens`` (the inverse of :func:`expr_to_prefix`).

    Raises :class:`PrefixError` (``invalid-prefix``) on a malformed sequence.
    """
    if not tokens:
        raise PrefixError("empty prefix sequence", "invalid-prefix")
    # Evaluate iteratively from the right (no recursion limit on long sequences).
    stack: list[sympy.Basic] = []
    try:
        for position in range(len(tokens) - 1, -1, -1):
            token = tokens[position]
            fn = _FN.fullmatch(token)
            arity = int(fn.group(1)) + 1 if fn else _ARITY.get(token, 0)
            if len(stack) < arity:
                raise PrefixError(f"{token!r} at {position} lacks operands", "invalid-prefix")
            args = [stack.pop() for _ in range(arity)]
            if fn:
                stack.append(sympy.Function(str(args[0]))(*args[1:]))
            elif arity:
                stack.append(_build(token, args, evaluate))
            elif token in _CONSTANTS:
                stack.append(_CONSTANTS[token])
            else:
                number = _number(token)
                stack.append(
                    number if number is not None else sympy.Symbol(token.removeprefix("var:"))
                )
    except (TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise PrefixError(f"cannot build the expression: {exc}", "invalid-prefix") from exc
    if len(stack) != 1:
        raise PrefixError(f"{len(stack)} expressions instead of one", "invalid-prefix")
    return stack[0]


def parse_prefix_line(line: str) -> list[str]:
    """Tokens of one E-Gen line (``[]`` for the blank line between clusters); checks arity."""
    tokens = line.split()
    open_slots = 1
    for position, token in enumerate(tokens):
        if open_slots == 0:
            raise PrefixError(f"extra tokens from {position}: {line.strip()!r}", "invalid-prefix")
        fn = _FN.fullmatch(token)
        open_slots += (int(fn.group(1)) + 1 if fn else _ARITY.get(token, 0)) - 1
    if tokens and open_slots:
        raise PrefixError(f"{open_slots} operands missing: {line.strip()!r}", "invalid-prefix")
    return tokens


def equivalent(a: sympy.Basic, b: sympy.Basic, timeout: float | None = None) -> bool:
    """The seed's check: ``simplify(a - b) == 0`` within ``timeout`` (a timeout is ``False``)."""
    try:
        return bool(_call_with_timeout(_simplifies_to_zero, (a, b), _timeout(timeout)))
    except PrefixError:
        return False


def _simplifies_to_zero(a: sympy.Basic, b: sympy.Basic) -> bool:
    if isinstance(a, sympy.core.relational.Relational) or isinstance(
        b, sympy.core.relational.Relational
    ):
        return sympy.srepr(a) == sympy.srepr(b)
    return sympy.simplify(a - b) == 0


# ----------------------------------------------------------------------------- LaTeX -> SymPy

_CLEAN = [
    (
        re.compile(
            r"\\(?:label|tag)\s*\{[^{}]*\}|\\(?:nonumber|notag|displaystyle|textstyle)"
            r"(?![a-zA-Z])|\\[bB]igg?[lr]?(?![a-zA-Z])"
        ),
        "",
    ),
    (re.compile(r"\\(?:mathrm|mathit|mathbf|text|boldsymbol)\s*\{\s*([a-ce-zA-Z])\s*\}"), r"\1"),
    (re.compile(r"\\(?:mathrm|text|operatorname)\s*\{\s*([a-zA-Z]{2,})\s*\}"), r"\\mathit{\1}"),
    (re.compile(r"\\cdot(?![a-zA-Z])"), r"\\cdot "),
    (re.compile(r"[\s,.;]+$|^\s*\$+|\$+\s*$"), ""),
]


def _canonical(expr: sympy.Basic) -> sympy.Basic:
    """Re-evaluate an unevaluated tree bottom-up, leaving huge numeric values unevaluated."""
    if isinstance(expr, sympy.Symbol):
        name = str(expr.name)
        return sympy.pi if name == "pi" else sympy.Symbol(name)
    if not expr.args:
        return expr
    args = [_canonical(arg) if isinstance(arg, sympy.Basic) else arg for arg in expr.args]
    if isinstance(expr, sympy.Pow) and args[0] == sympy.Symbol("e"):
        return sympy.exp(args[1])
    if isinstance(expr, sympy.core.relational.Relational):
        return expr.func(*args, evaluate=False)
    if _too_big(expr.func, tuple(args)):
        return expr.func(*args, evaluate=False)
    if isinstance(expr, sympy.Limit):
        return sympy.Limit(args[0], args[1], args[2])
    return expr.func(*args)


def latex_to_expr_untimed(latex: str, evaluate: bool = True) -> Any:
    """The SymPy expression of a LaTeX formula, no time limit (the caller sets one).

    Raises:
        PrefixError: an unknown command (before the parser runs), an unreadable formula, or
            one nested too deeply.
    """
    known = known_commands()
    text = latex
    for pattern, replacement in _CLEAN:
        text = pattern.sub(replacement, text)
    commands = set(re.findall(r"\\(?:\\|([a-zA-Z]+))", text)) - {""}  # "\\\\" is no command
    unknown = sorted(commands - known)
    if unknown:
        names = ", ".join("\\" + name for name in unknown[:5])
        raise PrefixError(f"unsupported command {names}", "sympy-unparsable")
    try:
        expr = parse_latex(text)
        if isinstance(expr, sympy.Basic) and evaluate:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SymPyDeprecationWarning)
                expr = _canonical(expr)
    except RecursionError as exc:
        raise PrefixError("expression nested too deeply", "too-large") from exc
    except Exception as exc:  # lark / SymPy raise many types on unreadable input
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise PrefixError(f"{type(exc).__name__}: {detail}", "sympy-unparsable") from exc
    return expr


def _latex_to_prefix_untimed(latex: str, evaluate: bool, max_tokens: int) -> list[str]:
    tokens = expr_to_prefix(latex_to_expr_untimed(latex, evaluate))
    if len(tokens) > max_tokens:
        raise PrefixError(f"{len(tokens)} tokens > {max_tokens}", "too-large")
    return tokens


def latex_to_prefix(
    latex: str,
    timeout: float | None = None,
    *,
    evaluate: bool = True,
    settings: IndexerSettings | None = None,
) -> list[str]:
    """Prefix tokens of a LaTeX formula read by SymPy; raises :class:`PrefixError`.

    A propositional formula (``\\land``, ``\\lor``, ``\\lnot``, ...), which SymPy's LaTeX
    grammar does not read, goes to :func:`mathsearch.indexer.logic_formula.logic_prefix`
    instead: the SemVec boolean tokens (``and or xor implies not``) the seq2seq model trained on.

    ``timeout`` defaults to ``settings.sympy_timeout`` (``MATHSEARCH_SYMPY_TIMEOUT``);
    ``evaluate=False`` keeps the tree as written (no canonical ordering or folding).
    """
    settings = settings or IndexerSettings.from_env()
    if not isinstance(latex, str) or not latex.strip():
        raise PrefixError("empty formula", "sympy-unparsable")
    if len(latex) > settings.max_equation_chars:
        raise PrefixError(f"{len(latex)} characters > {settings.max_equation_chars}", "too-large")
    try:
        logic = logic_prefix(latex)  # SymPy has no logic: the SemVec tokens and/or/xor/not
    except LogicFormulaError as exc:
        raise PrefixError(str(exc), "sympy-unparsable") from exc
    if logic is not None:
        if len(logic) > settings.max_nodes:
            raise PrefixError(f"{len(logic)} tokens > {settings.max_nodes}", "too-large")
        return logic
    known_commands()  # the parser is built once per process (~1.5 s), outside the time limit
    limit = settings.sympy_timeout if timeout is None else timeout
    args = (latex, evaluate, settings.max_nodes)
    return _call_with_timeout(_latex_to_prefix_untimed, args, limit)


def _timeout(timeout: float | None) -> float:
    return IndexerSettings.from_env().sympy_timeout if timeout is None else timeout


# ----------------------------------------------------------------------------- time limits


def _call_with_timeout(func: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> Any:
    """``func(*args)`` under :func:`~mathsearch.indexer.time_limit.run_with_time_limit`
    (PrefixError)."""
    return run_with_time_limit(
        func, timeout, args, error=PrefixError, what="SymPy", failure_reason="sympy-unparsable"
    )
