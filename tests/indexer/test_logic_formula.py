"""mathsearch.indexer.logic_formula: LaTeX logic -> the SemVec prefix tokens the seq2seq model
trained on, checked against SemVec's own trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from mathsearch.indexer.logic_formula import LogicFormulaError, logic_prefix
from mathsearch.indexer.prefix import PrefixError, latex_to_prefix
from mathsearch.indexer.semvec import read_semvec
from mathsearch.indexer.semvec_prefix import read_semvec_prefix

BOOLEAN5 = Path(__file__).parents[1] / "resources" / "indexer" / "semvec"
BOOLEAN5 = BOOLEAN5 / "boolean5-validationset.json.gz"


def test_the_latex_of_every_semvec_member_reads_as_its_tree() -> None:
    """The LaTeX the equivalence evaluation indexes and the prefix the model trained on
    (SemVec's trees) give the same tokens, member by member."""
    as_latex = read_semvec(BOOLEAN5)
    as_prefix = read_semvec_prefix(BOOLEAN5)
    pairs = [
        (member.latex, prefix)
        for latex_class, prefix_class in zip(as_latex, as_prefix, strict=True)
        for member, prefix in zip(latex_class.members, prefix_class.members, strict=True)
    ]
    assert len(pairs) >= 10
    for latex, prefix in pairs:
        assert logic_prefix(latex) == list(prefix), latex
        assert latex_to_prefix(latex) == list(prefix)


@pytest.mark.parametrize(
    ("latex", "tokens"),
    [
        (r"a \land b \lor c", ["or", "and", "a", "b", "c"]),
        (r"a \Rightarrow b \Rightarrow c", ["implies", "a", "implies", "b", "c"]),
        (r"a \Leftrightarrow b", ["not", "xor", "a", "b"]),
        (r"\neg (a \wedge \top)", ["not", "and", "a", "1"]),
    ],
)
def test_precedence_and_spellings(latex: str, tokens: list[str]) -> None:
    assert logic_prefix(latex) == tokens


def test_what_is_not_logic_or_does_not_parse() -> None:
    assert logic_prefix(r"\frac{1}{x}") is None
    with pytest.raises(LogicFormulaError):
        logic_prefix(r"(a \land b")
    with pytest.raises(PrefixError) as caught:
        latex_to_prefix(r"a \lor")
    assert caught.value.reason == "sympy-unparsable"
