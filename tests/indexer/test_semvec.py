"""SemVec sets: reading, ids, the token -> LaTeX mapping on real members, featurisation."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from mathsearch.indexer.errors import ExtractionError
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.indexer.semvec import (
    OPERATORS,
    SemvecTokenError,
    read_semvec,
    set_name,
    tokens_to_latex,
    validation_sets,
)

RESOURCES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "semvec"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "semvec"

# Real members of ../shared/data/semvec (boolean8, oneVarPoly13) and their LaTeX.
REAL = [
    (
        "~ ( ~ ( ~ ( ( b ^ a ) >> ( b ^ c ) ) ) )",
        r"\lnot (\lnot (\lnot ((b \oplus a) \Rightarrow (b \oplus c))))",
    ),
    ("( c & a ) & a", r"(c \land a) \land a"),
    ("a & ( c | c )", r"a \land (c \lor c)"),
    (
        "a * ( ( a + a ) - ( a - ( ( a + a ) + a ) ) )",
        r"a \cdot ((a + a) - (a - ((a + a) + a)))",
    ),
    ("c - ( b + ( b + a ) )", r"c - (b + (b + a))"),
]


@pytest.mark.parametrize(("tokens", "latex"), REAL)
def test_real_members_become_latex(tokens: str, latex: str) -> None:
    assert tokens_to_latex(tokens.split()) == latex


def test_power_takes_an_atom_or_a_group() -> None:
    assert tokens_to_latex(["a", "**", "2"]) == "a^{2}"
    tokens = ["(", "a", "+", "b", ")", "**", "(", "a", "-", "1", ")"]
    assert tokens_to_latex(tokens) == "(a + b)^{a - 1}"


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ("a % b", "'%' has no LaTeX mapping"),
        ("( a & b", "unbalanced '\\('"),
        ("a & b )", "unbalanced '\\)'"),
        ("a **", "without an exponent"),
        ("** a", "without a base"),
    ],
)
def test_unmapped_or_malformed_tokens_are_errors(tokens: str, message: str) -> None:
    with pytest.raises(SemvecTokenError, match=message):
        tokens_to_latex(tokens.split())


def test_reads_classes_with_stable_ids() -> None:
    classes = read_semvec(RESOURCES / "boolean5-validationset.json.gz")
    assert [c.canonical for c in classes] == [
        "And(a, c)",
        "Or(Not(a), Not(b))",
        "Not(a)",
        "Or(Not(b), c)",
    ]
    first = classes[0]
    assert first.set_name == "boolean5" and first.class_id == "boolean5-c0"
    assert [m.eq_id for m in first.members] == [f"boolean5-c0#{n}" for n in range(4)]
    assert first.members[0].latex == r"(a \lor a) \land c"  # the Original comes first
    assert first.members[1].latex == r"(c \land a) \land a"  # then the Noise, in file order
    assert {m.class_id for m in first.members} == {"boolean5-c0"}
    assert classes[2].members[0].latex == r"\lnot (\lnot (\lnot a))"


def test_every_fixture_member_featurises() -> None:
    classes = [c for path in validation_sets(RESOURCES) for c in read_semvec(path)]
    members = [m for c in classes for m in c.members]
    assert len(members) == (4 + 2 + 2 + 3) + (2 + 10 + 1 + 19)  # boolean5 + oneVarPoly10
    records = [EquationRecord(m.eq_id, m.class_id, 0, latex=m.latex) for m in members]
    with Featuriser() as featuriser:
        parsed = featuriser.parse_batch(records)
    assert all(isinstance(p, ParsedEquation) for p in parsed)
    tokens = {t for p in parsed if isinstance(p, ParsedEquation) for t in p.math_tokens}
    assert {"∧", "∨", "¬", "⊕", "⇒", "⋅"} <= tokens


def test_set_names() -> None:
    assert set_name("x/boolean8-validationset.json.gz") == "boolean8"
    assert set_name("oneVarPoly13-trainset.json.gz") == "oneVarPoly13"
    assert [p.name for p in validation_sets(RESOURCES)] == [
        "boolean5-validationset.json.gz",
        "oneVarPoly10-validationset.json.gz",
    ]


def test_unreadable_or_foreign_files_raise(tmp_path: Path) -> None:
    broken = tmp_path / "x-validationset.json.gz"
    broken.write_bytes(b"not gzip")
    with pytest.raises(ExtractionError, match="cannot read"):
        read_semvec(broken)
    listed = tmp_path / "y-validationset.json.gz"
    with gzip.open(listed, "wt") as handle:
        json.dump([1, 2], handle)
    with pytest.raises(ExtractionError, match="not a SemVec set"):
        read_semvec(listed)
    tokenless = tmp_path / "z-validationset.json.gz"
    with gzip.open(tokenless, "wt") as handle:
        json.dump({"a": {"Original": {"Tree": {}}}}, handle)
    with pytest.raises(ExtractionError, match="Tokens"):
        read_semvec(tokenless)


@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared/data/semvec")
def test_every_token_of_the_fifteen_sets_is_mapped() -> None:
    """Every token kind of the 15 validation sets maps; a sample of each set featurises."""
    paths = validation_sets(SHARED)
    assert len(paths) == 15
    kinds: Counter[str] = Counter()
    sample: list[EquationRecord] = []
    for path in paths:
        classes = read_semvec(path)  # raises SemvecTokenError on an unmapped token
        kinds.update(t for c in classes for m in c.members for t in m.tokens)
        sample += [
            EquationRecord(m.eq_id, m.class_id, 0, latex=m.latex)
            for c in classes[:10]
            for m in c.members[:3]
        ]
    operators = {k for k in kinds if not k.isalnum()}
    assert operators == set(OPERATORS) - {"**"} | {"(", ")"}  # ** never occurs
    assert {k for k in kinds if k.isalnum()} == set("abcdefghij")
    with Featuriser() as featuriser:
        parsed = featuriser.parse_batch(sample)
    assert len(sample) > 200
    assert all(isinstance(p, ParsedEquation) for p in parsed)
