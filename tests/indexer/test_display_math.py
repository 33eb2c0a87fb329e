"""Finding display math, splitting aligned rows and cleaning equation bodies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mathsearch.indexer.display_math import (
    DISPLAY_ENVIRONMENTS,
    clean_latex,
    find_display_math,
    iter_displays,
    mask_comments,
    split_display,
)


def latexes(text: str) -> list[str]:
    return [item.latex for item in find_display_math(text)]


@pytest.mark.parametrize(
    "env", ["equation", "equation*", "gather*", "multline", "multline*", "displaymath", "align*"]
)
def test_every_environment_is_found(env: str) -> None:
    text = f"Before \\begin{{{env}}} E = mc^2 \\end{{{env}}} after."
    [item] = find_display_math(text)
    assert (item.env, item.latex, item.row) == (env, "E = mc^2", 0)
    assert text[item.start : item.end] == f"\\begin{{{env}}} E = mc^2 \\end{{{env}}}"


def test_all_names_are_known() -> None:
    for base in ("equation", "align", "gather", "multline", "eqnarray", "flalign", "alignat"):
        assert base in DISPLAY_ENVIRONMENTS and f"{base}*" in DISPLAY_ENVIRONMENTS


def test_bracket_and_double_dollar_displays_but_not_inline_math() -> None:
    text = r"Inline $a+b$ and $x$$y$ and \$5, then \[ \int f \] and $$ g = h $$ end."
    found = find_display_math(text)
    assert [(item.env, item.latex) for item in found] == [("\\[", r"\int f"), ("$$", "g = h")]


def test_row_break_with_a_bracket_is_not_a_display() -> None:
    text = r"\begin{eqnarray} a &=& b \\[2mm] c &=& d \end{eqnarray}"
    assert latexes(text) == ["a = b", "c = d"]


def test_alignat_argument_is_dropped_and_columns_become_spaces() -> None:
    text = r"\begin{alignat}{2} p &= q &\quad r &= s \\ t &= u & v &= w \end{alignat}"
    assert latexes(text) == [r"p = q \quad r = s", "t = u v = w"]


def test_rows_of_align_like_environments_are_separate_equations() -> None:
    text = r"""
    \begin{align}
      a &= b \label{one} \\
      c &= d \tag{2} \\
      \nonumber \\
      e &= f \notag
    \end{align}
    \begin{gather*} x = 1 \\ y = 2 \end{gather*}
    \begin{flalign} &u = v & \\ &w = z & \end{flalign}
    """
    found = find_display_math(text)
    assert [item.latex for item in found] == ["a = b", "c = d", "e = f", "x = 1", "y = 2",
                                              "u = v", "w = z"]  # fmt: skip
    assert [item.row for item in found] == [0, 1, 2, 0, 1, 0, 1]
    assert len({item.start for item in found}) == 3


def test_nested_structures_are_not_split() -> None:
    text = r"""
    \begin{eqnarray}
      M &=& \left( \begin{array}{cc} 1 & 2 \\ 3 & 4 \end{array} \right) \\
      f &=& \begin{cases} 0 & x<0 \\ 1 & x \ge 0 \end{cases} \\
      g &=& {a \\ b}
    \end{eqnarray}
    """
    assert latexes(text) == [
        r"M = \left( \begin{array}{cc} 1 & 2 \\ 3 & 4 \end{array} \right)",
        r"f = \begin{cases} 0 & x<0 \\ 1 & x \ge 0 \end{cases}",
        r"g = {a \\ b}",
    ]


def test_equation_with_split_or_aligned_and_multline_are_one_equation() -> None:
    text = r"""
    \begin{equation}\begin{split} u &= v \\ &= w \end{split}\end{equation}
    \begin{equation} \begin{aligned} a &= b \\ c &= d \end{aligned} \label{x} \end{equation}
    \begin{multline} m = 1 + 2 \\ + 3 + 4 \\ + 5 \end{multline}
    """
    assert latexes(text) == [
        r"\begin{split} u &= v \\ &= w \end{split}",
        r"\begin{aligned} a &= b \\ c &= d \end{aligned}",
        "m = 1 + 2 + 3 + 4 + 5",
    ]


def test_continuation_rows_join_the_previous_equation() -> None:
    text = r"""
    \begin{eqnarray}
      S &=& \int dx \, \mathcal{L} \nonumber \\
        & & \qquad + \int dy \, \mathcal{M} \\
      T &=& a - \nonumber \\ & & b \\
      U &=& \Bigl[ c \nonumber \\ d \Bigr] \\
      V &=& e \nonumber\\ &=& f
    \end{eqnarray}
    """
    assert latexes(text) == [
        r"S = \int dx \, \mathcal{L} \qquad + \int dy \, \mathcal{M}",
        "T = a - b",
        r"U = \Bigl[ c d \Bigr]",
        "V = e",
        "= f",
    ]
    separate = find_display_math(text, merge_continuations=False)
    assert len(separate) == 8


def test_cleaning_removes_labels_tags_comments_and_numbering() -> None:
    dirty = "a = b % a comment with \\label{no}\n + c \\label{eq:a} \\tag*{3} \\% percent \\notag"
    assert clean_latex(dirty) == r"a = b + c \% percent"
    assert clean_latex(r"x \label{a{b}c} y \nonumber") == "x y"
    assert clean_latex(r"\phi=(1-P)U+iPU\eqno(4.1) ") == r"\phi=(1-P)U+iPU"


def test_comments_verbatim_and_definitions_hide_environments() -> None:
    text = r"""
    % \begin{equation} commented \end{equation}
    \newcommand{\be}{\begin{equation}} \def\ee{\end{equation}}
    \begin{verbatim} \begin{equation} verbatim \end{equation} \end{verbatim}
    \verb|$$ not math $$|
    \begin{equation} kept \end{equation}
    """
    assert latexes(text) == ["kept"]


def test_mask_comments_keeps_offsets_and_escaped_percent() -> None:
    text = "a % hidden\n b \\% kept % gone"
    masked = mask_comments(text)
    assert len(masked) == len(text)
    assert "hidden" not in masked and "gone" not in masked and "\\% kept" in masked


def test_unterminated_displays_do_not_swallow_the_next_one() -> None:
    text = r"""
    \begin{equation} lost
    \begin{equation} found \end{equation}
    \[ unclosed bracket

    $$ unclosed dollars

    a stray $ dollar

    \begin{align} x &= y \end{align}
    """
    assert latexes(text) == ["found", "x = y"]


def test_empty_environments_give_nothing() -> None:
    text = r"\begin{equation} \label{x} \end{equation} \begin{align} \\ \nonumber \\ \end{align}"
    assert latexes(text) == []
    assert split_display("align", r" & \\ & ") == []


def test_raw_displays_expose_bodies_and_spans() -> None:
    text = r"x \begin{eqnarray*} a &=& b \end{eqnarray*} y"
    [raw] = iter_displays(text)
    assert raw.env == "eqnarray*" and raw.body == " a &=& b "
    assert text[raw.start : raw.end].startswith(r"\begin{eqnarray*}")


_PIECES = st.sampled_from(
    [
        "\\begin{equation}", "\\end{equation}", "\\begin{align}", "\\end{align}", "\\\\", "&",
        "$$", "$", "\\[", "\\]", "{", "}", "%", "\n", "\n\n", "x", "\\label{", "\\def\\be{",
        "\\begin{array}", "\\end{array}", "\\verb|", "\\", "\\$", "\\begin{alignat}{",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60).map("".join))
def test_random_text_never_raises(text: str) -> None:
    for item in find_display_math(text):
        assert 0 <= item.start < item.end <= len(text)
        assert item.latex == item.latex.strip() and item.latex
