"""SymPy prefix sequences (expemb seed, secs. 3-4): E-Gen tokens, inverse, time limits, errors."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import sympy
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.prefix import (
    PrefixError,
    equivalent,
    expr_to_prefix,
    latex_to_prefix,
    parse_prefix_line,
    prefix_to_expr,
)
from mathsearch.indexer.settings import IndexerSettings

x = sympy.Symbol("x")

# Verbatim lines of ../shared/data/egen (equiv_exprs_0, _1, _10, op_2, poly_1; _12 has CRLF).
EGEN_LINES = [
    "d x * 5 * x + * 5 pow x 2 * 2 x",
    "* 7 * pow x 3 + -1 * 3 pow x 5",
    "- * 21 pow x 8 * pow x 3 7",
    "+ tan * -2 * 0.25 * x 2 0",
    "+ * sec x sin / -2 / 2 x 0",
    "+ ln x + atanh 0 tan atan asinh 0",
    "pow - + 1 x 1 1",
    "d x + pow coth x -1 * E exp x",
    "+ ln x * abs sin acos ln x 0",
    "d x pow + 12 + * 4 x * 4 sqrt x -1\r\n",
]

# (LaTeX, expected tokens), checked by hand against the E-Gen conventions.
KNOWN = [
    (r"\frac{\sin(x)}{\cos(x)}", "* pow cos x -1 sin x"),
    (r"x^2+2x+1", "+ 1 + pow x 2 * 2 x"),
    (r"a - b", "+ a * -1 b"),
    (r"\sqrt{x} + |x|", "+ sqrt x abs x"),
    (r"\ln(x)", "ln x"),
    (r"e^{x}", "exp x"),
    (r"\frac{d}{dx} \sin x", "d x sin x"),
    (r"\frac{1}{2} x", "* / 1 2 x"),
    (r"\pi r^2", "* pi pow r 2"),
    (r"\int_0^1 x^2 dx", "defint x 0 1 pow x 2"),
    (r"\sum_{k=0}^{n} \binom{n}{k}", "sum k 0 n binomial n k"),
    (r"y = \cosh x", "= y cosh x"),
    (r"\Gamma(x+1)", "fn1 Gamma + 1 x"),
    (r"\alpha^{2}=c(r^{2}-L^{2}).", "= pow alpha 2 * c + pow r 2 * -1 pow L 2"),
]
# Slow but bounded (about 10 s and 40 MB here): a limit that failed to fire could not take the
# test run down (an exploding ambiguity such as "\cot x + ... + \cot x" grows without bound).
SLOW = r"\frac{1}{" * 300 + "x" + "}" * 300


@pytest.mark.parametrize(("latex", "expected"), KNOWN)
def test_known_prefix_outputs(latex: str, expected: str) -> None:
    assert latex_to_prefix(latex, timeout=10) == expected.split()


def test_evaluate_false_keeps_the_tree_as_written() -> None:
    assert latex_to_prefix("x + x", timeout=10) == ["*", "2", "x"]
    assert latex_to_prefix("x + x", timeout=10, evaluate=False) == ["+", "x", "x"]


def test_huge_numbers_are_never_computed() -> None:
    start = time.perf_counter()
    assert latex_to_prefix("9^{9^{9}}", timeout=10) == ["pow", "9", "387420489"]
    expr = prefix_to_expr(["pow", "9", "pow", "9", "9"])
    assert isinstance(expr, sympy.Pow) and expr.exp == 387420489
    assert prefix_to_expr(["factorial", "100000"]).args == (100000,)
    with pytest.raises(PrefixError) as caught:  # 2 * 2^65536 is computed, but not written out
        latex_to_prefix(r"2^{2^{2^{2^{2}}}} \cdot 2", timeout=10)
    assert caught.value.reason == "too-large"
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("line", EGEN_LINES)
def test_egen_lines_round_trip(line: str) -> None:
    tokens = parse_prefix_line(line)
    assert tokens == line.split()
    expr = prefix_to_expr(tokens)
    again = expr_to_prefix(expr)
    assert sympy.srepr(prefix_to_expr(again)) == sympy.srepr(expr)
    assert expr_to_prefix(prefix_to_expr(again)) == again  # a fixed point after one pass
    assert equivalent(prefix_to_expr(tokens, evaluate=False), prefix_to_expr(again), timeout=10)


def test_derivative_follows_egen() -> None:
    tokens = ["d", "x", "*", "3", "pow", "x", "-5"]
    expr = prefix_to_expr(tokens)
    assert expr == sympy.Derivative(3 * x**-5, x)
    assert expr_to_prefix(expr) == tokens
    assert expr_to_prefix(sympy.Derivative(x**3, x, 2)) == ["d", "x", "d", "x", "pow", "x", "3"]


def test_symbols_clashing_with_operators_are_escaped() -> None:
    d, sin = sympy.Symbol("d"), sympy.Symbol("sin")
    tokens = expr_to_prefix(d * sin + 2)
    assert "var:d" in tokens and "var:sin" in tokens
    assert prefix_to_expr(tokens) == d * sin + 2


def test_inverse_on_extended_tokens() -> None:
    for text in [
        "= fn2 f x y + x y",
        "defint x 0 1 pow x 2",
        "lim x 0 * pow x -1 sin x",
        "prod k 1 n k",
        "<= abs x 1",
        "* / 1 3 floor x",
        "int x exp x",
    ]:
        tokens = text.split()
        assert expr_to_prefix(prefix_to_expr(tokens)) == tokens


def test_egen_sample_of_200_lines() -> None:
    # 200 real E-Gen lines (16 sampled per file of ../shared/data/egen with Random(0)), verbatim
    sample = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "egen-sample.txt"
    lines = sample.read_text("utf-8").splitlines()
    assert len(lines) == 200
    for line in lines[:200]:
        expr = prefix_to_expr(parse_prefix_line(line))
        again = expr_to_prefix(expr)
        assert sympy.srepr(prefix_to_expr(again)) == sympy.srepr(expr), line


@pytest.mark.parametrize("text", ["+ x", "x y", "pow 2", "fn2 f x", "d 2 x", "sin"])
def test_malformed_prefix(text: str) -> None:
    with pytest.raises(PrefixError) as caught:
        prefix_to_expr(text.split())
    assert caught.value.reason == "invalid-prefix"


def test_parse_prefix_line() -> None:
    assert parse_prefix_line("\n") == []
    assert parse_prefix_line("* x 2\r\n") == ["*", "x", "2"]
    for bad in ("+ x", "x x"):
        with pytest.raises(PrefixError):
            parse_prefix_line(bad)


def test_equivalence_check() -> None:
    assert equivalent(sympy.sin(x) ** 2 + sympy.cos(x) ** 2, sympy.Integer(1), timeout=10)
    assert not equivalent(x, x + 1, timeout=10)


def test_unreadable_and_too_large() -> None:
    with pytest.raises(PrefixError) as caught:
        latex_to_prefix(r"\partial_\mu A^\mu", timeout=10)
    assert caught.value.reason == "sympy-unparsable"
    assert isinstance(caught.value, IndexerError)
    with pytest.raises(PrefixError) as caught:
        latex_to_prefix("x+" * 20 + "x", settings=IndexerSettings(max_equation_chars=10))
    assert caught.value.reason == "too-large"
    with pytest.raises(PrefixError) as caught:
        # a generous time limit, so a busy machine cannot turn the node limit into a timeout
        latex_to_prefix("+".join("abc" * 10), settings=IndexerSettings(max_nodes=10), timeout=60)
    assert caught.value.reason == "too-large"


def test_timeout_fires_in_the_main_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    latex_to_prefix("x", timeout=10)  # the parser is built outside any limit
    monkeypatch.setenv("MATHSEARCH_SYMPY_TIMEOUT", "0.5")  # the default limit
    start = time.perf_counter()
    with pytest.raises(PrefixError) as caught:
        latex_to_prefix(SLOW)
    assert caught.value.reason == "timeout"
    assert time.perf_counter() - start < 5
    assert latex_to_prefix("y^2", timeout=10) == ["pow", "y", "2"]  # still usable afterwards


def test_timeout_fires_in_a_worker_thread() -> None:
    outcome: dict[str, object] = {}

    def work() -> None:
        start = time.perf_counter()
        try:
            latex_to_prefix(SLOW, timeout=0.5)
        except PrefixError as exc:
            outcome["reason"] = exc.reason
        outcome["seconds"] = time.perf_counter() - start
        outcome["after"] = latex_to_prefix("x y", timeout=10)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert outcome["reason"] == "timeout"
    assert outcome["seconds"] < 10  # type: ignore[operator]
    assert outcome["after"] == ["*", "x", "y"]


def _only_prefix_errors(latex: str) -> None:
    try:
        tokens = latex_to_prefix(latex, timeout=0.3)
    except PrefixError as exc:
        assert exc.reason in {"sympy-unparsable", "timeout", "too-large"}
    else:
        assert tokens and all(isinstance(token, str) and token for token in tokens)


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=30))
def test_random_text_raises_only_prefix_errors(text: str) -> None:
    _only_prefix_errors(text)


PIECES = st.sampled_from(["{", "}", "\\", "^", "_", "(", ")", "|", "=", "!", "2", "x", r"\frac"])


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([k for k, _ in KNOWN]),
    st.lists(st.tuples(st.integers(0, 60), PIECES), max_size=3),
)
def test_mutated_formulas_raise_only_prefix_errors(
    latex: str, edits: list[tuple[int, str]]
) -> None:
    for offset, piece in edits:
        position = offset % (len(latex) + 1)
        latex = latex[:position] + piece + latex[position + 1 :]
    _only_prefix_errors(latex)
