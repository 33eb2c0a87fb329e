"""Canonical forms: equivalent formulas share ``form:``, different ones do not."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from mathsearch.indexer.canonical_form import (
    CanonicalFormError,
    canonical_tokens,
    evaluate_algebra,
    is_logic,
    truth_table,
)
from mathsearch.indexer.semvec import read_semvec

SEMVEC = Path(__file__).parents[1] / "resources" / "indexer" / "semvec"


def form(latex: str) -> str:
    return canonical_tokens(latex, timeout=10)[0]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (r"x^{-1}", r"\frac{1}{x}"),
        (r"(a+b)^2", r"a^2 + 2ab + b^2"),
        (r"\frac{a}{b} + \frac{c}{d}", r"\frac{ad + bc}{bd}"),
        (r"E = m c^2", r"m c^{2} = E"),
        (r"(b - b) \cdot a", r"0"),
        (r"e^{x} e^{y}", r"e^{x+y}"),
        (r"\sqrt{x}", r"x^{1/2}"),
        (r"\sqrt[3]{x}", r"x^{1/3}"),  # SymPy's LaTeX reader beside the simple one
        (r"\sin^2 x + \cos^2 x", r"\cos^{2}(x) + \sin(x)^{2}"),
        (r"\frac{1}{2} m v^2", r"m v^{2}/2,"),
        (r"\omega_{0}^2 \alpha", r"\alpha\,\omega_0^{2}"),
        (r"\lnot (a \land b)", r"\lnot a \lor \lnot b"),
        (r"a \Rightarrow b", r"\lnot a \lor b"),
        (r"a \oplus b", r"(a \land \lnot b) \lor (\lnot a \land b)"),
        (r"a \lor (b \land \lnot b)", r"a \land a"),
        (r"a \land \lnot a", r"c \land \lnot c"),
    ],
)
def test_equivalent_formulas_share_the_form_token(a: str, b: str) -> None:
    assert form(a) == form(b)
    assert form(a).startswith("form:")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (r"x^{-1}", r"x^{-2}"),
        (r"(a+b)^2", r"a^2 + b^2"),
        (r"a \Rightarrow b", r"b \Rightarrow a"),
        (r"a \land b", r"a \lor b"),
        (r"a - b = 0", r"a + b = 0"),
    ],
)
def test_different_formulas_do_not(a: str, b: str) -> None:
    assert form(a) != form(b)


def test_terms_give_partial_credit() -> None:
    """Two polynomials that share a monomial share a term: token, not the form: token."""
    a = set(canonical_tokens(r"x^2 + 3y", timeout=10))
    b = set(canonical_tokens(r"x^2 + 5z", timeout=10))
    shared = {t for t in a & b if t.startswith("term:")}
    assert len(shared) == 1
    assert not {t for t in a & b if t.startswith("form:")}


def test_truth_table_drops_variables_the_function_ignores() -> None:
    names, table = truth_table(r"(a \land b) \lor (a \land \lnot b)")
    assert names == ("a",)
    assert table.tolist() == [False, True]
    names, table = truth_table(r"a \Rightarrow b")
    assert names == ("a", "b")
    assert table.tolist() == [True, True, False, True]


def test_truth_table_matches_python_on_every_assignment() -> None:
    latex = r"(a \oplus b) \Rightarrow (\lnot c \lor (a \land d))"
    names, table = truth_table(latex)
    assert names == ("a", "b", "c", "d")
    for i, (a, b, c, d) in enumerate(itertools.product([False, True], repeat=4)):
        assert bool(table[i]) == ((a == b) or (not c) or (a and d))


@pytest.mark.parametrize("name", ["boolean5", "oneVarPoly10"])
def test_semvec_classes_are_separated_by_their_form(name: str) -> None:
    """On real SemVec sets, members of one class share a form and classes do not."""
    classes = read_semvec(SEMVEC / f"{name}-validationset.json.gz")
    forms: dict[str, set[str]] = {}
    for semvec_class in classes:
        forms[semvec_class.class_id] = {form(member.latex) for member in semvec_class.members}
    assert all(len(found) == 1 for found in forms.values()), forms
    assert len({next(iter(found)) for found in forms.values()}) == len(forms)


def test_logic_detection_and_the_simple_reader_stay_in_their_lanes() -> None:
    assert is_logic(r"a \land b")
    assert not is_logic(r"a + b")
    assert not is_logic(r"\alpha \land \beta")  # Greek letters are not logic variables here
    assert evaluate_algebra(r"\int x dx") is None  # goes to SymPy's reader
    found = evaluate_algebra(r"2ab + a(b + c)")
    assert found is not None and found.variables == {"a", "b", "c"} and len(found.terms) == 2


def test_the_evaluation_is_the_formulas_value_at_the_points() -> None:
    """2ab + a(b + c) at the points equals the same arithmetic on the variables' values."""
    from mathsearch.indexer.canonical_form import _point

    found = evaluate_algebra(r"2ab + a(b + c)")
    a, b, c = (_point(name) for name in "abc")
    assert np.allclose(found.value, 2 * a * b + a * (b + c))
    assert np.allclose(evaluate_algebra(r"\frac{\sin^2 x}{1 - \cos^{2}(x)}").value, 1)


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (r"\int_0^1 \Phi \, d\mu \bigotimes", "sympy-unparsable"),
        (r"a \land", "sympy-unparsable"),
        ("", "sympy-unparsable"),
        (" \\lor ".join(f"x_{{{i}}}" for i in range(3)), "sympy-unparsable"),
    ],
)
def test_unreadable_formulas_raise_with_a_reason(latex: str, reason: str) -> None:
    with pytest.raises(CanonicalFormError) as caught:
        canonical_tokens(latex, timeout=10)
    assert caught.value.reason == reason


def test_too_many_variables_is_too_large() -> None:
    latex = r" \lor ".join("abcdefghijklmnopq")  # 17 variables
    with pytest.raises(CanonicalFormError) as caught:
        canonical_tokens(latex, timeout=10)
    assert caught.value.reason == "too-large"


def test_the_tokens_are_deterministic_across_calls() -> None:
    latex = r"(a \land b) \lor (\lnot a \land c)"
    first = canonical_tokens(latex, timeout=10)
    assert first == canonical_tokens(latex, timeout=10)
    assert np.unique([t.split(":")[0] for t in first]).tolist() == ["form", "term", "vars"]


def test_the_fast_readers_leave_sympy_out() -> None:
    with pytest.raises(CanonicalFormError):
        canonical_tokens(r"\sqrt[3]{x}", timeout=10, sympy=False)
    assert canonical_tokens(r"x^{1/3}", timeout=10, sympy=False)[0] == form(r"\sqrt[3]{x}")


@pytest.mark.parametrize(("mode", "filled"), [("fast", True), ("sympy", True), ("off", False)])
def test_the_featuriser_fills_canonical_by_setting(
    monkeypatch: pytest.MonkeyPatch, mode: str, filled: bool
) -> None:
    from mathsearch.indexer.parse import Featuriser

    monkeypatch.setenv("MATHSEARCH_CANONICAL_FORM", mode)
    parsed = Featuriser().parse_latex(r"(a+b)^{2}")
    assert bool(parsed.canonical) is filled
    assert ("canonical" in parsed.to_dict()) is filled
    assert parsed.canonical_error is None


def test_a_bad_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from mathsearch.indexer.settings import IndexerSettings, SettingsError

    monkeypatch.setenv("MATHSEARCH_CANONICAL_FORM", "maybe")
    with pytest.raises(SettingsError, match="fast, sympy, off"):
        IndexerSettings.from_env()
