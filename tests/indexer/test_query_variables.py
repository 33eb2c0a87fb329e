r"""Query variables: ``\qvar{x}`` and ``?x`` in LaTeX queries become ``qvar`` nodes of their own."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from mathsearch.bench.corpus import read_topics
from mathsearch.core.paths import SHARED_DATA
from mathsearch.indexer.errors import ConversionError, IndexerError
from mathsearch.indexer.lexical import math_tokens
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.query_variables import (
    QVAR_TAG,
    Pattern,
    QueryVariableError,
    find_variables,
    has_variables,
    parse_pattern,
    to_qvar_syntax,
)
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.unify import match, unify

NTCIR_TOPICS = SHARED_DATA / "mathir-topics" / "topics.ntcir12-math-browsing.txt"


def _settings() -> IndexerSettings:
    return dataclasses.replace(IndexerSettings.from_env(), canonical_form="off")


@pytest.fixture(scope="module")
def featuriser() -> Featuriser:
    return Featuriser(converter="python", settings=_settings())


def _tree(featuriser: Featuriser, latex: str) -> MathNode:
    parsed = featuriser.parse_latex(latex)
    assert isinstance(parsed, ParsedEquation), parsed
    return parsed.tree


def _variable_parents(tree: MathNode) -> list[tuple[str, str]]:
    """(parent tag, variable name) of every variable node, in document order."""
    found = []
    for node in tree.iter():
        for child in node.children:
            if child.tag == QVAR_TAG:
                assert not child.children
                found.append((node.tag, child.text or ""))
    return found


# -- syntax ------------------------------------------------------------------------------------


def test_find_variables_reads_both_syntaxes_in_order_of_first_appearance() -> None:
    assert find_variables(r"\qvar{x}^2 + ?y = ?x") == ["x", "y"]
    assert find_variables(r"\frac{?a}{\qvar{*1*}} + ?\alpha + \qvar{ a }") == ["a", "*1*", "alpha"]
    assert find_variables(r"\qvar{\alpha} = ?\alpha") == ["alpha"]
    assert find_variables("?x1 + ?ab ?a?b") == ["x1", "ab", "a", "b"]
    assert find_variables(r"\qvarx + \text{?} + x^2") == []
    assert find_variables(r"\qvar{?x} + ?y") == ["?x", "y"]  # a \qvar name is read as is


def test_a_question_mark_without_a_name_is_literal_but_one_before_a_script_is_refused() -> None:
    # Real ARQMath topics end with a question mark.
    assert not has_variables(r"\sqrt{2i-1}?")
    assert not has_variables(r"f\circ g = g \circ f?")
    assert find_variables(r"a ? b \? c") == []
    assert has_variables("x + ?y")
    for bad in ("?_1", "x^?^2", "?{x}", "?'"):
        with pytest.raises(QueryVariableError) as raised:
            find_variables(bad)
        assert raised.value.reason == "bad-variable"
        assert has_variables(bad)  # malformed: parse_pattern will say what is wrong


@pytest.mark.parametrize("bad", [r"\qvar{}", r"\qvar{  }", r"\qvar x + 1", r"\qvar{a{b}} + 1"])
def test_malformed_qvar_is_refused(bad: str, featuriser: Featuriser) -> None:
    with pytest.raises(QueryVariableError) as raised:
        parse_pattern(bad, featuriser)
    assert raised.value.reason == "bad-variable"
    assert isinstance(raised.value, IndexerError)


def test_to_qvar_syntax_writes_the_ntcir_form() -> None:
    assert to_qvar_syntax(r"?f(?x) + 1?") == r"\qvar{f}(\qvar{x}) + 1?"
    assert to_qvar_syntax(r"\frac{?a}{\qvar{ b }} + ?\alpha") == (
        r"\frac{\qvar{a}}{\qvar{b}} + \qvar{alpha}"
    )
    assert to_qvar_syntax(r"\cos?x") == r"\cos\qvar{x}"
    assert find_variables(to_qvar_syntax("?a + ?b^{?a}")) == ["a", "b"]


# -- the parser marks variables ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "qvar", "parents"),
    [
        (r"\frac{?a}{2m}", r"\frac{\qvar{a}}{2m}", [("mfrac", "a")]),
        (r"x^{?y}_{?i}", r"x^{\qvar{y}}_{\qvar{i}}", [("msubsup", "i"), ("msubsup", "y")]),
        (r"e^?x", r"e^\qvar{x}", [("msup", "x")]),
        (r"?x_1", r"\qvar{x}_1", [("msub", "x")]),
        ("?f(?x)", r"\qvar{f}(\qvar{x})", [("mrow", "f"), ("mrow", "x")]),
        (r"\sqrt[?n]{?x}", r"\sqrt[\qvar{n}]{\qvar{x}}", [("mroot", "x"), ("mroot", "n")]),
        (r"\bar{?z} + \mathbf{?v}", r"\bar{\qvar{z}} + \mathbf{\qvar{v}}", None),
        (r"\cos?x", r"\cos\qvar{x}", [("mrow", "x")]),
        (
            r"\begin{pmatrix}?a & 0\\ 0 & ?a\end{pmatrix}",
            r"\begin{pmatrix}\qvar{a} & 0\\ 0 & \qvar{a}\end{pmatrix}",
            [("mtd", "a"), ("mtd", "a")],
        ),
    ],
)
def test_both_syntaxes_give_the_same_pattern_with_one_node_per_variable(
    question: str, qvar: str, parents: list[tuple[str, str]] | None, featuriser: Featuriser
) -> None:
    a = parse_pattern(question, featuriser)
    b = parse_pattern(qvar, featuriser)
    assert a.tree == b.tree
    assert (a.variables, a.neutral_latex, a.structure_tokens) == (
        b.variables,
        b.neutral_latex,
        b.structure_tokens,
    )
    found = _variable_parents(a.tree)
    assert len(found) == question.count("?")
    assert [name for _, name in found if name] and {n for _, n in found} == set(a.variables)
    if parents is not None:
        assert found == parents
    # The variable node stands exactly where the neutral identifier stands.
    neutral = _tree(featuriser, a.neutral_latex)
    assert [n.tag for n in neutral.iter()] == [
        "mi" if n.tag == QVAR_TAG else n.tag for n in a.tree.iter()
    ]


def test_a_pattern_keeps_the_query_and_feeds_the_first_stage(featuriser: Featuriser) -> None:
    pattern = parse_pattern(r"\frac{?a}{2m} + x^{?a}", featuriser)
    assert isinstance(pattern, Pattern)
    assert pattern.latex == r"\frac{?a}{2m} + x^{?a}"
    assert pattern.variables == ("a",)
    # one letter per name, one the query does not use (x is taken)
    assert pattern.neutral_latex == r"\frac{y}{2m} + x^{y}"
    assert pattern.tree.tag == "math"
    assert pattern.tree.children[0].tag == "mrow"
    tokens = set(pattern.structure_tokens)
    assert {"#frac|den|2", "2|next|m", "path:mfrac1:m", "x", "+", "mrow>mfrac"} <= tokens
    assert not any("num" in t or "msup1" in t or "qvar" in t or t == "a" for t in tokens)
    # the rest are exactly the neutral query's tokens that do not touch the variable
    neutral_tokens = math_tokens(_tree(featuriser, pattern.neutral_latex))
    assert tokens <= set(neutral_tokens)
    assert "#frac|num|y" in neutral_tokens and "x|sup|y" in neutral_tokens


def test_a_variable_inside_text_is_a_text_glob(featuriser: Featuriser) -> None:
    pattern = parse_pattern(r"\frac{\text{Frequency \qvar{a}}}{2}", featuriser)
    assert pattern.variables == ("a",)
    found = match(pattern.tree, _tree(featuriser, r"\frac{\text{Frequency of this item}}{2}"))
    assert (found.kind, found.bindings_latex()) == ("exact", {"a": r"\text{of this item}"})
    assert match(pattern.tree, _tree(featuriser, r"\frac{\text{Count of it}}{2}")).kind != "exact"


def test_a_query_of_only_variables_is_refused(featuriser: Featuriser) -> None:
    for latex in ("?x", r"\qvar{x}", r"?a\,?b", "{?a}{?b}", r"\;?x\quad"):
        with pytest.raises(QueryVariableError) as raised:
            parse_pattern(latex, featuriser)
        assert raised.value.reason == "only-wildcards", latex
    # one symbol or one structure is enough
    assert parse_pattern("?a + ?b", featuriser).variables == ("a", "b")
    assert parse_pattern("?a^{?b}", featuriser).variables == ("a", "b")


def test_a_variable_swallowed_by_conversion_is_refused(featuriser: Featuriser) -> None:
    for latex in (r"\operatorname{?f}(x)", r"x + 1 \label{?x}"):
        with pytest.raises(QueryVariableError) as raised:
            parse_pattern(latex, featuriser)
        assert raised.value.reason == "bad-variable", latex


def test_a_query_that_does_not_convert_raises_the_conversion_reason(
    featuriser: Featuriser,
) -> None:
    with pytest.raises(ConversionError) as raised:
        parse_pattern(r"\frac{?a}{2", featuriser)
    assert raised.value.reason == "unbalanced-braces"


def test_a_query_without_variables_is_a_plain_pattern(featuriser: Featuriser) -> None:
    pattern = parse_pattern("a^2+b^2", featuriser)
    assert pattern.variables == ()
    assert pattern.neutral_latex == "a^2+b^2"
    assert pattern.tree == _tree(featuriser, "a^2+b^2")


# -- real topics and the KaTeX converter ----------------------------------------------------------


@pytest.mark.skipif(not NTCIR_TOPICS.is_file(), reason=f"needs {NTCIR_TOPICS} (../shared/data)")
def test_the_20_ntcir_wildcard_topics_parse_into_patterns(featuriser: Featuriser) -> None:
    topics = [(t, latex) for t, latex in read_topics([NTCIR_TOPICS]) if "\\qvar" in latex]
    assert len(topics) == 20
    for topic, latex in topics:
        pattern = parse_pattern(latex, featuriser)
        assert len(pattern.variables) >= 1, topic
        assert pattern.variables == tuple(find_variables(latex)), topic
        names = [n.text for n in pattern.tree.iter() if n.tag == QVAR_TAG]
        assert set(names) == set(pattern.variables), topic  # every variable is a node
        assert len(names) == latex.count("\\qvar"), topic
        assert pattern.structure_tokens, topic
        # the neutral query converts, and the pattern unifies with it
        assert unify(pattern.tree, _tree(featuriser, pattern.neutral_latex)) is not None, topic


@pytest.fixture(scope="module")
def katex_featuriser() -> Iterator[Featuriser]:
    try:
        from mathsearch.indexer.converters import KatexBatchConverter

        converter = KatexBatchConverter(_settings())
        featuriser = Featuriser(converter=converter, settings=_settings())
        probe = featuriser.parse_latex("x")
    except IndexerError as exc:
        pytest.skip(f"KaTeX is unavailable: {exc}")
    if not isinstance(probe, ParsedEquation):
        featuriser.close()
        pytest.skip(f"KaTeX does not convert: {probe}")
    yield featuriser
    featuriser.close()


@pytest.mark.parametrize(
    ("query", "instance"),
    [
        (r"\frac{?a}{2m}", r"\frac{p^2}{2m}"),
        (r"x^{?y}_{?i}", r"x^{\alpha_1}_{k}"),
        (r"?f(?x)^2", r"g(t)^2"),
        (r"\sqrt{?x} + \bar{?z}", r"\sqrt{a+b} + \bar{w}"),
        (r"\mathbf{?v} \cdot ?w", r"\mathbf{u} \cdot k"),
        (r"\begin{bmatrix}?a & ?b\end{bmatrix}", r"\begin{bmatrix}1 & 2\end{bmatrix}"),
        (r"\sum_{?i=0}^{\infty} ?a_{?i}", r"\sum_{n=0}^{\infty} c_{n}"),
    ],
)
def test_the_katex_converter_also_gives_one_node_per_variable(
    query: str, instance: str, katex_featuriser: Featuriser, featuriser: Featuriser
) -> None:
    for conv in (katex_featuriser, featuriser):
        pattern = parse_pattern(query, conv)
        names = [n.text for n in pattern.tree.iter() if n.tag == QVAR_TAG]
        assert len(names) == query.count("?"), (conv.converter.name, names)
        found = match(pattern.tree, _tree(conv, instance))
        assert found.kind == "exact", (conv.converter.name, found)
