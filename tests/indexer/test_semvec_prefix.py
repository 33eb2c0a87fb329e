"""SemVec trees -> prefix tokens (E-Gen convention + boolean tokens); arity and completeness."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy

from mathsearch.indexer.prefix import prefix_to_expr
from mathsearch.indexer.semvec import SemvecTokenError
from mathsearch.indexer.semvec_prefix import (
    is_complete_prefix,
    open_slots,
    read_semvec_prefix,
    token_arity,
    tree_to_prefix,
)

SEMVEC = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "semvec"


def test_boolean_set() -> None:
    classes = read_semvec_prefix(SEMVEC / "boolean5-validationset.json.gz")
    first = classes[0]
    assert (first.class_id, first.canonical) == ("boolean5-c0", "And(a, c)")
    # tokens ( a | a ) & c  ->  and or a a c
    assert first.members[0] == ("and", "or", "a", "a", "c")
    assert all(is_complete_prefix(m) for c in classes for m in c.members)


def test_polynomial_members_equal_their_class_in_sympy() -> None:
    classes = read_semvec_prefix(SEMVEC / "oneVarPoly10-validationset.json.gz")
    checked = 0
    for cls in classes:
        canonical = sympy.sympify(cls.canonical)
        for member in cls.members:
            assert sympy.expand(prefix_to_expr(list(member)) - canonical) == 0
            checked += 1
    assert checked >= 30


def test_tree_errors() -> None:
    with pytest.raises(SemvecTokenError):
        tree_to_prefix({"Name": "Start", "Children": {"child": {"Name": "Frobnicate"}}})
    with pytest.raises(SemvecTokenError):
        tree_to_prefix({"Name": "Not", "Children": {"left": {"Name": "a"}, "right": {"Name": "b"}}})
    with pytest.raises(SemvecTokenError):
        tree_to_prefix({"Children": {}})


def test_arity_and_completeness() -> None:
    assert [token_arity(t) for t in ("x", "-5", "sin", "not", "+", "and", "d", "fn2")] == [
        0, 0, 1, 1, 2, 2, 2, 3,
    ]  # fmt: skip
    assert is_complete_prefix(["+", "x", "sin", "x"])
    assert not is_complete_prefix(["+", "x"]) and not is_complete_prefix(["x", "x"])
    assert not is_complete_prefix([])
    assert open_slots(["+", "x"]) == 1 and open_slots(["x"]) == 0
