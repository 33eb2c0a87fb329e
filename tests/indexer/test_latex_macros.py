"""User macro definitions and their TeX-like expansion, including the limits on runaway macros."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.errors import LimitExceeded
from mathsearch.indexer.latex_macros import (
    EXPANSION_LIMIT,
    Macro,
    blank_definitions,
    collect_macros,
    environment_shorthands,
    expand,
    expand_macros,
    find_definitions,
)
from mathsearch.indexer.settings import IndexerSettings

PREAMBLE = r"""
\newcommand{\R}{\mathbb{R}}
\newcommand\C{\mathbb{C}}
\newcommand{\vev}[1]{\langle #1 \rangle}
\newcommand{\Dslash}[1][D]{{#1\!\!\!/}}
\renewcommand{\vec}[1]{\mathbf{#1}}
\providecommand{\R}{\text{not this}}
\def\half{{1\over2}}
\def\pd#1#2{\frac{\partial #1}{\partial #2}}
\def\pair(#1,#2){\left(#1,#2\right)}
\DeclareMathOperator{\Tr}{Tr}
\DeclareMathOperator*{\argmax}{arg\,max}
\let\eps\varepsilon
\let\avg=\vev
\newcommand{\nn}{\nonumber\\}
\def\al{\alpha}
"""


@pytest.fixture(scope="module")
def table():
    return collect_macros(PREAMBLE)


def test_definitions_of_every_kind_are_collected(table) -> None:
    assert table.macros["R"] == Macro("R", 0, r"\mathbb{R}")  # \providecommand did not override
    assert table.macros["C"].body == r"\mathbb{C}"  # name without braces
    assert table.macros["vev"].nargs == 1
    assert table.macros["Dslash"].default == "D"
    assert table.macros["pd"].nargs == 2 and table.macros["pd"].delimiters == ("", "")
    assert table.macros["pair"].prefix == "(" and table.macros["pair"].delimiters == (",", ")")
    assert table.macros["Tr"].body == r"\operatorname{Tr}"
    assert table.macros["argmax"].body == r"\operatorname*{arg\,max}"
    assert table.macros["eps"].body == r"\varepsilon"
    assert table.macros["avg"].nargs == 1  # \let copies the meaning of a user macro


def test_arguments_are_groups_or_single_tokens(table) -> None:
    assert expand_macros(r"\vev{x y}", table) == r"\langle x y \rangle"
    assert expand_macros(r"\vev x", table) == r"\langle x \rangle"
    assert expand_macros(r"\vev\phi", table) == r"\langle \phi \rangle"
    assert expand_macros(r"\pd{f}{x} = \pd fx", table) == (
        r"\frac{\partial f}{\partial x} = \frac{\partial f}{\partial x}"
    )
    assert expand_macros(r"\vec v", table) == r"\mathbf{v}"


def test_optional_first_argument_and_delimited_parameters(table) -> None:
    assert expand_macros(r"\Dslash \Dslash[\partial]", table) == r"{D\!\!\!/}{\partial\!\!\!/}"
    assert expand_macros(r"\pair(a,{b,c})", table) == r"\left(a,b,c\right)"
    assert expand_macros(r"\pair x", table) == r"\pair x"  # does not match its parameter text


def test_operators_aliases_and_nested_macros(table) -> None:
    assert expand_macros(r"\Tr\, \eps \argmax_x", table) == (
        r"\operatorname{Tr}\, \varepsilon\operatorname*{arg\,max}_x"
    )
    # the space after \R is eaten by the tokenizer, as in TeX
    assert expand_macros(r"\avg{\R}", table) == r"\langle \mathbb{R}\rangle"


def test_control_words_stay_separate_tokens(table) -> None:
    # \al b must become "\alpha b", never the control word \alphab
    assert expand_macros(r"\al b", table) == r"\alpha b"
    assert expand_macros(r"\al\al", table) == r"\alpha\alpha"
    loose = collect_macros(r"\def\x{\alpha}\def\y#1{\beta#1}")
    assert expand_macros(r"\y c + \x\y{d}", loose) == r"\beta c + \alpha\beta d"


def test_arguments_may_come_after_the_replacement() -> None:
    table = collect_macros(r"\def\w{\half}\def\half#1{\frac{#1}{2}}\def\y{\z}\def\z#1{[#1]}")
    assert expand_macros(r"\w{3} + \y abc", table) == r"\frac{3}{2} + [a]bc"
    assert expand_macros(r"\z", table) == r"\z"  # missing argument: left as written


def test_row_break_macros_expand(table) -> None:
    assert expand_macros(r"a &=& b \nn c &=& d", table) == r"a &=& b \nonumber\\c &=& d"


@pytest.mark.parametrize(
    "preamble, call",
    [
        (r"\def\a{\a\a}", r"\a"),
        (r"\newcommand{\x}{\x}", r"x = \x"),
        (r"\def\a#1{\a{#1#1}}", r"\a{y}"),
        (r"\newcommand{\b}{\b\b\b}", r"\b"),
        (r"\let\p\q \def\q{\p}", r"\p"),
    ],
)
def test_runaway_macros_raise_limit_exceeded(preamble: str, call: str) -> None:
    table = collect_macros(preamble)
    with pytest.raises(LimitExceeded) as caught:
        expand_macros(call, table, IndexerSettings(max_macro_expansions=500))
    assert caught.value.reason == EXPANSION_LIMIT == "macro-expansion-limit"


def test_exponential_growth_stops_at_the_length_cap() -> None:
    table = collect_macros(r"\def\a{\b\b}\def\b{\c\c}\def\c{\d\d}\def\d{xxxxxxxxxxxxxxxxxxxx}")
    with pytest.raises(LimitExceeded):
        expand_macros(r"\a\a\a", table, IndexerSettings(max_equation_chars=200))
    assert len(expand_macros(r"\a", table)) == 160


def test_environment_shorthands_are_found_through_aliases() -> None:
    table = collect_macros(
        r"\newcommand{\be}{\begin{equation}}\def\ee{\end{equation}}\let\beq\be"
        r"\def\bel#1{\begin{equation}\label{#1}}\newcommand{\R}{\mathbb{R}}"
        r"\newcommand{\nn}{\nonumber\\[2pt]}\def\beqa{\bea}\def\bea{$$}"
        r"\newenvironment{eqn}{\begin{equation}}{\end{equation}}"
    )
    shorthands = environment_shorthands(table)
    assert set(shorthands.macros) == {"be", "ee", "beq", "bel", "beqa", "bea"}
    assert set(shorthands.environments) == {"eqn"}
    text = r"\be x \ee \beq y\ee \bel{k} z \ee \begin{eqn} w \end{eqn} \R"
    out = expand(text, shorthands, max_expansions=100, max_chars=10_000)
    assert out.count(r"\begin{equation}") == 4 and out.count(r"\end{equation}") == 4
    assert r"\label{k}" in out and out.endswith(r"\R")  # other macros untouched


def test_definition_spans_and_blanking() -> None:
    text = r"A \newcommand{\be}{\begin{equation}} B \def\x#1{#1} C \let\y\x D"
    definitions = find_definitions(text)
    assert [d.command for d in definitions] == ["newcommand", "def", "let"]
    assert text[definitions[0].start : definitions[0].end] == r"\newcommand{\be}{\begin{equation}}"
    assert blank_definitions(text, definitions).split() == ["A", "B", "C", "D"]


def test_malformed_definitions_are_ignored() -> None:
    table = collect_macros(r"\newcommand{\a}[x]{y} \def\b{unclosed \newcommand \def\c#2{z}")
    assert "a" not in table.macros and "c" not in table.macros
    assert expand_macros(r"\a \b", table) == r"\a \b"


_TOKENS = st.sampled_from(
    [
        "\\a", "\\b", "\\x", "\\be", "{", "}", "#1", "#", "[", "]", "(", ",", ")", " ", "\\\\",
        "\\begin{equation}", "\\end{equation}", "x", "\\alpha", "\\def", "\\newcommand", "%",
    ]
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    definitions=st.lists(_TOKENS, max_size=25).map("".join),
    body=st.lists(_TOKENS, max_size=40).map("".join),
)
def test_expansion_terminates_on_random_input(definitions: str, body: str) -> None:
    preamble = r"\def\a{\b\b}\newcommand{\x}[2][q]{#1\x#2}" + definitions
    table = collect_macros(preamble)
    limits = IndexerSettings(max_macro_expansions=300, max_equation_chars=3000)
    try:
        out = expand_macros(body, table, limits)
    except LimitExceeded as exc:
        assert exc.reason == EXPANSION_LIMIT
    else:
        assert len(out) <= 3000 + 300  # joins may add a space per expansion
